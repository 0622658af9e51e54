"""On a CUDA GPU: training, trunk-cached sampling, the masks and their seeding. Skipped without one."""
import numpy as np
import pytest
import torch

from skdbal import ActiveLearner, MCDropoutClassifier

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")]


def _net(device="cuda", **params):
    return MCDropoutClassifier(max_epochs=5, module__kernel_size=3, classes=np.arange(10), random_state=0,
                               device=device, **params)


def _entropy(p):
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def _check_loop_queries_bald_s_top_points(digits, device):
    """Step by step, the learner (default strategy: BALD) queries the unlabelled rows with the largest
    mutual information of the net it holds, computed here from the net's own passes, and is taught the
    oracle's labels for them. Device-independent, so it can be tried on the CPU."""
    X, y = digits
    pool_X, pool_y, X_test, y_test = X[:400], y[:400], X[1000:], y[1000:]
    learner = ActiveLearner(_net(device), random_state=0, verbose=False)
    history = learner.simulate(pool_X, pool_y, n_queries=0, X_test=X_test, y_test=y_test)
    for step in (1, 2):
        labelled = learner.labelled_idx_.copy()
        unlabelled = np.setdiff1d(np.arange(400), labelled)
        P = learner.estimator_.predict_proba_samples(pool_X[unlabelled]).astype(np.float64)  # BALD's T
        mi = _entropy(P.mean(axis=0)) - _entropy(P).mean(axis=0)
        history = learner.simulate(pool_X, pool_y, n_queries=1, n_instances=5, warm_start=True,
                                   X_test=X_test, y_test=y_test)
        picked = np.asarray(history[-1]["query_indices"])
        assert history[-1]["step"] == step and np.isin(picked, unlabelled).all()
        # the picks are the top 5 by mutual information, up to round-off (CUDA sums are not bit-repeatable)
        at = np.searchsorted(unlabelled, picked)
        rest = np.delete(mi, at)
        assert mi[at].min() >= rest.max() - 1e-5 and mi[at].min() > np.median(mi)
        np.testing.assert_array_equal(learner.labelled_idx_, np.r_[labelled, picked])
        np.testing.assert_array_equal(learner.y_training_, pool_y[learner.labelled_idx_])
    assert [r["n_labels"] for r in history] == [20, 25, 30]
    assert history[-1]["accuracy"] == pytest.approx(learner.score(X_test, y_test))


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
    for params in ({"mask_seeding": "row"}, {"mask_seeding": "row_pcg64"}, {"mask_seeding": "stream"},
                   {"consistent_masks": True},
                   {"mc_dropout": False}):
        defaults = dict(batch_size=128, mask_seeding="auto", consistent_masks=False, mc_dropout=True)
        R = net.set_params(**{**defaults, **params}).predict_proba_samples(X[300:340], n_samples=5)
        assert R.shape == (5, 40, 10) and np.allclose(R.sum(-1), 1, atol=1e-5)


def test_the_loop_on_cuda(digits):
    _check_loop_queries_bald_s_top_points(digits, "cuda")


def test_philox_masks_on_cuda_are_the_cpus_bits():
    """``mask_seeding="row_philox"``: the same bits from CUDA's integer ops as from the CPU's, for every
    draw width, at the edges of the key range and for many blocks."""
    from skdbal.models._philox import PhiloxRowStreams, philox4x32, philox_kept

    keys = torch.tensor([0, 1, 2**31, 2**32 - 1, 2**32, 2**62 + 12345, 2**63 - 1])
    for keep in (0.75, 0.5, 1 - 1 / 1024, 0.9):
        for T, units, layer in ((100, 3872, 0), (100, 128, 1), (3, 37, 5)):
            cpu = philox_kept(keys, T, units, layer, keep)
            cuda = philox_kept(keys.cuda(), T, units, layer, keep)
            assert cuda.is_cuda and torch.equal(cuda.cpu(), cpu), (keep, T, units, layer)
    m = 0xFFFFFFFF
    words = philox4x32([torch.tensor(m, device="cuda")] * 4, [torch.tensor(m, device="cuda")] * 2)
    assert [int(w) for w in words] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]  # Random123's answer
    streams = PhiloxRowStreams([7, 8], "cuda")
    assert streams.masks(4, (6,), 0.75, "cuda").is_cuda


def test_auto_is_row_philox_on_cuda_and_gives_the_cpus_passes(digits):
    """``mask_seeding="auto"`` resolves to ``"row_philox"`` on CUDA; the same network on the CPU with
    ``"row_philox"`` draws the same masks, so the passes agree up to float round-off."""
    import copy

    X, y = digits
    net = _net().fit(X[:300], y[:300])
    assert net.mask_seeding_ == "row_philox"
    P = net.predict_proba_samples(X[300:400], n_samples=20)
    cpu = copy.deepcopy(net).set_params(device="cpu", mask_seeding="row_philox")
    cpu.module_.to("cpu")
    Q = cpu.predict_proba_samples(X[300:400], n_samples=20)
    np.testing.assert_allclose(P, Q, rtol=1e-4, atol=1e-5)
    old = MCDropoutClassifier._CUDA_HEAD_ROWS
    try:  # the CPU's row groups on CUDA: the same masks
        MCDropoutClassifier._CUDA_HEAD_ROWS = MCDropoutClassifier._HEAD_ROWS
        np.testing.assert_allclose(net.predict_proba_samples(X[300:400], n_samples=20), P, rtol=1e-4, atol=1e-5)
    finally:
        MCDropoutClassifier._CUDA_HEAD_ROWS = old
