"""benchmarks/device_kit.sh, which carries to a GPU machine without network what it lacks: it parses,
and its wheels cover what skdbal needs that such a machine's image may not hold."""
import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "benchmarks" / "device_kit.sh"
#: What the kit never carries: the image's own builds (torch, numpy, scipy), and matplotlib, which
#: skdbal imports only inside its plotting functions (none of which the GPU checks call).
IMAGE = {"torch", "numpy", "scipy", "matplotlib"}


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_kit_parses():
    subprocess.run(["bash", "-n", str(KIT)], check=True)


def test_the_kit_carries_every_requirement_the_image_may_lack():
    wheels = re.search(r"^WHEELS=\((.*?)\)", KIT.read_text(), re.M | re.S).group(1).split()
    pinned = {_norm(w.split("==")[0]): w.split("==")[1] for w in wheels}
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.]*", v) for v in pinned.values()), "one pinned version each"
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    required = {_norm(re.split(r"[<>=!~ ;\[]", line.strip())[0])
                for line in cfg.get("options", "install_requires").splitlines() if line.strip()}
    assert required - IMAGE - set(pinned) == set()
    assert {"baal", "structlog", "pytest", "pluggy", "iniconfig"} <= set(pinned)  # bench_gpu.py, the tests
