"""What a grid records of where it ran (issue 44, item 4): the hardware, the versions, the commit, left-out runs."""
import json
import subprocess
from pathlib import Path

import pytest

from skdbal.experiments import get_preset
from skdbal.experiments.provenance import (
    NOT_RECORDED,
    environment,
    git_commit,
    left_out_runs,
    machine_record,
    machines_of,
)
from skdbal.experiments.runner import _record_invocation

ROOT = Path(__file__).resolve().parents[2]


def test_environment_names_the_hardware_the_versions_and_the_commit():
    env = environment()
    assert env["cpu_count"] >= 1 and isinstance(env["gpus"], list)
    assert {"torch", "numpy", "scikit-learn"} <= set(env["versions"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert env["commit"].split("+")[0] == head


def test_git_commit_outside_a_checkout_is_none(tmp_path, monkeypatch):
    monkeypatch.delenv("SKDBAL_COMMIT", raising=False)
    assert git_commit(tmp_path) is None


def test_git_commit_outside_a_checkout_is_skdbal_commit_and_git_wins_inside(tmp_path, monkeypatch):
    """A copy without .git (the tree benchmarks/device_kit.sh sends to a GPU) says its commit through
    $SKDBAL_COMMIT; inside a checkout git's answer stands."""
    monkeypatch.setenv("SKDBAL_COMMIT", "0123abc+packed")
    assert git_commit(tmp_path) == "0123abc+packed"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip("the checkout has no .git (a copied tree)")
    assert git_commit(ROOT).split("+")[0] == head


def test_an_invocation_records_the_machine_its_versions_and_the_commit(tmp_path):
    preset = get_preset("gal2017", dataset="digits", n_queries=2)
    _record_invocation(tmp_path, preset, {"strategies": ["bald"], "seeds": [1]})
    grid = json.loads((tmp_path / "grid.json").read_text())
    call = grid["invocations"][0]
    assert call["commit"] == environment()["commit"]
    assert {"cpu_model", "cpu_count", "gpus", "versions", "torch", "platform"} <= set(call["machine"])
    assert grid["machines"] == [call["machine"]]
    assert machine_record(call["machine"])["versions"] == call["machine"]["versions"]


def test_a_record_written_before_the_fields_says_not_recorded():
    old = {"platform": "Linux-x", "processor": "", "cpu_count": 2, "python": "3.11.7", "torch": "2.13.0+cpu"}
    rec = machines_of({"machine": old, "invocations": [{"machine": old}]})
    assert len(rec) == 1 and rec[0]["cpu_model"] == NOT_RECORDED and rec[0]["versions"] == NOT_RECORDED
    assert rec[0]["gpus"] == []  # a CPU build of torch uses no GPU
    assert machine_record({"platform": "y", "torch": "2.11.0+cu130"})["gpus"] == NOT_RECORDED


def test_an_invocation_without_its_run_files_is_listed_as_left_out(tmp_path):
    (tmp_path / "runs").mkdir()
    for seed in (1, 2):
        (tmp_path / "runs" / f"kirsch2019__bald__bayesian__seed{seed}.csv").write_text("")
    (tmp_path / "runs" / "kirsch2019__bald__laplace__seed1.csv").write_text("")
    calls = [{"preset": {"name": "kirsch2019"}, "strategies": ["bald"], "seeds": [1, 2], "started": "a"},
             {"preset": {"name": "kirsch2019"}, "strategies": ["bald"], "seeds": [1, 2], "laplace": True,
              "started": "b"}]
    (tmp_path / "grid.json").write_text(json.dumps({"invocations": calls}))
    assert left_out_runs(tmp_path) == [{"invocation": 2, "runs": ["kirsch2019__bald__laplace__seed2"],
                                        "started": "b"}]


def test_the_committed_post2019_grid_lists_its_laplace_seed_2_as_left_out():
    left = left_out_runs(ROOT / "docs" / "results" / "post2019")
    assert [run for entry in left for run in entry["runs"]] == ["kirsch2019__bald__laplace__seed2"]


def test_a_benchmark_records_its_output_machine_versions_and_commit(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setenv("SKDBAL_BENCH_OUT", str(tmp_path))
    monkeypatch.delenv("SKDBAL_BENCH_RECORDING", raising=False)
    monkeypatch.setattr(sys, "argv", ["bench_fake.py", "--n", "3"])
    from _common import recorded

    with recorded("benchmarks/bench_fake.py"):
        print("scored in 1.5 s")
    record = json.loads((tmp_path / "bench_fake.json").read_text())
    assert (tmp_path / "output.txt").read_text() == "scored in 1.5 s\n"
    assert record["argv"] == ["--n", "3"] and record["exit"] == "ok"
    assert record["provenance"]["commit"] == environment()["commit"]
    assert {"cpu_model", "gpus", "versions"} <= set(record["provenance"])
