"""The README's commands and API example must stay true."""
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_api_example_runs(capsys):
    block = re.search(r"## API in 15 lines\s+```python\n(.*?)```", README, re.S).group(1)
    assert len(block.strip().splitlines()) <= 15
    exec(compile(block, "README.md", "exec"), {})
    n_labels, accuracy = capsys.readouterr().out.split()
    assert int(n_labels) == 120 and float(accuracy) > 0.8


def test_readme_commands_match_ci():
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    for cmd in ('pip install -e ".[test]"', "python -m pytest"):
        assert f"```bash\n{cmd}\n```" in README
        assert f"\n{cmd}\n" in ci
