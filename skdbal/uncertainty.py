"""Uncertainty measures of predictive samples.

Every function takes the samples array ``P`` of shape ``(T, N, C)``: ``T``
stochastic forward passes over ``N`` inputs, each row a probability vector over
``C`` classes. Computation is in float64 with ``0 · log 0 = 0``. These are
plain NumPy functions: no torch, no I/O.

Examples
--------
>>> import numpy as np
>>> from skdbal.uncertainty import mutual_information, predictive_entropy
>>> P = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])  # two passes that disagree
>>> round(float(predictive_entropy(P)[0]), 4)   # log 2
0.6931
>>> round(float(mutual_information(P)[0]), 4)   # all of it is epistemic
0.6931
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "check_samples",
    "entropy",
    "predictive_entropy",
    "expected_entropy",
    "mutual_information",
    "variation_ratio",
    "mean_standard_deviation",
    "least_confidence",
    "Decomposition",
    "decompose",
    "decompose_gaussian",
]

_SUM_TOL = 1e-3


def check_samples(P, *, name: str = "samples") -> np.ndarray:
    """Validate an MC samples array and return it as float64.

    Parameters
    ----------
    P : array-like of shape (T, N, C)
        Probabilities from ``T`` passes; rows must lie in [0, 1] and sum to 1.
    name : str, default="samples"
        Name used in error messages.

    Returns
    -------
    P : ndarray of shape (T, N, C), dtype float64

    Raises
    ------
    ValueError
        If ``P`` is not 3-D, has ``T < 1``, ``N < 1`` or ``C < 1``, holds NaN
        or inf, values outside [0, 1], or rows that do not sum to 1.

    Examples
    --------
    >>> from skdbal.uncertainty import check_samples
    >>> P = check_samples([[[0.25, 0.75]]])         # T=1 pass, N=1 input, C=2 classes
    >>> P.shape, P.dtype.name
    ((1, 1, 2), 'float64')
    >>> check_samples([[[0.5, 0.6]]])
    Traceback (most recent call last):
        ...
    ValueError: samples rows must sum to 1 over the class axis (the last one); the worst row sums to 1.1
    """
    try:
        P = np.asarray(P, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array; {exc}") from None
    if P.ndim != 3:
        raise ValueError(
            f"{name} must have shape (T, n_samples, n_classes); got an array "
            f"with {P.ndim} dimension(s), shape {P.shape}"
        )
    T, N, C = P.shape
    if T < 1:
        raise ValueError(f"{name} must hold at least one pass (T >= 1); got T={T}")
    if N < 1 or C < 1:
        raise ValueError(f"{name} must hold at least one sample and one class; got shape {P.shape}")
    if not np.isfinite(P).all():
        raise ValueError(f"{name} contains NaN or infinity")
    if P.min() < -_SUM_TOL or P.max() > 1 + _SUM_TOL:
        raise ValueError(f"{name} must be probabilities in [0, 1]; got values in [{P.min()}, {P.max()}]")
    sums = P.sum(axis=-1)
    worst = np.abs(sums - 1.0).max()
    if worst > _SUM_TOL:
        raise ValueError(
            f"{name} rows must sum to 1 over the class axis (the last one); "
            f"the worst row sums to {sums.flat[np.abs(sums - 1.0).argmax()]:.6g}"
        )
    return P


def entropy(p, axis: int = -1) -> np.ndarray:
    """Shannon entropy (nats) along ``axis``, with ``0 · log 0 = 0``.

    Unlike the measures below, ``p`` is not validated: it is read as
    probabilities as given (entries ``<= 0`` contribute nothing).

    Parameters
    ----------
    p : array-like
        Probabilities, of any shape; the distributions run along ``axis``.
    axis : int, default=-1
        The axis that holds each distribution.

    Returns
    -------
    H : ndarray or float64 scalar
        ``-sum(p log p)`` along ``axis``, in float64: the shape of ``p``
        without ``axis`` (a :class:`numpy.float64` scalar for a 1-d ``p``).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import entropy
    >>> round(float(entropy([0.5, 0.5])), 4)                 # log 2
    0.6931
    >>> np.round(entropy([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]]), 4).tolist()   # 0 · log 0 adds nothing
    [0.6931, 0.5623]
    >>> np.round(entropy([[0.5, 0.25], [0.5, 0.75]], axis=0), 4).tolist()    # distributions in columns
    [0.6931, 0.5623]
    """
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=axis)


def predictive_entropy(P) -> np.ndarray:
    """Entropy of the MC-averaged prediction, ``H[p̄]``: the max-entropy score.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    scores : ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import predictive_entropy
    >>> P = np.array([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],     # pass 0 on points 0, 1, 2
    ...               [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]])    # pass 1; shape (T=2, N=3, C=2)
    >>> np.round(predictive_entropy(P), 4).tolist()         # H[0.5, 0.5] = log 2 for the first two
    [0.6931, 0.6931, 0.0]
    """
    P = check_samples(P)
    return np.maximum(entropy(P.mean(axis=0)), 0.0)


def expected_entropy(P) -> np.ndarray:
    """Mean entropy of the individual passes, ``E_t H[P[t]]`` (aleatoric part).

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    scores : ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import expected_entropy
    >>> P = np.array([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],     # pass 0 on points 0, 1, 2
    ...               [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]])    # pass 1; shape (T=2, N=3, C=2)
    >>> np.round(expected_entropy(P), 4).tolist()           # only point 1's passes are unsure
    [0.0, 0.6931, 0.0]
    """
    P = check_samples(P)
    return np.maximum(entropy(P).mean(axis=0), 0.0)


def mutual_information(P) -> np.ndarray:
    """BALD: ``H[p̄] − E_t H[P[t]]``, the epistemic part; never negative.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    scores : ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import mutual_information
    >>> P = np.array([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],     # pass 0 on points 0, 1, 2
    ...               [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]])    # pass 1; shape (T=2, N=3, C=2)
    >>> np.round(mutual_information(P), 4).tolist()         # only point 0's passes disagree
    [0.6931, 0.0, 0.0]
    """
    P = check_samples(P)
    mi = entropy(P.mean(axis=0)) - entropy(P).mean(axis=0)
    return np.maximum(mi, 0.0)  # clip round-off: MI >= 0 by Jensen



class Decomposition(NamedTuple):
    """Total, aleatoric and epistemic uncertainty of each input.

    ``total = aleatoric + epistemic`` (up to round-off; ``epistemic`` is
    clipped at 0). Returned by :func:`decompose` (entropies, in nats) and
    :func:`decompose_gaussian` (variances).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import decompose
    >>> total, aleatoric, epistemic = decompose(np.array([[[0.5, 0.5]], [[0.5, 0.5]]]))   # unpacks
    >>> round(float(total[0]), 4), round(float(aleatoric[0]), 4), float(epistemic[0])
    (0.6931, 0.6931, 0.0)
    """

    total: np.ndarray
    aleatoric: np.ndarray
    epistemic: np.ndarray


def decompose(P) -> Decomposition:
    """Split the predictive entropy into its aleatoric and epistemic parts.

    ``H[p̄] = E_t H[P[t]] + (H[p̄] − E_t H[P[t]])``: the total uncertainty
    (predictive entropy) is the expected entropy of each pass (aleatoric,
    the noise every pass sees) plus the mutual information between label
    and weights (epistemic, the passes' disagreement: BALD's score). One
    pass over the samples.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    Decomposition
        ``(total, aleatoric, epistemic)``, each of shape ``(N,)``.

    References
    ----------
    .. [1] S. Depeweg, J. M. Hernández-Lobato, F. Doshi-Velez and S. Udluft,
       "Decomposition of uncertainty in Bayesian deep learning for efficient
       and risk-sensitive learning", ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import decompose
    >>> P = np.array([[[0.5, 0.5], [1.0, 0.0]],        # pass 0: a coin, then sure of class 0
    ...               [[0.5, 0.5], [0.0, 1.0]]])       # pass 1: a coin, then sure of class 1
    >>> d = decompose(P)
    >>> d.total.round(4).tolist(), d.aleatoric.round(4).tolist(), d.epistemic.round(4).tolist()
    ([0.6931, 0.6931], [0.6931, 0.0], [0.0, 0.6931])
    """
    P = check_samples(P)
    total = entropy(P.mean(axis=0))
    aleatoric = entropy(P).mean(axis=0)
    return Decomposition(total, aleatoric, np.maximum(total - aleatoric, 0.0))


def decompose_gaussian(means, variances=0.0) -> Decomposition:
    """Split the predictive variance of a Gaussian mixture (Kendall and Gal).

    For ``T`` passes that each predict ``N(μ_t, σ_t²)``, the mixture's
    variance is ``Var_t[μ_t] + E_t[σ_t²]``: the passes' disagreement
    (epistemic) plus the noise each pass predicts (aleatoric). The
    regression counterpart of :func:`decompose`; per output, no sum.

    Parameters
    ----------
    means : array-like of shape (T, ...)
        The passes' predicted means.
    variances : array-like broadcastable to ``means``, default=0.0
        Their predicted (aleatoric) variances; a float for one noise
        variance.

    Returns
    -------
    Decomposition
        ``(total, aleatoric, epistemic)``, each of shape ``means.shape[1:]``.

    Raises
    ------
    ValueError
        If ``means`` has no pass axis, holds NaN or inf, or a variance is
        negative.

    References
    ----------
    .. [1] A. Kendall and Y. Gal, "What uncertainties do we need in Bayesian
       deep learning for computer vision?", NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import decompose_gaussian
    >>> means = np.array([[0.0, 1.0], [2.0, 1.0]])      # 2 passes, 2 inputs
    >>> d = decompose_gaussian(means, [[0.5, 3.0], [1.5, 3.0]])
    >>> d.epistemic.tolist(), d.aleatoric.tolist(), d.total.tolist()
    ([1.0, 0.0], [1.0, 3.0], [2.0, 3.0])
    """
    M = np.asarray(means, dtype=np.float64)
    if M.ndim < 2 or M.shape[0] < 1:
        raise ValueError(f"means must have shape (T, N, ...) with T >= 1; got {M.shape}")
    if not np.isfinite(M).all():
        raise ValueError("means must be finite")
    V = np.broadcast_to(np.asarray(variances, dtype=np.float64), M.shape)
    if not np.isfinite(V).all() or (V < 0).any():
        raise ValueError("variances must be finite and >= 0")
    epistemic = M.var(axis=0)
    aleatoric = V.mean(axis=0)
    return Decomposition(epistemic + aleatoric, aleatoric, epistemic)


def variation_ratio(P) -> np.ndarray:
    """Variation ratio ``1 − f_mode / T`` over the argmax classes of the passes.

    ``f_mode`` is how often the most frequent predicted class occurs among the
    ``T`` passes (Pilz, 2025, eq. 3). Ties inside a pass go to the lowest class.
    It is one of the acquisition functions of Gal et al. (2017); see
    :func:`least_confidence` for the form they write down.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    scores : ndarray of shape (N,)

    References
    ----------
    .. [1] P. Pilz, "Deep active learning for image data", preprint
       (Practical Work in AI, Institute for Machine Learning, Johannes
       Kepler University Linz), 2025.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import variation_ratio
    >>> P = np.array([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],     # pass 0 on points 0, 1, 2
    ...               [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]])    # pass 1; shape (T=2, N=3, C=2)
    >>> np.round(variation_ratio(P), 4).tolist()            # votes (0, 1), (0, 0), (0, 0)
    [0.5, 0.0, 0.0]
    """
    P = check_samples(P)
    T, N, C = P.shape
    votes = P.argmax(axis=-1)  # (T, N)
    counts = np.zeros((N, C), dtype=np.int64)
    np.add.at(counts, (np.broadcast_to(np.arange(N), (T, N)), votes), 1)
    return 1.0 - counts.max(axis=1) / T


def mean_standard_deviation(P) -> np.ndarray:
    """Mean over classes of the population std over passes (Pilz, 2025, eq. 4).

    ``(1/C) Σ_c sqrt(E_t[(P − E_t[P])²])``, one of the acquisition functions
    of Gal et al. (2017). Eq. 4 writes the variance as ``E_t[P²] − E_t[P]²``;
    it is computed in two passes instead, in float64: the mean first, then
    the mean of the squared deviations from it, both taken relative to the
    first pass. The one-pass form cancels catastrophically for near-certain
    points (up to 4e-9 for 20 identical float64 passes); this gives exactly 0
    for identical passes, so round-off does not rank near-certain points.
    Each input is computed on its own: chunks of the pool give the same
    scores.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    scores : ndarray of shape (N,)

    References
    ----------
    .. [1] P. Pilz, "Deep active learning for image data", preprint
       (Practical Work in AI, Institute for Machine Learning, Johannes
       Kepler University Linz), 2025.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import mean_standard_deviation
    >>> P = np.array([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],     # pass 0 on points 0, 1, 2
    ...               [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]])    # pass 1; shape (T=2, N=3, C=2)
    >>> np.round(mean_standard_deviation(P), 4).tolist()    # std of (1, 0) is 0.5
    [0.5, 0.0, 0.0]
    """
    P = check_samples(P)
    D = P - P[:1]                        # shifted by the first pass: identical passes give exact zeros
    D -= D.mean(axis=0)                  # two-pass: deviations from the mean ...
    var = np.square(D).mean(axis=0)      # ... then their mean square (population variance)
    return np.sqrt(var).mean(axis=-1)


def least_confidence(P) -> np.ndarray:
    """Least confidence ``1 − max_c p̄_c`` of the MC-averaged prediction.

    Gal et al. (2017) write the variation ratio as ``1 − max_y p(y | x)``
    and estimate it from the passes by the mode count
    (:func:`variation_ratio`). The two are different estimators, and they
    differ even as ``T → ∞``: the mode count measures how often the passes'
    argmax agrees, this one the confidence of the averaged distribution. For
    a single deterministic pass (``T = 1``), where the mode count is always 0,
    this is the score used for Gal et al.'s deterministic baseline.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    scores : ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.uncertainty import least_confidence
    >>> P = np.array([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],     # pass 0 on points 0, 1, 2
    ...               [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]])    # pass 1; shape (T=2, N=3, C=2)
    >>> np.round(least_confidence(P), 4).tolist()           # 1 - max of the mean [0.5, 0.5]
    [0.5, 0.5, 0.0]
    """
    P = check_samples(P)
    return 1.0 - P.mean(axis=0).max(axis=-1)

