"""Issue 28: simulate and the experiment runner run one loop: an equivalent configuration on digits
gives identical picks (and test accuracies) through both."""
import numpy as np
import pytest

from skdbal import ActiveLearner
from skdbal.acquisition import get_strategy
from skdbal.experiments import RunSpec, get_preset, load_data, make_estimator, run_one
from skdbal.experiments.factories import split_indices
from skdbal.oracles import KnownLabels, NoisyAnnotator

TINY = dict(dataset="digits", n_queries=3, max_epochs=2, n_samples=4, pool_subsample=100, n_validation=50,
            module_params={"kernel_size": 3})


@pytest.mark.parametrize("strategy, noise_rate", [("bald", 0.0), ("random", 0.0), ("filter(bald,dynamic)", 0.3),
                                                  ("filter(bald,0.15)", 0.3)])
def test_simulate_and_the_runner_pick_the_same_points(tmp_path, strategy, noise_rate):
    preset = get_preset("gal2017", **TINY)
    seed = 4
    rows = run_one(RunSpec(preset, strategy, seed, noise_rate=noise_rate), tmp_path, torch_threads=1)

    # the same run, written as a user would with the public API
    X_train, y_train, X_test_all, y_test_all = load_data("digits")
    val, pool, initial, test = split_indices(preset, seed, y_train, len(y_test_all))
    position = {int(p): i for i, p in enumerate(pool)}
    if noise_rate:
        noisy = NoisyAnnotator.flip(y_train, noise_rate, classes=np.arange(10),
                                    random_state=np.random.RandomState([seed, 7907]), clean=initial)
        oracle = NoisyAnnotator(y_train[pool], noisy.y[pool])
    else:
        oracle = KnownLabels(y_train[pool])
    learner = ActiveLearner(make_estimator(preset), get_strategy(strategy), pool_subsample=preset.pool_subsample,
                            random_state=seed, seeding="step", verbose=False)
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        history = learner.simulate(X_train[pool], None, preset.n_queries, preset.n_instances, oracle=oracle,
                                   initial_idx=[position[int(i)] for i in initial], pool_ids=pool,
                                   X_test=X_test_all[test], y_test=y_test_all[test],
                                   query_kwargs={"random_tie_break": True, "y_pool": oracle.y})
    finally:
        torch.set_num_threads(threads)
    assert len(history) == len(rows) == preset.n_queries + 1
    for h, r in zip(history, rows):
        picked = pool[np.asarray(h["query_indices"])]
        assert picked.tolist() == [int(i) for i in r["query_indices"].split()], h["step"]
        assert h["accuracy"] == pytest.approx(r["accuracy"], abs=1e-12)
    np.testing.assert_array_equal(learner.y_training_, oracle.y[learner.labelled_idx_])
    if noise_rate:
        assert all(r["n_rejected"] != "" for r in rows[1:])
        if strategy == "filter(bald,0.15)":  # the untrusted points (90 of 100 at 2 epochs) are rejected alike
            assert [h["n_rejected"] for h in history[1:]] == [r["n_rejected"] for r in rows[1:]] == [90] * 3
        assert [h.get("threshold") for h in history[1:]] == pytest.approx([r["threshold"] for r in rows[1:]])
