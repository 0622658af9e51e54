import argparse
import subprocess
import sys

import pytest

from skdbal import __version__
from skdbal.cli import main
from skdbal.experiments.quickstart import format_table


def test_version():
    assert isinstance(__version__, str) and __version__.count(".") == 2


def test_quickstart_cli_small(tmp_path, capsys):
    out = tmp_path / "curve.png"
    assert main(["quickstart", "--strategies", "bald,random", "--n-queries", "2",
                 "--n-instances", "5", "--seeds", "0", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| labels | bald | random |" in text
    assert "| 30 |" in text  # 20 initial + 2 x 5
    assert out.stat().st_size > 1000 and out.read_bytes()[:4] == b"\x89PNG"


def test_format_table_values():
    hist = lambda accs: [{"n_labels": 20 + 10 * i, "accuracy": a} for i, a in enumerate(accs)]
    table = format_table({"bald": [hist([0.5, 0.7]), hist([0.7, 0.9])]})
    assert "| 20 | 0.600 ± 0.100 |" in table and "| 30 | 0.800 ± 0.100 |" in table


def test_unknown_strategy_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["quickstart", "--strategies", "nope"])
    assert exc.value.code == 2
    assert "skdbal quickstart: error: --strategies: unknown 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("setting, message", [
    ("n_querys=3", "unknown preset field(s) ['n_querys']"),
    ("optimizer=sgd", "optimizer must be one of ['adam', 'adamw']; got 'sgd'"),
    ("n_instances=2.5", "n_instances must be an int; got 2.5"),
])
def test_bad_preset_override_is_a_usage_error(setting, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "--preset", "gal2017", "--set", setting, "--out", str(tmp_path / "grid")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "grid").exists()  # refused before anything is written


@pytest.mark.parametrize("module", ["skdbal", "skdbal.cli"])
def test_python_dash_m_help(module):
    res = subprocess.run([sys.executable, "-m", module, "quickstart", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "--n-queries" in res.stdout and res.stderr == ""


def test_the_root_dispatches_to_each_package_s_commands():
    """``skdbal.cli`` is the command's root: the experiment commands come from the experiments package,
    ``label`` and ``labelstudio`` from theirs, and the experiments' module no longer builds the root."""
    import skdbal.experiments.cli as experiments_cli
    from skdbal.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == ["quickstart", "experiment", "report", "label", "labelstudio"]
    homes = {name: p.get_default("func").__module__ for name, p in sub.choices.items()}
    assert homes == {"quickstart": "skdbal.experiments.cli", "experiment": "skdbal.experiments.cli",
                     "report": "skdbal.experiments.cli", "label": "skdbal.labelling.cli",
                     "labelstudio": "skdbal.labelstudio.cli"}
    assert not hasattr(experiments_cli, "main") and not hasattr(experiments_cli, "build_parser")


def test_strategy_names_split_outside_parentheses():
    from skdbal.experiments.cli import split_names

    assert split_names("bald, filter(bald,0.1),filter(filter(bald,0.1),dynamic),random") == [
        "bald", "filter(bald,0.1)", "filter(filter(bald,0.1),dynamic)", "random"]


def test_version_flag_and_helpful_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"skdbal {__version__}"
    with pytest.raises(SystemExit):
        main(["experiment", "--help"])
    text = capsys.readouterr().out
    for expected in ("bald, max_entropy, variation_ratios", "filter(<strategy>, threshold)", "max_epochs=50",
                     "pool_subsample=2000", "SKDBAL_DATA", "~/skdbal_data"):
        assert expected in text, expected


def test_the_command_line_starts_without_torch():
    code = ("import sys, skdbal, skdbal.cli as cli; cli.build_parser(); "
            "print('torch' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == "False", res.stderr


def test_ctrl_c_prints_one_line_and_a_rerun_resumes(tmp_path):
    import signal
    import time
    cmd = [sys.executable, "-m", "skdbal", "experiment", "--set", "dataset='digits'", "--set", "max_epochs=300",
           "--set", "module_params={'kernel_size': 3}", "--set", "n_samples=5", "--set", "pool_subsample=150",
           "--set", "n_validation=50", "--set", "n_queries=100", "--seeds", "1", "--strategies", "bald",
           "--torch-threads", "1", "--out", str(tmp_path)]
    # as from a terminal: SIGINT at its default (a parent started in the background may ignore it)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stdout:  # wait for the first finished acquisition step
        if "step 2/100" in line:
            break
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["interrupted; rerun the same command to resume"]
    res = subprocess.run(cmd[:cmd.index("n_queries=100")] + ["n_queries=3"] + cmd[cmd.index("n_queries=100") + 1:],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "gal2017__bald__bayesian__seed1: resumes at step" in res.stdout
