"""The hand-off from a cold-start strategy to a model-based one (ColdStart): each rule switches exactly at the
stated value, the picks before are the cold strategy's and after the wrapped strategy's, on the same model and
pool, and ``info`` says which side picked."""
import warnings

import numpy as np
import pytest
from _helpers import digits_flat
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import (
    BALD,
    ColdStart,
    TypiClust,
    bald,
    canonical_name,
    cold_start,
    get_strategy,
    parse_strategy_name,
    probcover,
    typiclust,
)

RNG = np.random.RandomState(0)
#: three blobs in 2-d, 20 rows each
X = np.concatenate([RNG.normal(c, 0.5, (20, 2)) for c in (0.0, 5.0, 10.0)])
Y = np.repeat([0, 1, 2], 20)


class Known:
    """A stochastic three-class model whose two passes are fixed functions of the first feature: pass 1 puts
    its mass on class 0 left of 5, pass 2 on class 1, so the passes disagree (BALD is high) near the middle."""

    classes_ = np.array([0, 1, 2])

    def predict_proba_samples(self, X, n_samples=None):
        x = np.asarray(X, dtype=np.float64)[:, 0]
        w = np.exp(-np.abs(x - 5.0))                 # 1 at x = 5, small far from it
        a = np.stack([0.1 + 0.8 * w, 0.9 - 0.8 * w, np.zeros_like(x)], axis=1)
        b = np.stack([0.9 - 0.8 * w, 0.1 + 0.8 * w, np.zeros_like(x)], axis=1)
        return np.stack([a, b])


def labelled(counts):
    """The first ``counts[c]`` rows of each class: ``(X_labelled, y_labelled)``."""
    rows = np.concatenate([np.flatnonzero(Y == c)[:n] for c, n in enumerate(counts)]).astype(int)
    return X[rows], Y[rows]


def query(strategy, counts, n=3, model=None):
    X_lab, y_lab = labelled(counts)
    return strategy.acquire(Known() if model is None else model, X, n, random_state=0, X_labelled=X_lab,
                            y_labelled=y_lab)


def same_picks(acq, reference):
    assert acq.indices.tolist() == reference.indices.tolist()
    np.testing.assert_array_equal(acq.scores, reference.scores)


@pytest.mark.parametrize("rule, at, cold_counts, warm_counts, cold_value, warm_value", [
    ("per_class", 2, (2, 2, 1), (2, 2, 2), 5 / 3, 2.0),         # 5 labels of 3 classes, then 6
    ("labels", 4, (1, 1, 1), (2, 1, 1), 3.0, 4.0),
    ("seen", 1, (3, 3, 0), (1, 1, 1), 0.0, 1.0),                 # the rarest class: 0 labels, then 1
    ("seen", 2, (5, 5, 1), (2, 2, 2), 1.0, 2.0),
])
def test_the_rule_switches_exactly_at_the_stated_value(rule, at, cold_counts, warm_counts, cold_value, warm_value):
    handoff = ColdStart(BALD(), cold="typiclust", rule=rule, at=at)
    X_lab, _ = labelled(cold_counts)
    cold = query(handoff, cold_counts)
    assert (cold.info["side"], cold.info["picked_by"], cold.info["handoff_at"]) == ("cold", "TypiClust", at)
    assert cold.info["handoff_measure"] == pytest.approx(cold_value)
    same_picks(cold, typiclust.acquire(Known(), X, 3, random_state=0, X_labelled=X_lab))
    assert cold.info["n_clusters"] == len(X_lab) + 3          # TypiClust's own info is kept
    warm = query(handoff, warm_counts)
    assert (warm.info["side"], warm.info["picked_by"]) == ("warm", "BALD")
    assert warm.info["handoff_measure"] == pytest.approx(warm_value)
    same_picks(warm, bald.acquire(Known(), X, 3, random_state=0))


def test_the_confidence_rule_reads_the_mean_top_probability_of_the_pool():
    # Known's two passes of every row are (0.1 + 0.8 w, 0.9 - 0.8 w, 0) and (0.9 - 0.8 w, 0.1 + 0.8 w, 0): their
    # mean is (0.5, 0.5, 0), so the pool's mean top probability is 0.5 exactly.
    low = ColdStart(BALD(), rule="confidence", at=0.5)
    high = ColdStart(BALD(), rule="confidence", at=0.51)
    assert query(low, (1, 1, 1)).info["side"] == "warm"
    acq = query(high, (1, 1, 1))
    assert acq.info["side"] == "cold" and acq.info["handoff_measure"] == pytest.approx(0.5)

    class Sure(Known):                     # both passes (0.9, 0.1, 0) on the first blob, (0.3, 0.3, 0.4) elsewhere
        def predict_proba_samples(self, X, n_samples=None):
            p = np.where(np.asarray(X)[:, :1] < 2.5, [0.9, 0.1, 0.0], [0.3, 0.3, 0.4])
            return np.stack([p, p])

    # the pool's mean top probability: (20 · 0.9 + 40 · 0.4) / 60 = 34/60, whatever the chunks
    for chunk_size in (7, 2048):
        handoff = ColdStart(BALD(), rule="confidence", at=0.566, chunk_size=chunk_size)
        assert handoff.measure(Sure(), X, X_labelled=X[:3]) == pytest.approx(34 / 60)
        assert query(handoff, (1, 1, 1), model=Sure()).info["side"] == "warm"
    assert query(ColdStart(BALD(), rule="confidence", at=0.567), (1, 1, 1), model=Sure()).info["side"] == "cold"


def test_a_rule_of_ones_own_is_compared_with_at():
    seen = []

    def n_distinct(estimator, X_pool, y_labelled):
        seen.append((len(X_pool), None if y_labelled is None else sorted(y_labelled.tolist())))
        return len(set(y_labelled.tolist()))

    handoff = ColdStart(BALD(), rule=n_distinct, at=3)
    assert query(handoff, (2, 2, 0)).info["side"] == "cold"
    assert query(handoff, (1, 1, 1)).info["side"] == "warm"
    assert seen == [(60, [0, 0, 1, 1]), (60, [0, 1, 2])]


def test_with_no_labelled_row_it_is_cold_and_the_model_is_not_read():
    class Unread(Known):
        def predict_proba_samples(self, X, n_samples=None):
            raise AssertionError("the model's predictions were read")

    for rule in ("per_class", "labels", "seen", "confidence"):
        acq = ColdStart(BALD(), rule=rule, at=0).acquire(Unread(), X, 2, random_state=0, X_labelled=X[:0])
        assert acq.info["side"] == "cold" and acq.info["handoff_measure"] == 0.0
        # at=0: 0 >= 0 would be warm: no labels is cold whatever at says
        same_picks(acq, typiclust.acquire(None, X, 2, random_state=0))
    same_picks(ColdStart(BALD()).acquire(None, X, 2, random_state=0), typiclust.acquire(None, X, 2, random_state=0))


def test_probcover_or_random_as_the_cold_side():
    X_lab, y_lab = labelled((1, 0, 0))
    acq = ColdStart(BALD(), cold="probcover").acquire(Known(), X, 2, random_state=0, X_labelled=X_lab,
                                                      y_labelled=y_lab)
    assert acq.info["picked_by"] == "ProbCover"
    same_picks(acq, probcover.acquire(Known(), X, 2, random_state=0, X_labelled=X_lab))
    acq = ColdStart(BALD(), cold=TypiClust(normalize=False)).acquire(None, X, 3, random_state=0)
    assert sorted(Y[acq.indices].tolist()) == [0, 1, 2]     # one typical row of each blob, unscaled
    acq = get_strategy("cold_start(bald,random)").acquire(Known(), X, 2, random_state=0, X_labelled=X_lab,
                                                          y_labelled=y_lab)
    assert acq.info["picked_by"] == "random"


def test_the_name_reads_and_refuses_bad_parameters():
    assert parse_strategy_name("cold_start(batch_bald, probcover, seen, 1)") == (
        "cold_start", "batch_bald", ("probcover", "seen", 1))
    assert canonical_name("cold_start(epig, typiclust, confidence, 0.80)") == (
        "cold_start(epig,typiclust,confidence,0.8)")
    made = get_strategy("cold_start(epig,probcover,labels,30)")
    assert (type(made.strategy).__name__, made.cold, made.rule, made.at) == ("EPIG", "probcover", "labels", 30)
    assert repr(cold_start(bald)) == "ColdStart(strategy=BALD())"
    with pytest.raises(ValueError, match="rule must be one of"):
        get_strategy("cold_start(bald,typiclust,often)")
    with pytest.raises(ValueError, match="unknown strategy 'typiclus'"):
        get_strategy("cold_start(bald,typiclus)")
    with pytest.raises(ValueError, match="at must be a finite number"):
        get_strategy("cold_start(bald,typiclust,labels,many)")
    class Plain:                                       # a model without classes_
        def predict_proba(self, X):
            return np.full((len(X), 2), 0.5)

    with pytest.raises(ValueError, match="Plain has no classes_"):
        ColdStart(BALD()).acquire(Plain(), X, 2, X_labelled=X[:3])
    with pytest.raises(ValueError, match="needs the labelled rows' labels"):
        ColdStart(BALD(), rule="seen").acquire(Known(), X, 2, X_labelled=X[:3])
    with pytest.raises(TypeError, match="n_sample"):
        ColdStart(BALD()).acquire(Known(), X, 2, n_sample=3)
    # each side's options are taken, and given only to the side that takes them
    opts = ColdStart(BALD()).call_options()
    assert {"n_samples", "normalize", "X_labelled", "y_labelled"} <= opts
    acq = ColdStart(BALD(), rule="labels", at=1).acquire(Known(), X, 2, n_samples=2, normalize=False,
                                                         X_labelled=X[:1])
    assert acq.info["side"] == "warm"


def test_with_the_learner_on_digits_the_history_shows_the_switch():
    X_d, y_d = digits_flat(400)
    initial = np.concatenate([np.flatnonzero(y_d == c)[:1] for c in range(10)])     # one label a class
    learner = ActiveLearner(LogisticRegression(max_iter=300), ColdStart(BALD(), rule="per_class", at=2),
                            random_state=0, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # BALD on a deterministic model: scored as T = 1
        history = learner.simulate(X_d[:300], y_d[:300], n_queries=3, n_instances=5, initial_idx=initial,
                                   X_test=X_d[300:], y_test=y_d[300:])
    # 10 labels: 1 a class (cold); 15: 1.5 (cold); 20: 2 (warm)
    assert [(row["n_labels"], row.get("side"), row.get("handoff_measure")) for row in history] == [
        (10, None, None), (15, "cold", 1.0), (20, "cold", 1.5), (25, "warm", 2.0)]
    assert [row.get("picked_by") for row in history[1:]] == ["TypiClust", "TypiClust", "BALD"]
    picked = np.concatenate([row["query_indices"] for row in history[1:]])
    assert len(set(picked.tolist())) == 15 and not set(picked.tolist()) & set(initial.tolist())
