"""The benchmarks' record (benchmarks/_common.py, ``recorded``): a run writes its output and JSON; a request
for the usage, or arguments argparse refuses, write nothing, so a committed record is never overwritten."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

SCRIPT = '''
import argparse, sys
sys.path.insert(0, {benchmarks!r})
from _common import recorded

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3)
    args = parser.parse_args()
    print("| n | squared |")
    print(f"| {{args.n}} | {{args.n ** 2}} |")

if __name__ == "__main__":
    with recorded(__file__):
        main()
'''


@pytest.fixture
def bench(tmp_path):
    path = tmp_path / "bench_toy.py"
    path.write_text(SCRIPT.format(benchmarks=str(BENCHMARKS)))
    out = tmp_path / "out"

    def run(*args):
        env = {"SKDBAL_BENCH_OUT": str(out), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
        return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env,
                              timeout=120)
    return run, out


def test_a_run_is_recorded(bench):
    run, out = bench
    assert run("--n", "4").returncode == 0
    assert (out / "output.txt").read_text() == "| n | squared |\n| 4 | 16 |\n"
    meta = json.loads((out / "bench_toy.json").read_text())
    assert meta["argv"] == ["--n", "4"] and meta["exit"] == "ok"


@pytest.mark.parametrize("args, code", [(["--help"], 0), (["-h"], 0), (["--bogus"], 2), (["--n", "x"], 2)])
def test_usage_and_refused_arguments_leave_the_record_alone(bench, args, code):
    run, out = bench
    assert run("--n", "5").returncode == 0
    before = {p.name: p.read_text() for p in out.iterdir()}
    got = run(*args)
    assert got.returncode == code and "usage:" in got.stdout + got.stderr
    assert {p.name: p.read_text() for p in out.iterdir()} == before
