"""``skdbal labelstudio --backend``: its options, and what is refused before anything is sent."""
import socket
from types import SimpleNamespace

import pytest

from skdbal.cli import main
from skdbal.labelstudio.cli import connect_backend

pytest.importorskip("label_studio_sdk", reason="the labelstudio extra (label-studio-sdk) is not installed")

BASE = ["labelstudio", "--demo", "digits", "--url", "http://127.0.0.1:9", "--project", "1", "--token-env",
        "SKDBAL_TEST_LS_TOKEN", "--backend"]


def test_a_backend_off_loopback_needs_a_token(monkeypatch, capsys):
    monkeypatch.setenv("SKDBAL_TEST_LS_TOKEN", "not-a-real-token")
    with pytest.raises(SystemExit) as e:
        main(BASE + ["--backend-host", "0.0.0.0"])
    err = capsys.readouterr().err.strip()      # one line, no usage before it
    assert e.value.code == 2
    assert err.startswith("skdbal labelstudio: error: --backend-host 0.0.0.0 serves other machines")
    assert "--backend-token-env" in err


def test_a_backend_port_in_use_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("SKDBAL_TEST_LS_TOKEN", "not-a-real-token")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        with pytest.raises(SystemExit) as e:
            main(BASE + ["--backend-port", str(busy.getsockname()[1])])
    finally:
        busy.close()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err.startswith("skdbal labelstudio: error: cannot serve the backend on 127.0.0.1")


def test_connect_backend_adds_it_with_basic_auth_and_gives_its_webhook_the_header():
    made, updated = [], []
    client = SimpleNamespace(
        ml=SimpleNamespace(list=lambda project: [], create=lambda **kw: made.append(kw) or {"id": 5}),
        webhooks=SimpleNamespace(list=lambda project: [{"id": 8, "url": "http://10.0.0.2:9090/webhook"},
                                                       {"id": 9, "url": "http://other/webhook"}],
                                 update=lambda **kw: updated.append(kw)))
    assert connect_backend(client, 3, "http://10.0.0.2:9090/", token="tok") == 5
    assert made == [{"url": "http://10.0.0.2:9090", "project": 3, "title": "skdbal", "is_interactive": False,
                     "auth_method": "BASIC_AUTH", "basic_auth_user": "skdbal", "basic_auth_pass": "tok"}]
    # base64 of "skdbal:tok"
    assert updated == [{"id": 8, "url": "http://10.0.0.2:9090/webhook",
                        "headers": {"Authorization": "Basic c2tkYmFsOnRvaw=="}}]


def test_connect_backend_gives_a_backend_there_already_this_runs_token():
    """A restart with a new token: the backend Label Studio has (found by its address) and its webhook
    are given the new token, else every webhook would get a 401; nothing is created."""
    made, ml_updated, hook_updated = [], [], []
    client = SimpleNamespace(
        ml=SimpleNamespace(list=lambda project: [{"id": 4, "url": "http://10.0.0.2:9090"}],
                           create=lambda **kw: made.append(kw), update=lambda **kw: ml_updated.append(kw)),
        webhooks=SimpleNamespace(list=lambda project: [{"id": 8, "url": "http://10.0.0.2:9090/webhook"}],
                                 update=lambda **kw: hook_updated.append(kw)))
    assert connect_backend(client, 3, "http://10.0.0.2:9090", token="new") is None
    assert made == []
    assert ml_updated == [{"id": 4, "url": "http://10.0.0.2:9090", "project": 3, "auth_method": "BASIC_AUTH",
                           "basic_auth_user": "skdbal", "basic_auth_pass": "new"}]   # Label Studio's /setup needs it
    # base64 of "skdbal:new"
    assert hook_updated == [{"id": 8, "url": "http://10.0.0.2:9090/webhook",
                             "headers": {"Authorization": "Basic c2tkYmFsOm5ldw=="}}]
