"""The cosine diversity penalty, on hand-built scores and models."""
import numpy as np
import pytest
from _helpers import BinaryTwoPasses
from modAL.uncertainty import uncertainty_sampling
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import DiversityPenalty, bald, diversity_penalty, get_strategy, max_entropy, noise_filter
from skdbal.acquisition.base import MeasureStrategy
from skdbal.acquisition.functional import candidate_bound, greedy_cosine_batch, normalize_scores, unit_rows


class Scored:
    """A deterministic classifier whose max-entropy scores are set by hand (row i of X holds i)."""

    classes_ = np.array([0, 1])

    def __init__(self, p0):
        self.p0 = np.asarray(p0, float)

    def predict_proba(self, X):
        i = np.asarray(X)[:, 0].astype(int)
        return np.c_[self.p0[i], 1 - self.p0[i]]


def entropy(p):
    return -(p * np.log(p) + (1 - p) * np.log(1 - p))


def test_greedy_by_hand():
    s = np.array([1.0, 0.9, 0.6, 0.2])
    F = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 0]], dtype=float)
    # cos(0,1) = 1/√2, cos(0,2) = 0, cos(0,3) = 0, cos(1,3) = 1/√2, cos(2,·) = 0
    picks, values = greedy_cosine_batch(s, F, 3, weight=0.5)
    # step 2: 0.9 - 0.5/√2 = 0.546 < 0.6 → point 2; step 3: 0.546 (point 1) > 0.2 → point 1
    assert picks.tolist() == [0, 2, 1]
    np.testing.assert_allclose(values, [1.0, 0.6, 0.9 - 0.5 / np.sqrt(2)])
    assert greedy_cosine_batch(s, F, 3, weight=0.0)[0].tolist() == [0, 1, 2]   # top-k
    # a negative weight favours the point most like those picked: 0.2 + 0.5/√2 < 0.9 + 0.5/√2
    assert greedy_cosine_batch(s, F, 2, weight=-0.5)[0].tolist() == [0, 1]
    assert greedy_cosine_batch(s, F, 3, weight=-2.0)[0].tolist() == [0, 1, 3]
    np.testing.assert_allclose(unit_rows(F)[1], [2 ** -0.5, 2 ** -0.5, 0])
    assert normalize_scores([2.0, 4.0], reference=[0.0, 4.0]).tolist() == [0.5, 1.0]


def test_pruned_candidates_give_the_exact_greedy_batch():
    rng = np.random.RandomState(0)
    for trial in range(50):
        N, n = rng.randint(5, 60), rng.randint(1, 5)
        p0 = rng.uniform(0.02, 0.98, N)
        X = np.c_[np.arange(N), rng.rand(N, 4) * (rng.rand(N, 1) < 0.8)]
        w = rng.choice([-0.3, 0.05, 0.1, 0.4, 1.0])
        got = diversity_penalty(max_entropy, w, features=lambda Z: Z[:, 1:]).acquire(Scored(p0), X, n)
        # brute force: every point a candidate, ranking order as max_entropy's (ties by index)
        order = np.argsort(-entropy(p0), kind="stable")
        s = normalize_scores(entropy(p0)[order])
        picks, _ = greedy_cosine_batch(s, X[order, 1:], n, w)
        assert got.indices.tolist() == order[picks].tolist(), trial
        assert got.info["n_candidates"] <= N
        assert candidate_bound(s, n, w) <= s[n - 1]


def test_weight_means_the_same_for_scaled_scores():
    rng = np.random.RandomState(1)
    p0 = rng.uniform(0.05, 0.95, 40)
    X = np.c_[np.arange(40), rng.rand(40, 3)]
    feats = dict(features=lambda Z: Z[:, 1:])
    small = MeasureStrategy(lambda P: P[0, :, 0] * (1 - P[0, :, 0]), needs_stochastic=False)
    large = MeasureStrategy(lambda P: 1000 * P[0, :, 0] * (1 - P[0, :, 0]) + 7, needs_stochastic=False)
    a = diversity_penalty(small, 0.3, **feats).acquire(Scored(p0), X, 5).indices
    b = diversity_penalty(large, 0.3, **feats).acquire(Scored(p0), X, 5).indices
    assert a.tolist() == b.tolist()
    assert a.tolist() != diversity_penalty(small, 0.0, **feats).acquire(Scored(p0), X, 5).indices.tolist()


A = np.array([0.5, 1.0, 0.2, 0.6, 0.9, 1.0, 0.7, 0.3])
B = np.array([0.5, 0.4, 0.8, 0.6, 0.1, 0.8, 0.7, 0.9])
Y = np.array([0, 1, 1, 0, 1, 0, 0, 1])
# column 1-2: points 4, 1 and 2 (BALD's top three) point the same way
X = np.c_[np.arange(8), [[1, 0], [1, 0.1], [1, 0.05], [0, 1], [1, 0], [0.5, 0.5], [0, 1], [0.7, 0.7]]]


def test_composes_with_the_noise_filter_in_either_order():
    # BALD ranks 4, 1, 7, 2, 5, 0, 3, 6; p̄(label) of point 1 is 0.3 < τ = 0.35
    feats = dict(features=lambda Z: Z[:, 1:])
    inside = diversity_penalty(noise_filter(bald, 0.35), 1.0, **feats).acquire(BinaryTwoPasses(A, B), X, 3, y_pool=Y)
    outside = noise_filter(diversity_penalty(bald, 1.0, **feats), 0.35).acquire(BinaryTwoPasses(A, B), X, 3, y_pool=Y)
    # by hand, normalised scores 4: 1, 7: 0.557, 2: 0.524, 5: 0.204, 0/3/6: 0; after 4, point 3
    # (score 0, cosine 0 with 4) beats 7 (0.557 - 0.707); then 7 (-0.15) beats 2 (0.524 - 0.999)
    assert inside.indices.tolist() == [4, 3, 7]
    assert outside.indices.tolist() == [4, 3, 7]
    assert inside.info["threshold"] == 0.35
    assert inside.info["rejected_indices"].tolist() == [1] and inside.info["n_rejected"] == 1
    assert noise_filter(bald, 0.35).acquire(BinaryTwoPasses(A, B), X, 3, y_pool=Y).indices.tolist() == [4, 7, 2]


def test_strategy_without_pool_scores_and_modal_learner_route():
    rng = np.random.RandomState(0)
    Xt = rng.rand(300, 4)
    y = (Xt[:, 0] > 0.5).astype(int)
    clf = LogisticRegression().fit(Xt[:20], y[:20])
    acq = diversity_penalty(uncertainty_sampling, 0.2, n_candidates=30).acquire(clf, Xt, 5)
    assert len(set(acq.indices.tolist())) == 5 and acq.info["n_candidates"] == 30
    assert acq.scores is None  # modAL's function gives bare indices: its ranking by position
    top30 = uncertainty_sampling(clf, Xt, n_instances=30)   # bare indices
    assert set(acq.indices.tolist()) <= set(np.asarray(top30).tolist())
    # through our learner with pool_subsample: indices map back to the pool
    learner = ActiveLearner(LogisticRegression(), diversity_penalty(max_entropy, 0.1), pool_subsample=100,
                            random_state=0, verbose=False)
    learner.teach(Xt[:20], y[:20])
    idx = learner.query(Xt, n_instances=4)[0]
    assert len(set(idx.tolist())) == 4 and idx.max() < 300


def test_embedding_features_from_the_network(digits, small_net):
    Xd, yd = digits
    net = small_net(max_epochs=2).fit(Xd[:80], yd[:80])
    emb = diversity_penalty(bald, 0.2, features="embedding").acquire(net, Xd[80:400], 6)
    inp = diversity_penalty(bald, 0.2, features="input").acquire(net, Xd[80:400], 6)
    assert len(set(emb.indices.tolist())) == 6
    # by hand: the same greedy on the network's transform
    scores = bald.acquisition_scores(net, Xd[80:400])
    order = np.argsort(-scores, kind="stable")
    s = normalize_scores(scores[order])
    keep = s >= candidate_bound(s, 6, 0.2)
    picks, _ = greedy_cosine_batch(s[keep], net.transform(Xd[80:400][order[keep]]), 6, 0.2)
    assert emb.indices.tolist() == order[keep][picks].tolist()
    assert emb.indices[0] == inp.indices[0] == order[0]
    # a learner's embedding is its model's
    learner = ActiveLearner(small_net(max_epochs=2), diversity_penalty(bald, 0.2, features="embedding"),
                            random_state=0, verbose=False)
    learner.teach(Xd[:80], yd[:80])
    assert len(learner.query(Xd[80:400], n_instances=3)[0]) == 3
    with pytest.raises(TypeError, match="features='embedding' needs a model with transform"):
        diversity_penalty(max_entropy, features="embedding").acquire(Scored(np.full(8, 0.3)), X, 2)


def test_by_name_and_params():
    s = get_strategy("diverse(filter(bald,0.1),0.2,embedding)")
    assert isinstance(s, DiversityPenalty) and s.weight == 0.2 and s.features == "embedding"
    assert s.strategy.threshold == 0.1
    assert get_strategy("filter(diverse(bald,-0.1),dynamic)").strategy.weight == -0.1
    assert DiversityPenalty(bald, 0.3).get_params()["strategy"] is bald
    for bad, match in [("diverse(bald,nan)", "weight must be a finite float"),
                       ("diverse(bald,0.1,pixels)", "features must be 'input', 'embedding'")]:
        with pytest.raises(ValueError, match=match):
            get_strategy(bad)
    with pytest.raises(ValueError, match="n_candidates must be an int >= 1"):
        diversity_penalty(bald, n_candidates=0).acquire(BinaryTwoPasses(A, B), X, 2)
    with pytest.raises(ValueError, match="the features have 2 rows for"):
        diversity_penalty(bald, features=lambda Z: Z[:2]).acquire(BinaryTwoPasses(A, B), X, 2)


def test_weight_zero_is_the_wrapped_top_k_even_inside_a_filter():
    rng = np.random.RandomState(3)
    for trial in range(30):
        N = rng.randint(6, 40)
        a, b = rng.rand(N), rng.rand(N)
        y = rng.randint(2, size=N)
        x = np.c_[np.arange(N), rng.rand(N, 3)]
        n = rng.randint(1, 5)
        assert (diversity_penalty(bald, 0.0).acquire(BinaryTwoPasses(a, b), x, n).indices.tolist()
                == bald.acquire(BinaryTwoPasses(a, b), x, n).indices.tolist()), trial
        inner = diversity_penalty(noise_filter(bald, 0.3), 0.0).acquire(BinaryTwoPasses(a, b), x, n, y_pool=y)
        plain = noise_filter(bald, 0.3).acquire(BinaryTwoPasses(a, b), x, n, y_pool=y)
        assert inner.indices.tolist() == plain.indices.tolist(), trial
        assert inner.info["rejected_indices"].tolist() == plain.info["rejected_indices"].tolist(), trial
