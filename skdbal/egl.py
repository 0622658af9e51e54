"""Expected gradient length for regression, in closed form (Shukla, 2022).

For a regression network ``f_z`` trained with the squared loss
``l = ½‖y − f_z(x)‖²``, the gradient at a new label is
``∇_θ l = Σ_d (f_z,d(x) − y_d) ∇_θ f_z,d(x)``. Expected gradient length
(EGL) scores a pool point by the expected squared norm of that gradient
under the model's own predictive distribution, a mixture of ``K``
Gaussians ``N(μ_k(x), diag σ_k²(x))`` (MC-dropout passes or ensemble
members). In closed form:

``EGL(x) = tr(G(x) S(x))``, with ``G_{dd'} = ⟨∇_θ f_z,d, ∇_θ f_z,d'⟩`` the
Gram matrix of the output gradients and
``S = (1/K) Σ_k [diag σ_k² + (μ_k − f_z)(μ_k − f_z)ᵀ]`` the expected outer
product of the residual. For one output it is Shukla's (2022)
``‖∇_θ f_z(x)‖² · (1/K) Σ_k [σ_k²(x) + (μ_k(x) − f_z(x))²]``: the gradient's
length times the predictive variance around ``f_z`` (aleatoric plus
epistemic), which is why EGL and Bayesian uncertainty are "two sides of the
same coin" [1]_.

Plain NumPy over arrays; the gradients come from the network.

References
----------
.. [1] M. Shukla, "Bayesian uncertainty and expected gradient length —
   regression: two sides of the same coin?", WACV 2022, arXiv:2104.09493.

Examples
--------
>>> import numpy as np
>>> from skdbal.egl import expected_gradient_length
>>> # one point, two passes with means 1 and 3, variance 0.5 each, reference 2, ‖∇f‖² = 4
>>> expected_gradient_length(np.array([4.0]), np.array([[1.0], [3.0]]), np.array([[0.5], [0.5]]),
...                          reference=np.array([2.0])).tolist()          # 4 · (0.5 + 1)
[6.0]
"""
from __future__ import annotations

import numpy as np

__all__ = ["expected_gradient_length"]


def expected_gradient_length(gram, means, variances=None, *, reference=None) -> np.ndarray:
    """Closed-form expected gradient length of each pool point.

    Parameters
    ----------
    gram : array-like of shape (N,) or (N, D, D)
        ``‖∇_θ f_z(x)‖²`` for one output, or the Gram matrix
        ``⟨∇_θ f_z,d(x), ∇_θ f_z,d'(x)⟩`` for ``D`` outputs.
    means : array-like of shape (K, N) or (K, N, D)
        The ``K`` predictive means ``μ_k(x)``.
    variances : array-like of the shape of ``means``, or a float, optional
        The predicted variances ``σ_k²(x)`` (a heteroscedastic head), or
        one noise variance for all; 0 by default.
    reference : array-like of shape (N,) or (N, D), optional
        ``f_z(x)``, the prediction whose gradient is taken; by default the
        mean of ``means`` (then the second term is the epistemic variance).

    Returns
    -------
    ndarray of shape (N,)

    Raises
    ------
    ValueError
        For shapes that do not fit, negative variances or a ``gram`` that
        is not symmetric positive semi-definite on its diagonal.

    References
    ----------
    .. [1] W. Cai, Y. Zhang and J. Zhou, "Maximizing expected model change
       for active learning in regression", ICDM 2013.
    .. [2] M. Shukla, "Bayesian uncertainty and expected gradient length —
       regression: two sides of the same coin?", WACV 2022, arXiv:2104.09493.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.egl import expected_gradient_length
    >>> G = np.array([[[2.0, 1.0], [1.0, 3.0]]])                    # one point, two outputs
    >>> mu = np.array([[[1.0, 0.0]], [[-1.0, 0.0]]])               # two passes
    >>> expected_gradient_length(G, mu).tolist()                   # S = [[1, 0], [0, 0]]: tr(GS) = 2
    [2.0]
    """
    M = np.asarray(means, dtype=np.float64)
    if M.ndim == 2:
        M = M[:, :, None]
    if M.ndim != 3:
        raise ValueError(f"means must have shape (K, N) or (K, N, D); got {np.shape(means)}")
    K, N, D = M.shape
    G = np.asarray(gram, dtype=np.float64)
    if G.ndim == 1:
        G = G[:, None, None]
    if G.shape != (N, D, D):
        raise ValueError(f"gram must have shape ({N},) or ({N}, {D}, {D}) for these means; got {np.shape(gram)}")
    if not np.allclose(G, np.swapaxes(G, 1, 2)) or (np.diagonal(G, axis1=1, axis2=2) < 0).any():
        raise ValueError("gram must hold symmetric Gram matrices with non-negative diagonals")
    if variances is None:
        V = np.zeros_like(M)
    else:
        V = np.broadcast_to(np.asarray(variances, dtype=np.float64).reshape(
            np.shape(variances) + ((1,) if np.ndim(variances) == 2 else ())), M.shape)
        if (V < 0).any():
            raise ValueError("variances must be >= 0")
    if reference is None:
        f = M.mean(axis=0)
    else:
        f = np.asarray(reference, dtype=np.float64)
        f = f.reshape(N, -1) if f.size == N * D else f
        if f.shape != (N, D):
            raise ValueError(f"reference must have shape ({N},) or ({N}, {D}); got {np.shape(reference)}")
    R = M - f[None]                                              # (K, N, D) residuals of the means
    S = np.einsum("knd,kne->nde", R, R) / K                      # epistemic outer products
    S[:, np.arange(D), np.arange(D)] += V.mean(axis=0)           # aleatoric, diagonal
    return np.einsum("nde,ned->n", G, S)
