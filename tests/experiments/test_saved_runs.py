"""Integrity of saved runs: damaged files are named, repaired where that is safe, refused where not."""
import json
import shutil
import warnings

import pytest

from skdbal.experiments import DamagedResultsError, check_run_rows, read_results, run_grid
from skdbal.experiments.report import write_report

TINY = dict(dataset="digits", n_queries=3, max_epochs=3, module_params={"kernel_size": 3}, n_samples=5,
            pool_subsample=150, n_validation=50)
RUN = "gal2017__bald__bayesian__seed1"


def no_times(rows):
    return [{k: v for k, v in r.items() if not k.endswith("time")} for r in rows]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished one-run grid, copied by each test before it damages anything."""
    out = tmp_path_factory.mktemp("grid")
    rows = run_grid("gal2017", ["bald"], [1], out, verbose=False, torch_threads=1, **TINY)
    return out, rows


@pytest.fixture
def grid(finished, tmp_path):
    out, rows = finished
    shutil.copytree(out, tmp_path / "g")
    return tmp_path / "g", rows


def resume(out):
    return run_grid("gal2017", ["bald"], [1], out, verbose=False, torch_threads=1, **TINY)


def test_a_last_row_cut_inside_its_query_indices_is_recomputed(grid):
    out, rows = grid
    path = out / "runs" / f"{RUN}.csv"
    text = path.read_text()
    path.write_text(text[:text.rstrip("\n").rindex(" ")] + "\n")  # the last index is lost: still parses
    with pytest.raises(DamagedResultsError, match=r"line 5 \(step 3\): n_labels is 50 and n_acquired 30, but the "
                                                  r"query indices so far add up to 49 labels"):
        check_run_rows(read_results(path), path)
    with pytest.warns(RuntimeWarning, match=r"line 5 \(step 3\).*last row.*step 3 will be computed again"):
        again = resume(out)
    assert no_times(again) == no_times(rows)  # the same run as the uninterrupted one


def test_a_last_row_torn_at_a_digit_boundary_is_recomputed(grid):
    # "... 231 1235\n" cut to "... 231 1": the count of indices still matches, so only the missing line
    # terminator shows that the row is torn
    out, rows = grid
    path = out / "runs" / f"{RUN}.csv"
    text = path.read_text()
    assert text.endswith("\n")
    body, last = text[:-1].rsplit(" ", 1)
    labelled = {int(i) for r in rows for i in r["query_indices"].split()}
    keep = next(k for k in range(len(last) - 1, 0, -1) if int(last[:k]) not in labelled)  # not a repeat
    path.write_text(f"{body} {last[:keep]}")
    with pytest.raises(DamagedResultsError, match=rf"{RUN}.csv, line 5 \(step 3\): .*no line terminator"):
        read_results(path)
    with pytest.warns(RuntimeWarning, match=r"line 5 \(step 3\).*no line terminator.*step 3 will be computed again"):
        again = resume(out)
    assert no_times(again) == no_times(rows)  # the same run as the uninterrupted one
    assert path.read_text().endswith("\n")  # rewritten whole
    assert no_times(read_results(path)) == no_times(rows)


def test_a_file_cut_mid_row_is_named(grid):
    out, rows = grid
    path = out / "runs" / f"{RUN}.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:25])  # cut inside step 2's row; step 3 is gone
    with pytest.raises(DamagedResultsError, match=rf"{RUN}.csv, line 4: column '\w+' is missing or empty"):
        read_results(path)
    with pytest.warns(RuntimeWarning, match="last row"):
        again = resume(out)
    assert no_times(again) == no_times(rows)


def test_damage_before_the_last_row_is_refused_and_changes_nothing(grid):
    out, _ = grid
    path = out / "runs" / f"{RUN}.csv"
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[2].split(",")
    fields[5] = "31"  # step 1's n_labels
    lines[2] = ",".join(fields)
    path.write_text("".join(lines))
    before = path.read_bytes()
    with pytest.raises(DamagedResultsError, match=rf"line 3 \(step 1\): n_labels is 31.*delete .*{RUN}\.\*"):
        resume(out)
    assert path.read_bytes() == before


def test_results_csv_cut_mid_row_is_rebuilt_by_the_report(grid):
    out, rows = grid
    path = out / "results.csv"
    text = path.read_text()
    path.write_text(text[:len(text) - 40])
    with pytest.raises(DamagedResultsError, match=r"results.csv, line 5"):
        read_results(path)
    with pytest.warns(RuntimeWarning, match="rebuilt .*results.csv from the run files"):
        write_report(out)
    assert no_times(read_results(path)) == no_times(rows)


def test_a_damaged_run_configuration_is_refused(grid):
    out, _ = grid
    path = out / "runs" / f"{RUN}.json"
    path.write_text(path.read_text()[:50])
    with pytest.raises(DamagedResultsError, match=rf"{RUN}.json is damaged.*cannot be resumed safely"):
        resume(out)


def test_a_damaged_grid_log_is_set_aside(grid):
    out, rows = grid
    (out / "grid.json").write_text('{"preset": {"na')
    with pytest.warns(RuntimeWarning, match="only a log"):
        again = resume(out)
    assert no_times(again) == no_times(rows)
    assert (out / "grid.json.damaged").read_text() == '{"preset": {"na'
    assert len(json.loads((out / "grid.json").read_text())["invocations"]) == 1
    (out / "grid.json").write_text("{")
    write_report(out)  # the report takes the preset from the run's configuration


def test_a_cut_weights_cache_refits_from_the_labels(grid):
    out, rows = grid
    rows_path = out / "runs" / f"{RUN}.csv"
    lines = rows_path.read_text().splitlines(keepends=True)
    rows_path.write_text("".join(lines[:-1]))  # step 3 to redo, from the model of step 2...
    weights = out / "runs" / f"{RUN}.pt"
    weights.write_bytes(weights.read_bytes()[:100])  # ...whose cache is cut
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = resume(out)
    assert any("cannot be read" in str(w.message) and "refitted from its labels" in str(w.message) for w in caught)
    assert no_times(again) == no_times(rows)
