"""Expected gradient length in closed form, against hand-computed cases and a Monte Carlo estimate."""
import numpy as np
import pytest

from skdbal.acquisition.functional import egl_scores


def test_one_output_by_hand():
    gram = np.array([4.0, 1.0])
    means = np.array([[1.0, 0.0], [3.0, 0.0]])          # K = 2 passes, N = 2 points
    var = np.array([[0.5, 0.2], [0.5, 0.4]])
    # point 0: 4 · mean(0.5 + 1², 0.5 + 1²) = 6; point 1: 1 · mean(0.2, 0.4) = 0.3 (means agree)
    np.testing.assert_allclose(egl_scores(gram, means, var), [6.0, 0.3])
    # another reference: point 0's residuals are 1 - 1 = 0 and 3 - 1 = 2
    np.testing.assert_allclose(egl_scores(gram, means, var, reference=[1.0, 0.0]),
                               [4 * (0.5 + (0 + 4) / 2), 0.3])
    # one noise variance for all, and none
    np.testing.assert_allclose(egl_scores(gram, means, 0.1), [4 * 1.1, 0.1])
    np.testing.assert_allclose(egl_scores(gram, means), [4.0, 0.0])


def test_two_outputs_by_hand_and_by_sampling():
    G = np.array([[[2.0, 1.0], [1.0, 3.0]]])
    mu = np.array([[[1.0, 0.0]], [[-1.0, 0.0]]])
    var = np.array([[[0.1, 0.2]], [[0.3, 0.0]]])
    # S = [[1, 0], [0, 0]] + diag(0.2, 0.1): tr(G S) = 2 · 1.2 + 3 · 0.1
    assert egl_scores(G, mu, var)[0] == pytest.approx(2.7)
    # Monte Carlo: y from the mixture, the squared norm of Σ_d (f_d - y_d) ∇f_d with ∇f rows of J, JJᵀ = G
    J = np.linalg.cholesky(G[0])
    rng = np.random.RandomState(0)
    k = rng.randint(2, size=200000)
    y = mu[k, 0] + rng.randn(200000, 2) * np.sqrt(var[k, 0])
    grads = (0.0 - y) @ J                          # reference f = (0, 0), the mean of the means
    assert np.mean((grads ** 2).sum(1)) == pytest.approx(2.7, rel=0.02)


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.ones(3), np.ones((2, 2))), {}, r"gram must have shape \(2,\)"),
    ((np.ones(2), np.ones(2)), {}, "means must have shape"),
    ((np.ones(2), np.ones((2, 2)), -np.ones((2, 2))), {}, "variances must be >= 0"),
    ((np.ones(2), np.ones((2, 2))), dict(reference=np.ones(3)), "reference must have shape"),
    ((np.array([[[1.0, 2.0], [0.0, 1.0]]]), np.ones((2, 1, 2))), {}, "symmetric"),
])
def test_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        egl_scores(*args, **kwargs)
