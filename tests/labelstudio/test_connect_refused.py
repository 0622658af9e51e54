"""``skdbal labelstudio --backend --connect`` stops, with one line, when Label Studio does not accept the backend
(no server: the in-memory Label Studio of ``test_pull_changes.py``, whose ML API refuses; the backend is served
by uvicorn on 127.0.0.1). Against a real Label Studio: ``test_unknown_real.py``."""
import argparse
import threading
from types import SimpleNamespace

import pytest
from _helpers import free_port
from test_pull_changes import MemoryLabelStudio, sync_of

from skdbal.labelstudio import cli


class Refused(Exception):
    """As label-studio-sdk's ApiError: a status and a body."""

    def __init__(self, status_code, body):
        super().__init__(f"status_code: {status_code}, body: {body}")
        self.status_code, self.body = status_code, body


def serve(tmp_path, ml, port=0, token_env=None):
    pytest.importorskip("uvicorn")
    ls = MemoryLabelStudio()
    ls.client.ml = ml
    ls.client.webhooks = SimpleNamespace(list=lambda project: [])
    sync = sync_of(ls)
    sync.session.on_query.clear()          # no pushes: this Label Studio takes none
    args = argparse.Namespace(backend_host="127.0.0.1", backend_port=port, backend_token_env=token_env,
                              backend_url=None, backend_allowed_hosts=None, connect=True)
    backend = cli._backend_settings(args)
    ended = []

    def command():
        try:
            ended.append(cli._serve_backend(args, sync, backend, tmp_path / "s.db", str(tmp_path / "labels.csv")))
        except Exception as exc:  # noqa: BLE001 - what the command would say
            ended.append(exc)

    thread = threading.Thread(target=command, daemon=True)     # so that a command that goes on fails the test
    thread.start()
    thread.join(60)
    try:
        assert not thread.is_alive(), "the command went on serving a backend Label Studio did not accept"
    finally:
        backend["socket"].close()
    sync.session.store.close()
    if isinstance(ended[0], Exception):
        raise ended[0]
    return ended[0]


def test_an_update_label_studio_refuses_stops_the_command(tmp_path, capsys, monkeypatch):
    """The 500 Label Studio 1.23 gave an update without the project (a backend there already, a token given):
    the command stops serving, in one line, where it went on unheard."""
    updates = []

    def update(**kw):
        updates.append(kw)
        raise Refused(500, {"detail": "MLBackend.setup_() missing 1 required positional argument: 'project'",
                            "exc_info": "Traceback (most recent call last):\n  File ..."})

    port = free_port()
    monkeypatch.setenv("SKDBAL_TEST_BACKEND_TOKEN", "backend-token")
    with pytest.raises(ValueError) as refused:
        serve(tmp_path, SimpleNamespace(list=lambda project: [{"id": 3, "url": f"http://127.0.0.1:{port}"}],
                                        update=update), port, "SKDBAL_TEST_BACKEND_TOKEN")
    assert [u["project"] for u in updates] == [1]
    said = str(refused.value)
    assert said.startswith("Label Studio did not accept the backend at http://127.0.0.1:") and "\n" not in said
    assert "(--connect): Label Studio answered 500: {'detail': \"MLBackend.setup_() missing" in said
    assert "stopped; 0 labels" in capsys.readouterr().err


def test_a_backend_with_no_webhook_stops_the_command(tmp_path):
    made = []
    with pytest.raises(ValueError, match=r"did not accept the backend .* Label Studio has no webhook for the "
                                         r"backend .* SSRF_PROTECTION_ENABLED=false"):
        serve(tmp_path, SimpleNamespace(list=lambda project: [], create=lambda **kw: made.append(kw) or {"id": 4}))
    assert len(made) == 1
