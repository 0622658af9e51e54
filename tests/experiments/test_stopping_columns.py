"""The opt-in preset fields ``stopping`` and ``monitor``: a run's CSV gets the loop's ``stop_*`` and ``estimate_*``
columns, nothing else changes, and a run without them writes exactly what it wrote before they existed."""
import csv
import json

import numpy as np
import pytest

from skdbal.cli import main
from skdbal.experiments import COLUMNS, RunSpec, get_preset, read_results, run_one
from skdbal.experiments.journal import RunJournal
from skdbal.experiments.presets import PRESETS

TINY = dict(dataset="digits", n_queries=2, max_epochs=2, n_samples=4, pool_subsample=100, n_validation=50,
            module_params={"kernel_size": 3})
#: Two budgets: the first says stop at 30 labels, the second at 40 (step 2); an AnyOf of them.
BUDGETS = ["label_budget(max_labels=30)", "label_budget(max_labels=40)"]
#: The preset fields before stopping and monitor existed: a run file without them records these only.
FIELDS_BEFORE = {"name", "dataset", "module", "module_params", "n_initial_per_class", "n_validation", "pool_size",
                 "pool_subsample", "n_queries", "n_instances", "max_epochs", "batch_size", "batch_split",
                 "epoch_samples", "optimizer", "lr", "weight_decay", "scaled_l2", "n_samples", "selection", "patience",
                 "eval_method", "n_test", "last_layer_noise_variance", "last_layer_prior_variance",
                 "last_layer_fit_hyperparameters", "mask_seeding", "warm_epochs", "notes"}


def run(out, strategy="bald", **fields):
    return run_one(RunSpec(get_preset("gal2017", **{**TINY, **fields}), strategy, seed=1), out, torch_threads=1)


def written(out, strategy="bald"):
    """The rows of the run's CSV, as read back."""
    return read_results(out / "runs" / f"gal2017__{strategy}__bayesian__seed1.csv")


def header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain")
    return out, run(out)


def test_a_run_without_them_writes_what_it_wrote_before(plain):
    out, _ = plain
    run_csv = out / "runs" / "gal2017__bald__bayesian__seed1.csv"
    assert header(run_csv) == COLUMNS and header(out / "results.csv") == COLUMNS
    config = json.loads(run_csv.with_suffix(".json").read_text())
    assert set(config["preset"]) == FIELDS_BEFORE
    assert all(set(p.as_dict()) == FIELDS_BEFORE for p in PRESETS.values())


def test_the_rules_and_the_estimate_add_the_loops_columns_and_change_nothing_else(plain, tmp_path):
    before = written(plain[0])
    run(tmp_path, stopping=BUDGETS, monitor=True)
    rows = written(tmp_path)
    for a, b in zip(before, rows):       # the same run: only the new columns and the timings differ
        assert {k: a[k] for k in COLUMNS if "time" not in k} == {k: b[k] for k in COLUMNS if "time" not in k}
    names = ["stop_any_of", "stop_label_budget", "stop_label_budget_2"]
    assert [[r[n] for n in names] for r in rows] == [[False] * 3, [True, True, False], [True, True, True]]
    assert [r["stop_label_budget_value"] for r in rows] == [20.0, 30.0, 40.0]
    assert [r["stop_any_of_value"] for r in rows] == [0.0, 1.0, 2.0]      # how many rules say stop
    assert [r["stop_reason"] for r in rows] == [
        None, "30 labels bought: the budget of 30 is spent",
        "40 labels bought: the budget of 30 is spent; 40 labels bought: the budget of 40 is spent"]
    # the estimate: none at step 0; then the share of each batch the model before it guessed right (BALD's
    # batches are top-k: biased), pooled over the batches so far, carried over to the new model
    assert [r["estimate_n"] for r in rows] == [None, 10, 20]
    assert [r["estimate_biased"] for r in rows] == [None, True, True]
    assert [r["estimate_kind"] for r in rows] == [None] + ["bridge-prequential-biased"] * 2
    assert all(round(r["estimate_acc"] * n) == pytest.approx(r["estimate_acc"] * n) for r, n in zip(rows[1:], (10, 20)))
    assert all(r["estimate_lo"] <= r["estimate_acc"] <= r["estimate_hi"] for r in rows[1:])
    # the stop set: training-set indices, none of the initial set's, in step 0's row only
    stop_set = [int(i) for i in rows[0]["stop_set"].split()]
    initial = {int(i) for i in rows[0]["query_indices"].split()}
    assert len(stop_set) == len(set(stop_set)) > 0 and not set(stop_set) & initial
    assert rows[1]["stop_set"] is None
    # read back from the CSVs as written
    assert read_results(tmp_path / "results.csv")[1]["stop_label_budget"] is True
    assert header(tmp_path / "results.csv")[:len(COLUMNS)] == COLUMNS


def test_a_stochastic_batch_gets_the_unbiased_estimate(tmp_path):
    rows = run(tmp_path, strategy="stochastic(bald)", n_queries=1, monitor=True)
    assert rows[1]["estimate_kind"] == "bridge-stratified-lure-kish-wilson" and rows[1]["estimate_biased"] is False
    assert "stop_set" in rows[0] and not any(k.startswith("stop_") and k != "stop_set" for k in rows[0])


def test_a_resumed_run_keeps_its_stop_set(tmp_path):
    run_csv = tmp_path / "runs" / "gal2017__bald__bayesian__seed1.csv"
    run(tmp_path, stopping=BUDGETS, n_queries=1)
    first = run_csv.read_text().splitlines()
    longer = run(tmp_path, stopping=BUDGETS)                  # n_queries is free: the run resumes at step 2
    assert run_csv.read_text().splitlines()[:3] == first and written(tmp_path)[2]["stop_label_budget_2"] is True
    spec = RunSpec(get_preset("gal2017", **TINY, stopping=BUDGETS), "bald", seed=1)
    pool = np.array(sorted({int(i) for i in longer[0]["stop_set"].split()} | {0}))   # any pool holding them
    journal = RunJournal(spec, tmp_path, [dict(r) for r in longer[:1]], pool, np.zeros(0), None, None, None, False)
    assert pool[journal.rows()[0]["stop_set"]].tolist() == [int(i) for i in longer[0]["stop_set"].split()]


def test_a_folder_refuses_a_run_that_records_other_columns(plain):
    out, _ = plain
    with pytest.raises(ValueError, match="preset.monitor"):
        run(out, strategy="random", monitor=True)


@pytest.mark.parametrize("stopping, message", [
    (["nope"], "unknown stopping rule 'nope'"),
    (["label_budget"], "missing 1 required positional argument: 'max_labels'"),
    (["label_budget(max_labels=0)"], "stopping rule 'label_budget(max_labels=0)': max_labels must be"),
    (["cost(label_cost=x)"], "label_cost's value must be a number"),
    (["classification_change", "classification_change()"], "stopping names 'classification_change' twice"),
])
def test_a_bad_rule_is_refused_before_anything_runs(stopping, message, tmp_path, capsys):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        get_preset("gal2017", stopping=stopping)
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "--set", f"stopping={stopping!r}", "--out", str(tmp_path / "grid")])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "grid").exists()


def test_one_rule_has_one_spelling():
    a = get_preset("gal2017", stopping="stabilizing_predictions(window=3, kappa=0.95)", monitor=True)
    b = get_preset("gal2017", stopping=["stabilizing_predictions( kappa=0.95 )"], monitor=True)
    assert a == b and a.stopping == ("stabilizing_predictions(kappa=0.95)",)
    assert a.as_dict()["stopping"] == ("stabilizing_predictions(kappa=0.95)",) and a.as_dict()["monitor"] is True
    with pytest.raises(TypeError, match="monitor must be True or False"):
        get_preset("gal2017", monitor="yes")
