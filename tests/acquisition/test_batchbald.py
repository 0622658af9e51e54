"""BatchBALD: the joint mutual information against brute force, and its strategy."""
import itertools

import numpy as np
import pytest

from skdbal.acquisition._batchbald import _joint_entropies, batch_bald_select, conditional_entropy, joint_entropy_exact
from skdbal.uncertainty import mutual_information


def consistent(T, N, C, seed):
    return np.random.RandomState(seed).dirichlet(np.full(C, 0.5), size=(T, N))


def brute_joint_entropy(P, indices):
    """Σ over every label configuration of −p log p, p = mean over passes of the product."""
    T, _, C = P.shape
    H = 0.0
    for config in itertools.product(range(C), repeat=len(indices)):
        p = np.mean([np.prod([P[t, i, c] for i, c in zip(indices, config)]) for t in range(T)])
        H -= p * np.log(p) if p > 0 else 0.0
    return H


def test_joint_entropy_by_hand():
    P = consistent(5, 4, 3, 0)
    for idx in ([0], [1, 2], [0, 1, 3]):
        assert joint_entropy_exact(P, idx) == pytest.approx(brute_joint_entropy(P, idx))
    # one point: its predictive entropy; BALD = H − E H
    np.testing.assert_allclose(joint_entropy_exact(P, [2]) - conditional_entropy(P)[2],
                               mutual_information(P)[2])


def test_greedy_picks_match_brute_force_while_exact():
    for seed in range(5):
        P = consistent(6, 10, 3, seed)
        idx, gains = batch_bald_select(P, 3, n_joint_samples=1000)
        cond = conditional_entropy(P)
        picked, total = [], 0.0
        for _ in range(3):  # brute-force greedy
            mi = {n: brute_joint_entropy(P, picked + [n]) - cond[picked + [n]].sum()
                  for n in range(10) if n not in picked}
            best = max(mi, key=mi.get)
            picked.append(best)
            assert gains[len(picked) - 1] == pytest.approx(mi[best] - total, abs=1e-9)
            total = mi[best]
        assert idx.tolist() == picked


def test_batch_of_one_is_bald_and_chunks_do_not_matter():
    P = consistent(20, 50, 4, 1).astype(np.float32)
    idx, gains = batch_bald_select(P, 1)
    mi = mutual_information(P.astype(np.float64))
    assert idx[0] == np.argmax(mi) and gains[0] == pytest.approx(mi.max(), rel=1e-6)
    a = batch_bald_select(P, 5, chunk_size=1, n_joint_samples=50, random_state=0)
    b = batch_bald_select(P, 5, chunk_size=512, n_joint_samples=50, random_state=0)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1])


def test_a_copy_of_a_picked_point_gains_less_than_alone():
    P = consistent(10, 30, 3, 2)
    top = int(np.argmax(mutual_information(P)))
    P = np.concatenate([P, P[:, top:top + 1]], axis=1)   # point 30 copies BALD's best
    idx, gains = batch_bald_select(P, 4)
    assert idx[0] in (top, 30)
    copy = 30 if idx[0] == top else top
    alone = mutual_information(P)[copy]
    # what the copy would add to the batch of one: H(y_top, y_copy) − E H − E H
    cond = conditional_entropy(P)
    with_copy = joint_entropy_exact(P, [top, copy]) - cond[top] - cond[copy] - gains[0]
    assert with_copy < alone - 0.1
    assert copy not in idx[:2].tolist()


def test_sampled_joint_entropy_is_close_to_exact():
    P = consistent(30, 12, 2, 3)
    picked = [0, 1, 2, 3, 4]  # 32 configurations
    rng = np.random.RandomState(0)
    exact = _joint_entropies(P, picked, 0, 10 ** 6, rng, 7)
    sampled = _joint_entropies(P, picked, 20000, 0, rng, 7)
    np.testing.assert_allclose(sampled, exact, atol=0.03)
    assert exact[5] == pytest.approx(brute_joint_entropy(P, picked + [5]))


@pytest.mark.parametrize("P, kwargs, match", [
    (np.ones((2, 3)), {}, r"shape \(T, N, C\)"),
    (np.full((2, 3, 2), 0.5), dict(n_instances=4), r"n_instances must be an int in \[1, 3\]"),
    (np.full((2, 3, 2), 0.5), dict(n_joint_samples=0), "n_joint_samples must be an int >= 1"),
    (np.full((2, 3, 2), 0.7), {}, "sum to 1"),
    (np.full((2, 3, 2), np.nan), {}, "probabilities"),
])
def test_bad_input(P, kwargs, match):
    with pytest.raises(ValueError, match=match):
        batch_bald_select(P, **{"n_instances": 1, **kwargs})


def test_strategy_samples_the_net_with_consistent_masks(digits, small_net):
    from skdbal import ActiveLearner
    from skdbal.acquisition import batch_bald, get_strategy, noise_filter

    X, y = digits
    net = small_net(max_epochs=2, n_samples=16).fit(X[:60], y[:60])
    pool = X[60:460]
    acq = batch_bald.acquire(net, pool, 5, random_state=0)
    assert net.consistent_masks is False                       # restored
    net.set_params(consistent_masks=True)
    P = net.predict_proba_samples(pool)
    net.set_params(consistent_masks=False)
    idx, gains = batch_bald_select(P, 5, random_state=0)
    np.testing.assert_array_equal(acq.indices, idx)
    np.testing.assert_allclose(acq.scores, gains)
    assert acq.info["batch_mutual_information"] == pytest.approx(gains.sum())
    assert acq.info["n_exact_picks"] == 4                     # 10 classes, M = 1000: 1, 10, 100, 1000
    # by name, in the learner, and inside the noise filter
    assert get_strategy("batch_bald") is not batch_bald
    learner = ActiveLearner(small_net(max_epochs=2, n_samples=16), batch_bald, random_state=0, verbose=False)
    learner.teach(X[:60], y[:60])
    assert len(set(learner.query(pool, n_instances=4)[0].tolist())) == 4
    assert learner.estimator_.consistent_masks is False
    filtered = noise_filter(batch_bald, 0.05).acquire(net, pool, 3, y_pool=y[60:460])
    assert len(filtered.indices) == 3


def test_lazy_greedy_picks_what_a_full_evaluation_picks():
    for seed in range(20):
        rng = np.random.RandomState(seed)
        T, N, C = rng.randint(3, 12), rng.randint(5, 200), rng.choice([2, 3, 10])
        P = consistent(T, N, C, seed)
        n = min(N, 4)
        M = C ** (n - 1)  # exact for every pick
        lazy = batch_bald_select(P, n, n_joint_samples=M, chunk_size=7)
        full = batch_bald_select(P, n, n_joint_samples=M, lazy=False)
        np.testing.assert_array_equal(lazy[0], full[0])
        np.testing.assert_allclose(lazy[1], full[1], atol=1e-10)
