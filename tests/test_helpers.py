"""The tests' own helpers (tests/_helpers.py) and the fixtures built on them (tests/conftest.py)."""
import signal
import socket
import sys
import threading
import time

import _helpers
import numpy as np
import pytest
from _helpers import (
    LOOPBACK,
    BinaryTwoPasses,
    TwoPasses,
    bounded,
    chromium_driver,
    digits_flat,
    digits_images,
    free_port,
    is_loopback_url,
    local_dask_client,
    needs_chromium,
    serve,
    spawn,
    stop_process,
    wait_for_http,
    wait_for_port,
)


def refused(host, port):
    """Whether a TCP connection to host:port is refused (nothing listens there)."""
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return True
    return False


def hello_app():
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    async def hello(request):
        return HTMLResponse("<html><body><p id='hello'>hello from 127.0.0.1</p></body></html>")

    return Starlette(routes=[Route("/", hello)])


# ----------------------------------------------------------------------------------------- ports

def test_free_port_is_a_bindable_loopback_port():
    port = free_port()
    assert 1024 <= port < 65536
    with socket.socket() as s:
        s.bind((LOOPBACK, port))
        s.listen()
        assert s.getsockname() == (LOOPBACK, port)
        assert wait_for_port(port, timeout=5)
    assert refused(LOOPBACK, port)


def test_wait_for_port_gives_up():
    assert not wait_for_port(free_port(), timeout=0.3)


@pytest.mark.parametrize("url, loopback", [
    ("http://127.0.0.1:8000/", True), ("https://localhost/x", True), ("http://127.0.0.1", True),
    ("http://example.org/", False), ("http://127.0.0.1.example.org/", False), ("file:///etc/passwd", False),
    ("http://10.0.0.1:8000/", False), ("about:blank", False),
])
def test_is_loopback_url(url, loopback):
    assert is_loopback_url(url) is loopback


# --------------------------------------------------------------------------------------- servers

def test_serve_listens_on_127_0_0_1_only_and_stops():
    import httpx

    base, stop = serve(hello_app())
    try:
        port = int(base.rsplit(":", 1)[1])
        assert base == f"http://127.0.0.1:{port}"
        assert "hello from 127.0.0.1" in httpx.get(base + "/", timeout=10).text
        assert refused("127.0.0.2", port)          # another loopback address: not bound to all interfaces
    finally:
        stop()
    assert refused(LOOPBACK, port)


def test_serve_takes_another_port_when_its_port_is_taken(monkeypatch):
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        real = _helpers.free_port
        monkeypatch.setattr(_helpers, "free_port", lambda: next(ports, None) or real())
        base, stop = serve(hello_app())
        try:
            assert base != f"http://127.0.0.1:{taken.getsockname()[1]}"
        finally:
            stop()


def test_a_spawned_server_is_waited_for_and_stopped(tmp_path):
    port = free_port()
    proc = spawn([sys.executable, "-m", "http.server", "--bind", LOOPBACK, port], tmp_path / "server.log",
                 cwd=tmp_path)
    try:
        r = wait_for_http(f"http://127.0.0.1:{port}/", process=proc, timeout=30)
        assert r is not None and r.status_code == 200
        assert refused("127.0.0.2", port)
    finally:
        assert stop_process(proc, grace=10) == -signal.SIGTERM
    assert stop_process(proc) == -signal.SIGTERM                    # already ended: its status again
    assert (tmp_path / "server.log").read_bytes()                   # its output went to the log


def test_wait_for_http_stops_when_the_process_exits_and_asks_loopback_only(tmp_path):
    proc = spawn([sys.executable, "-c", "print('bye')"], tmp_path / "out.log")
    t0 = time.time()
    assert wait_for_http(f"http://127.0.0.1:{free_port()}/", process=proc, timeout=60) is None
    assert time.time() - t0 < 30 and proc.returncode == 0
    assert (tmp_path / "out.log").read_text() == "bye\n"
    assert wait_for_http(f"http://127.0.0.1:{free_port()}/", timeout=0.2) is None
    with pytest.raises(AssertionError, match="not on 127.0.0.1"):
        wait_for_http("http://example.org/", timeout=0.2)


def test_stop_process_kills_what_ignores_sigterm(tmp_path):
    code = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(60)\n")
    log = tmp_path / "stubborn.log"
    proc = spawn([sys.executable, "-c", code], log, start_new_session=True)
    deadline = time.time() + 30
    while "ready" not in log.read_text() and time.time() < deadline:
        time.sleep(0.05)
    assert "ready" in log.read_text()
    assert stop_process(proc, group=True, grace=0.5) == -signal.SIGKILL


def test_bounded_returns_reraises_and_fails_a_hang():
    assert bounded(lambda: 42, 5) == 42
    with pytest.raises(KeyError, match="inside"):
        bounded(lambda: {}["inside"], 5)
    release = threading.Event()
    try:
        with pytest.raises(AssertionError, match="the hung thing did not finish within 0.2 s"):
            bounded(release.wait, 0.2, "the hung thing")
    finally:
        release.set()


def test_local_dask_client_runs_two_workers_on_127_0_0_1():
    pytest.importorskip("distributed")
    with local_dask_client(processes=False, timeout=30) as client:
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)
        assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6


# ---------------------------------------------------------------------------------------- digits

def test_the_digits_helpers():
    X, y = digits_flat()
    assert X.shape == (1797, 64) and X.dtype == np.float64 and y.shape == (1797,)
    assert X.min() == 0.0 and X.max() == 1.0 and np.all(X * 16 == np.round(X * 16))   # 0..16 over 16
    X300, y300 = digits_flat(300)
    assert np.array_equal(X300, X[:300]) and np.array_equal(y300, y[:300])
    X32, _ = digits_flat(dtype=np.float32)
    assert X32.dtype == np.float32 and np.array_equal(X32, X)
    images, y_images = digits_images(dtype=np.float32)
    assert images.shape == (1797, 8, 8) and images.dtype == np.float32
    assert np.array_equal(images.reshape(1797, -1), X) and np.array_equal(y_images, y)
    assert digits_images(10)[0].shape == (10, 8, 8) and digits_images()[0].dtype == np.float64


def test_the_digits_fixtures(digits, flat_digits, flat_digits32, digits64, flat_digits300):
    X, y = flat_digits
    for (Xf, yf), shape, dtype in [(digits, (1797, 8, 8), np.float32), (flat_digits, (1797, 64), np.float64),
                                   (flat_digits32, (1797, 64), np.float32), (digits64, (1797, 8, 8), np.float64),
                                   (flat_digits300, (300, 64), np.float64)]:
        assert Xf.shape == shape and Xf.dtype == dtype
        assert np.array_equal(Xf.reshape(len(Xf), -1), X[:len(Xf)]) and np.array_equal(yf, y[:len(Xf)])


# ---------------------------------------------------------------------------------------- models

def test_two_passes_by_hand():
    model = TwoPasses([0.75, 0.5], [0.25, 0.5])
    P = model.predict_proba_samples(np.array([[1], [0], [1]]))
    np.testing.assert_array_equal(P, [[[0.5, 0.5], [0.75, 0.25], [0.5, 0.5]],
                                      [[0.5, 0.5], [0.25, 0.75], [0.5, 0.5]]])
    assert model.calls == 1 and not hasattr(model, "classes_")
    binary = BinaryTwoPasses([0.75], [0.25])
    assert binary.classes_.tolist() == [0, 1]
    np.testing.assert_array_equal(binary.predict_proba_samples(np.zeros((1, 1))), P[:, 1:2])


def test_small_net_defaults_and_overrides(small_net):
    assert small_net is _helpers.small_net
    net = small_net()
    assert net.module__kernel_size == 3 and net.max_epochs == 5 and net.n_samples == 8 and net.random_state == 0
    assert list(net.classes) == list(range(10))
    assert small_net(max_epochs=2).max_epochs == 2
    from skdbal.models import MLP
    assert "module__kernel_size" not in small_net(module=MLP).get_params()


# -------------------------------------------------------------------------------------- chromium

@pytest.mark.slow
@needs_chromium
def test_chromium_opens_loopback_pages_only(tmp_path):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    base, stop = serve(hello_app())
    driver = chromium_driver(tmp_path / "chrome")
    try:
        driver.get(base + "/")
        assert driver.find_element(By.ID, "hello").text == "hello from 127.0.0.1"
        assert driver.get_window_size() == {"width": 1200, "height": 900}
        with pytest.raises(AssertionError, match="pages on 127.0.0.1 only"):
            driver.get("http://example.org/")
        # past that check, a host name other than localhost resolves to nothing (--host-resolver-rules)
        with pytest.raises(WebDriverException, match="ERR_NAME_NOT_RESOLVED"):
            type(driver).__mro__[1].get(driver, f"http://{socket.gethostname()}:{base.rsplit(':', 1)[1]}/")
    finally:
        driver.quit()
        stop()
