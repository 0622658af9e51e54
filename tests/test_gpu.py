"""On a CUDA GPU: training, trunk-cached sampling, the masks and their seeding. Skipped without one."""
import numpy as np
import pytest
import torch

from skdbal import ActiveLearner, MCDropoutClassifier

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")]


def _net(**params):
    return MCDropoutClassifier(max_epochs=5, module__kernel_size=3, classes=np.arange(10), random_state=0,
                               device="cuda", **params)


def test_sampling_on_cuda_matches_its_own_seeding(digits):
    X, y = digits
    net = _net().fit(X[:300], y[:300])
    assert next(net.module_.parameters()).is_cuda
    P = net.predict_proba_samples(X[300:700], n_samples=20)
    assert P.shape == (20, 400, 10) and np.allclose(P.sum(-1), 1, atol=1e-5)
    assert not np.allclose(P[0], P[1])  # the passes differ
    # masks seeded per row, on the GPU too: order and batch size do not change a row's passes
    perm = np.random.RandomState(0).permutation(400)
    Q = net.set_params(batch_size=37).predict_proba_samples(X[300:700][perm], n_samples=20)
    np.testing.assert_allclose(Q[:, np.argsort(perm)], P, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(net.predict_proba_samples(X[300:310], n_samples=20),
                                  net.predict_proba_samples(X[300:310], n_samples=20))
    # the other samplers run on CUDA tensors as well
    for params in ({"mask_seeding": "stream"}, {"consistent_masks": True}, {"mc_dropout": False}):
        defaults = dict(batch_size=128, mask_seeding="row", consistent_masks=False, mc_dropout=True)
        R = net.set_params(**{**defaults, **params}).predict_proba_samples(X[300:340], n_samples=5)
        assert R.shape == (5, 40, 10) and np.allclose(R.sum(-1), 1, atol=1e-5)


def test_the_loop_on_cuda(digits):
    X, y = digits
    learner = ActiveLearner(_net(), random_state=0, verbose=False)
    history = learner.simulate(X[:400], y[:400], n_queries=2, n_instances=5, X_test=X[1000:], y_test=y[1000:])
    assert [r["n_labels"] for r in history] == [20, 25, 30]
