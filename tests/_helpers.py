"""What the tests share: loopback ports and servers, a Dask cluster in a bound, headless Chromium, the
digits in their shapes, and small models. Not a test module, and no fixtures: those are in
``conftest.py``, built on these.

Tests import it as ``from _helpers import ...``: pytest puts ``tests/`` on ``sys.path`` (the
``conftest.py`` there, in its default import mode). A script run outside pytest (``serve_for_kill.py``,
or ``lsserver.py`` from ``benchmarks/``) puts ``tests/`` there itself. Heavy imports (uvicorn, selenium,
httpx, dask, skdbal) wait until a helper needs them.
"""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

#: The only address a test server listens on.
LOOPBACK = "127.0.0.1"
#: The hosts a test's browser may open pages on.
LOOPBACK_HOSTS = frozenset({LOOPBACK, "localhost"})


# ----------------------------------------------------------------------------------------- ports

def free_port() -> int:
    """A TCP port free on 127.0.0.1 when asked (another process may take it before it is used)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` is http(s) on 127.0.0.1 or localhost."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.hostname in LOOPBACK_HOSTS


def wait_for_port(port: int, timeout: float = 20.0, process=None) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port`` within ``timeout`` seconds (and
    before ``process``, if given, exits)."""
    deadline = time.time() + timeout
    while time.time() < deadline and (process is None or process.poll() is None):
        try:
            socket.create_connection((LOOPBACK, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


# --------------------------------------------------------------------------------------- servers

def serve(app, tries: int = 3):
    """``app`` served by a real uvicorn server on 127.0.0.1 in a daemon thread, started and checked to
    listen there only; returns ``(base url, stop)``. A free port taken meanwhile: another port."""
    import uvicorn

    for _ in range(tries):
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning"))
        thread = threading.Thread(target=_run_quietly, args=(server,), daemon=True)
        thread.start()
        deadline = time.time() + 20
        while not server.started and thread.is_alive() and time.time() < deadline:
            time.sleep(0.05)
        if server.started:
            break
        server.should_exit = True   # the port was taken (the thread ended), or no start in time
        thread.join(10)
    assert server.started, f"no uvicorn server started on {LOOPBACK} in {tries} tries"
    bound = {sock.getsockname()[:2] for s in server.servers for sock in s.sockets}
    assert bound == {(LOOPBACK, port)}, f"the server listens on {bound}, not only on {LOOPBACK}:{port}"

    def stop():
        server.should_exit = True
        thread.join(10)

    return f"http://{LOOPBACK}:{port}", stop


def _run_quietly(server):
    """``server.run()``; uvicorn ends it with SystemExit when it cannot listen (:func:`serve` tries again)."""
    try:
        server.run()
    except SystemExit:
        pass


def spawn(argv, log_path, **popen_kwargs) -> subprocess.Popen:
    """``argv`` as a process whose output (stdout and stderr) is appended to ``log_path``."""
    with open(log_path, "ab") as log:   # the process holds its own copy
        return subprocess.Popen(list(map(str, argv)), stdout=log, stderr=subprocess.STDOUT, **popen_kwargs)


def wait_for_http(url: str, *, process=None, timeout: float = 60.0, interval: float = 0.05, headers=None):
    """GET ``url`` (on 127.0.0.1) until it answers 200: that response; None if ``process`` (if given)
    exited or ``timeout`` seconds passed first."""
    import httpx

    assert is_loopback_url(url), f"{url} is not on {LOOPBACK}"
    deadline = time.time() + timeout
    while time.time() < deadline and (process is None or process.poll() is None):
        try:
            r = httpx.get(url, headers=headers, timeout=2.0)
            if r.status_code == 200:
                return r
        except httpx.HTTPError:
            pass
        time.sleep(interval)
    return None


def stop_process(process: subprocess.Popen, sig=signal.SIGTERM, *, group: bool = False, grace: float = 30.0):
    """End ``process`` if it runs: ``sig``, then SIGKILL if it still runs ``grace`` seconds later. With
    ``group``, to its whole process group (a process started with ``start_new_session=True``)."""
    if process.poll() is not None:
        return process.returncode
    send = (lambda s: os.killpg(process.pid, s)) if group else process.send_signal
    send(sig)
    try:
        return process.wait(grace)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        return process.wait(10)


# ------------------------------------------------------------------------------------------ dask

def bounded(fn, timeout: float, what: str = "the Dask cluster"):
    """``fn()`` in a daemon thread, bounded in time: a hung cluster fails the test (naming ``what``) instead
    of blocking it; ``fn``'s own exception is re-raised here."""
    out = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as exc:  # re-raised below
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=timeout)
    assert not thread.is_alive(), f"{what} did not finish within {timeout:g} s"
    if "error" in out:
        raise out["error"]
    return out["result"]


@contextlib.contextmanager
def local_dask_client(processes: bool = True, timeout: float = 60.0):
    """A ``dask.distributed`` client of a cluster with two single-threaded workers (processes, or
    threads in this process) talking TCP on 127.0.0.1, no dashboard, both workers waited for (``timeout``
    seconds at most); shut down on leaving, even on failure."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, protocol="tcp", host=LOOPBACK,
                      dashboard_address=None) as cluster, Client(cluster, timeout=f"{timeout:g}s") as client:
        client.wait_for_workers(2, timeout=timeout)
        assert urlsplit(cluster.scheduler_address).hostname == LOOPBACK, cluster.scheduler_address
        yield client


def run_on_local_dask(work, timeout: float = 60.0):
    """Run ``work()`` under joblib's Dask backend on a real ``dask.distributed`` cluster: two
    single-threaded workers in this process, talking TCP on 127.0.0.1, bounded in time (:func:`bounded`)
    and shut down by its context managers even on failure. Returns ``(result, tasks, workers)``: the task
    stream and the workers' ids, so that a test can check the work ran there (with one worker thread joblib
    would run it locally)."""
    import dask
    import joblib
    from distributed import get_task_stream

    def run():
        with joblib.parallel_backend("dask"):
            return work()

    with dask.config.set({"distributed.comm.timeouts.connect": "30s"}), \
            local_dask_client(processes=False, timeout=30) as client, get_task_stream(client) as stream:
        workers = set(client.scheduler_info()["workers"])
        result = bounded(run, timeout)
    return result, stream.data, workers


# -------------------------------------------------------------------------------------- chromium

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
#: Skips a test without Debian's chromium and chromium-driver.
needs_chromium = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                    reason="Debian's chromium and chromium-driver are not installed "
                                           "(.ci/run installs them)")
#: Headless, no sandbox (containers), and nothing fetched but the test's pages: no QUIC, no background
#: networking, updates, sync or first-run pages, and no host resolved but localhost and 127.0.0.1 (the rule
#: takes in IP literals too).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1200,900",
                  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1")


def chromium_driver(profile_dir):
    """A Selenium driver of headless Chromium (:data:`CHROMIUM_FLAGS`, a profile in ``profile_dir``)
    whose ``get`` opens pages on 127.0.0.1 or localhost only. The caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    class LoopbackChrome(webdriver.Chrome):
        def get(self, url):
            assert is_loopback_url(url), f"the test browser opens pages on {LOOPBACK} only, not {url}"
            return super().get(url)

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + (f"--user-data-dir={profile_dir}",):
        options.add_argument(flag)
    return LoopbackChrome(service=Service(CHROMEDRIVER), options=options)


# ---------------------------------------------------------------------------------------- digits

def digits_flat(n=None, dtype=np.float64):
    """scikit-learn's digits as rows: ``(X, y)``, X of shape ``(N, 64)`` in [0, 1] (the 0..16 pixels
    divided by 16), the first ``n`` only if given."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return (X[:n] / 16.0).astype(dtype, copy=False), y[:n]


def digits_images(n=None, dtype=np.float64):
    """:func:`digits_flat` as ``(N, 8, 8)`` images."""
    X, y = digits_flat(n, dtype)
    return X.reshape(-1, 8, 8), y


# ---------------------------------------------------------------------------------------- models

def small_net(**params):
    """A small, seeded MCDropoutClassifier for the digits (``params`` override its defaults)."""
    from skdbal import MCDropoutClassifier

    defaults = dict(classes=np.arange(10), max_epochs=5, batch_size=32, n_samples=8, random_state=0)
    if "module" not in params:  # BayesianCNN on 8x8: 3x3 kernels keep a 2x2 map
        defaults["module__kernel_size"] = 3
    defaults.update(params)
    return MCDropoutClassifier(**defaults)


class TwoPasses:
    """A model with two MC passes set by hand: point i (row i of X holds i in column 0) has the passes
    ``[[a_i, 1 - a_i], [b_i, 1 - b_i]]``. Counts its sampling calls. It names no classes
    (:class:`BinaryTwoPasses` does)."""

    def __init__(self, a, b):
        self.a, self.b, self.calls = np.asarray(a, float), np.asarray(b, float), 0

    def predict_proba_samples(self, X, n_samples=None):
        self.calls += 1
        i = np.asarray(X)[:, 0].astype(int)
        return np.stack([np.c_[self.a[i], 1 - self.a[i]], np.c_[self.b[i], 1 - self.b[i]]])


class BinaryTwoPasses(TwoPasses):
    """:class:`TwoPasses` naming its classes, 0 and 1."""

    classes_ = np.array([0, 1])


def philox4x32_reference(counter, key, rounds=10):
    """Philox-4x32 in plain Python integers, as Random123 defines it (Salmon et al., 2011): ``rounds``
    rounds of ``(c0, c1, c2, c3) -> (hi(M1·c2) ^ c1 ^ k0, lo(M1·c2), hi(M0·c0) ^ c3 ^ k1, lo(M0·c0))``,
    the key bumped by the Weyl constants between rounds; all arithmetic modulo 2³²."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) % 2**32, (k1 + 0xBB67AE85) % 2**32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 % 2**32, (p0 >> 32) ^ c3 ^ k1, p0 % 2**32
    return c0, c1, c2, c3


def philox_byte(seed, t, layer, u):
    """The 8-bit draw of unit ``u`` in pass ``t`` of mask-drawing layer ``layer`` of the row keyed ``seed``
    (``mask_seeding="row_philox"``, p a multiple of 1/256)."""
    words = philox4x32_reference((u // 16, t, layer, 0), (seed % 2**32, seed >> 32))
    return (words[(u // 4) % 4] >> (8 * (u % 4))) & 0xFF


#: The shared MNIST copy beside the checkout (../shared/data/mnist), as in CI.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def mnist_candidates():
    """Where the MNIST tests look, in order: $SKDBAL_DATA, the copy beside the
    checkout (CI), and the loader's default cache ~/skdbal_data."""
    import os
    env = os.environ.get("SKDBAL_DATA")
    # absolute: a test may turn the folder into a file:// URL or change directory
    return ([Path(env).expanduser().resolve()] if env else []) + [SHARED_DATA, Path("~/skdbal_data").expanduser()]
