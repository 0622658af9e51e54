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

from _helpers import LOOPBACK, free_port, spawn, stop_process, wait_for_http  # noqa: E402

#: The preset API token of the server's one user (id 1).
TOKEN = "0123456789abcdef0123456789abcdef01234567"
USER, PASSWORD = "annotator@example.org", "a-test-password-1"
#: The addresses a socket may listen on here: the loopback ones.
LOOPBACK_IPS = {"127.0.0.1", "::1"}


def label_studio_executable():
    path = os.environ.get("SKDBAL_LABEL_STUDIO") or str(ROOT / ".venv-ls" / "bin" / "label-studio")
    return path if Path(path).exists() else None


class Server:
    """``label-studio start`` on 127.0.0.1 with a data folder of its own; start() waits for /health."""

    def __init__(self, executable, data, env=None):
        self.executable, self.data, self.port, self.process = executable, Path(data), free_port(), None
        self.env = dict(env or {})      # more of Label Studio's settings (an ML backend here needs its SSRF ones)
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout=240):
        env = dict(os.environ, LABEL_STUDIO_BASE_DATA_DIR=str(self.data), LABEL_STUDIO_USERNAME=USER,
                   LABEL_STUDIO_PASSWORD=PASSWORD, LABEL_STUDIO_USER_TOKEN=TOKEN,
                   LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN="true", LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK="true",
                   DJANGO_DB="sqlite", SENTRY_DSN="", FRONTEND_SENTRY_DSN="", COLLECT_ANALYTICS="false", **self.env)
        # --internal-host is the address Django's server binds (Label Studio's default is 0.0.0.0: every
        # interface, with the preset token above); --host only makes the URLs it writes
        self.process = spawn([self.executable, "start", "--no-browser", "--internal-host", LOOPBACK,
                              "--host", LOOPBACK, "--port", self.port],
                             self.log_path, env=env, start_new_session=True)
        if wait_for_http(self.url + "/health", process=self.process, timeout=timeout, interval=1) is not None:
            return self
        if self.process.poll() is not None:
            raise RuntimeError(f"label-studio exited: {self.log()[-2000:]}")
        raise TimeoutError(f"label-studio did not answer within {timeout} s")

    @property
    def log_path(self) -> Path:
        """Label Studio's output (stdout and stderr; its log lines), appended to across restarts."""
        return self.data / "server.log"

    def log(self) -> str:
        """The text of :attr:`log_path` so far."""
        return self.log_path.read_text(errors="replace")

    def listening(self):
        """The addresses ``(ip, port)`` that the server and every process it started listen on (TCP)."""
        return listening_addresses(self.process.pid)

    def stop(self):
        if self.process is not None:
            stop_process(self.process, group=True, grace=30)


def listening_addresses(pid):
    """The ``(ip, port)`` of the TCP sockets in state LISTEN held by process ``pid`` and its descendants
    (``psutil``), sorted; an IPv4-mapped IPv6 address is given as its IPv4 one."""
    import psutil

    root = psutil.Process(pid)
    found = set()
    for process in [root, *root.children(recursive=True)]:
        try:
            connections = process.net_connections(kind="tcp")
        except psutil.NoSuchProcess:       # ended meanwhile
            continue
        for c in connections:
            if c.status == psutil.CONN_LISTEN:
                ip = c.laddr.ip
                found.add((ip[len("::ffff:"):] if ip.startswith("::ffff:") else ip, c.laddr.port))
    return sorted(found)


def tree_cpu_seconds(pid) -> float:
    """CPU seconds (user + system) of process ``pid`` and its descendants so far (``psutil``); 0 for a
    process that has ended, and a child that ends meanwhile is passed over."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in processes:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


#: What a Label Studio on this machine needs to call a backend (and its webhook) on 127.0.0.1.
SSRF_OFF = {"ML_BLOCK_LOCAL_IP": "false", "SSRF_PROTECTION_ENABLED": "false"}


def started_or_skip(folder, env=None) -> "Server":
    """A started Server in ``folder`` for a module's tests, or a skip that says how to install what is
    missing (Label Studio in its own virtual environment, and the labelstudio extra)."""
    import pytest

    executable = label_studio_executable()
    if executable is None:
        pytest.skip("Label Studio is not installed: set SKDBAL_LABEL_STUDIO to its label-studio executable, or "
                    "python -m venv .venv-ls && .venv-ls/bin/pip install label-studio (.ci/run does)")
    pytest.importorskip("label_studio_sdk", reason="the labelstudio extra (label-studio-sdk) is not installed")
    return Server(executable, folder, env=env).start()
