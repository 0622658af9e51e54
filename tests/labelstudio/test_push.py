"""How a push goes to Label Studio (no server: a client that records its calls and can fail)."""
import os
import tempfile
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelstudio import LabelStudioSync

CONFIG = ('<View><Image name="i" value="$i"/><Choices name="c" toName="i">'
          '<Choice value="a"/><Choice value="b"/></Choices></View>')


class Client:
    """Records import_predictions and projects.update; fails the calls numbered in ``fail_at``."""

    def __init__(self, fail_at=()):
        self.calls, self.fail_at, self.n = [], set(fail_at), 0
        self.projects = SimpleNamespace(get=lambda id: {"label_config": CONFIG},
                                        import_predictions=self._import, update=self._update)

    def _count(self):
        self.n += 1
        if self.n in self.fail_at:
            raise httpx.ConnectError("Label Studio is restarting")

    def _import(self, id, request):
        self._count()
        self.calls.append(("import", [r["task"] for r in request]))

    def _update(self, id, model_version):
        self._count()
        self.calls.append(("version", model_version))


def sync_of(client, head=3):
    store = os.path.join(tempfile.mkdtemp(), "s.db")
    session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(4),
                               classes=["a", "b"], store=store, batch_size=2)
    return LabelStudioSync(session, client, project=1, head=head)


def request(n):
    return [{"task": t, "score": s, "model_version": "skdbal-v0", "result": []}
            for t, s in zip(range(100, 100 + n), np.linspace(0, 1, n))]     # worst first


def test_the_best_are_imported_first_then_the_version_switches_then_the_rest():
    client = Client()
    sync = sync_of(client)
    assert sync._send(0, "skdbal-v0", request(5)) == 5
    assert client.calls == [("import", [104, 103, 102]), ("version", "skdbal-v0"), ("import", [101, 100])]
    assert sync.pushed_version == 0 and sync._pending is None


@pytest.mark.parametrize("fail_at, first_return", [(1, 0), (2, 3), (3, 3)])
def test_a_push_cut_by_an_outage_resumes_where_it_stopped_with_nothing_twice(fail_at, first_return):
    client = Client(fail_at={fail_at})
    sync = sync_of(client)
    assert sync._send(0, "skdbal-v0", request(5)) == first_return
    assert sync.pushed_version is None and isinstance(sync.last_error, httpx.ConnectError)
    assert sync._send(None) == 5 - first_return
    imported = [t for kind, tasks in client.calls if kind == "import" for t in tasks]
    assert sorted(imported) == list(range(100, 105)) and len(imported) == 5
    assert [c for c in client.calls if c[0] == "version"] == [("version", "skdbal-v0")]
    assert sync.pushed_version == 0 and sync._send(None) == 0


def test_a_refusal_is_not_kept_for_later():
    class Refusing(Client):
        def _import(self, id, request):
            raise type("ApiError", (Exception,), {"status_code": 400})()

    sync = sync_of(Refusing())
    with pytest.raises(Exception) as e:
        sync._send(0, "skdbal-v0", request(2))
    assert e.value.status_code == 400
