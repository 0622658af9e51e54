"""A real Label Studio on 127.0.0.1 for the slow tests and ``benchmarks/bench_labelstudio.py``.

``label-studio`` comes from its own virtual environment (so that its dependencies never touch ours):
``$SKDBAL_LABEL_STUDIO`` names the executable, else ``.venv-ls/bin/label-studio`` in the checkout
(``.ci/run`` makes it: ``python -m venv .venv-ls && .venv-ls/bin/pip install label-studio==1.23.2``).
The server gets a fresh data folder with SQLite, a preset user and a preset (legacy) API token.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:   # imported by benchmarks/ too, outside pytest
    sys.path.insert(0, str(ROOT / "tests"))

from _helpers import free_port, spawn, stop_process, wait_for_http  # noqa: E402

#: The preset API token of the server's one user (id 1).
TOKEN = "0123456789abcdef0123456789abcdef01234567"
USER, PASSWORD = "annotator@example.org", "a-test-password-1"


def label_studio_executable():
    path = os.environ.get("SKDBAL_LABEL_STUDIO") or str(ROOT / ".venv-ls" / "bin" / "label-studio")
    return path if Path(path).exists() else None


class Server:
    """``label-studio start`` on 127.0.0.1 with a data folder of its own; start() waits for /health."""

    def __init__(self, executable, data):
        self.executable, self.data, self.port, self.process = executable, Path(data), free_port(), None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout=240):
        env = dict(os.environ, LABEL_STUDIO_BASE_DATA_DIR=str(self.data), LABEL_STUDIO_USERNAME=USER,
                   LABEL_STUDIO_PASSWORD=PASSWORD, LABEL_STUDIO_USER_TOKEN=TOKEN,
                   LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN="true", LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK="true",
                   DJANGO_DB="sqlite", SENTRY_DSN="", FRONTEND_SENTRY_DSN="", COLLECT_ANALYTICS="false")
        self.process = spawn([self.executable, "start", "--no-browser", "--host", "127.0.0.1", "--port", self.port],
                             self.data / "server.log", env=env, start_new_session=True)
        if wait_for_http(self.url + "/health", process=self.process, timeout=timeout, interval=1) is not None:
            return self
        if self.process.poll() is not None:
            raise RuntimeError(f"label-studio exited: {(self.data / 'server.log').read_text()[-2000:]}")
        raise TimeoutError(f"label-studio did not answer within {timeout} s")

    def stop(self):
        if self.process is not None:
            stop_process(self.process, group=True, grace=30)
