"""mypy over skdbal/ (configured in setup.cfg), held at a ceiling that only goes down.

The ceiling is the number in .ci/mypy-ceiling, and mypy must find exactly that many errors: CI fails above it
(mend the new errors, listed) and below it too, saying the number to write, so that the ceiling is lowered in the
same change that mends errors and never stays above what the tree has.
"""
import pathlib
import re
import subprocess
import sys

ceiling_file = pathlib.Path(__file__).with_name("mypy-ceiling")
ceiling = int(ceiling_file.read_text().split()[0])
run = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True)
out = run.stdout + run.stderr
found = re.search(r"Found (\d+) errors? in", out)
if found is None and "Success: no issues found" not in out:
    sys.exit(f"mypy did not finish: {out.strip().splitlines()[-1] if out.strip() else run.returncode}")
errors = int(found.group(1)) if found else 0
print(f"mypy: {errors} errors in skdbal/ (ceiling {ceiling}, .ci/mypy-ceiling)")
if errors > ceiling:
    print(out)
    sys.exit(f"mypy: {errors} errors, over the ceiling of {ceiling}: mend the new ones (listed above)")
if errors < ceiling:
    sys.exit(f"mypy: {errors} errors, {ceiling - errors} below the ceiling of {ceiling}: write {errors} in "
             ".ci/mypy-ceiling (in this change), so that the ceiling only goes down")
