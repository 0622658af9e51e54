"""The README's commands and API example must stay true."""
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_api_example_runs(capsys):
    block = re.search(r"## API in 15 lines\s+```python\n(.*?)```", README, re.S).group(1)
    assert len(block.strip().splitlines()) <= 15
    ns = {}
    exec(compile(block, "README.md", "exec"), ns)
    n_labels, accuracy = capsys.readouterr().out.split()
    assert int(n_labels) == 120 and float(accuracy) > 0.8
    # "the next 5 to label" are rows of the pool nobody has labelled (issue 28: they were labelled ones)
    learner, idx = ns["learner"], ns["idx"]
    assert len(idx) == 5 and not set(idx.tolist()) & set(learner.labelled_idx_.tolist())
    assert len(learner.labelled_idx_) == 120 and (idx < 1300).all()


def test_readme_commands_match_ci():
    """The set-up commands, in the order CI runs them: torch first, then the package, then the tests."""
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    install = ("pip install torch==2.13.0", 'pip install -e ".[test]"')
    assert "```bash\n" + "\n".join(install) + "\n```" in README
    assert "```bash\npython -m pytest\n```" in README
    positions = [ci.index(f"\n{cmd}\n") for cmd in install + ("python -m pytest",)]
    assert positions == sorted(positions)
    assert README.index("## Set up") < README.index(install[0]) < README.index("## Main job")


def test_the_test_extra_installs_what_the_dask_test_needs():
    """CI installs only the ``test`` extra (``.ci/run``), and the Dask test imports ``distributed``
    without a skip, so that the claim that pools score on a dask.distributed cluster is tested there."""
    import configparser

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[1]
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    test_extra = [Requirement(line) for line in cfg["options.extras_require"]["test"].splitlines() if line.strip()]
    assert any(r.name == "dask" and "distributed" in r.extras for r in test_extra)
    assert "importorskip" not in (root / "tests" / "acquisition" / "test_pointwise.py").read_text()


def test_ci_prints_a_coverage_report_of_the_readme_suite():
    """The ``test`` extra brings pytest-cov, and CI runs the README's ``python -m pytest`` with a coverage
    report of the package (through PYTEST_ADDOPTS, so the command and a developer's run stay as they are)."""
    import configparser

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[1]
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    test_extra = [Requirement(line) for line in cfg["options.extras_require"]["test"].splitlines() if line.strip()]
    assert any(r.name == "pytest-cov" for r in test_extra)
    assert "--cov" not in cfg["tool:pytest"]["addopts"]
    ci = (root / ".ci" / "run").read_text()
    start = ci.index('\nexport PYTEST_ADDOPTS="--cov=skdbal --cov-report=term"\n')
    assert start < ci.index("\npython -m pytest\n") < ci.index("\nunset PYTEST_ADDOPTS\n") < ci.index("-m slow")
