"""A pull reads Label Studio's tasks page by page and asks for no page past the last one.

No server: ``label-studio-sdk``'s own client over an ``httpx.MockTransport`` that pages ``n`` tasks
as Label Studio 1.23 does (Django REST framework's page-number pagination: ``page`` and
``page_size``, a ``total`` in each answer, an empty page 1 for no tasks, and ``404 Invalid page.``
past the end, which Label Studio logs as an error with a traceback), and records the pages asked for.
"""
import json
import os
import tempfile

import httpx
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession

pytest.importorskip("label_studio_sdk", reason="the labelstudio extra (label-studio-sdk) is not installed")

CONFIG = ('<View><Image name="i" value="$i"/><Choices name="c" toName="i">'
          '<Choice value="a"/><Choice value="b"/></Choices></View>')
POOL = 8


class FakeLabelStudio:
    """Serves project 1 and its ``n`` tasks (keys "0".."n-1"); ``default`` is the page size when none is
    asked for, ``cap`` the largest it serves (Label Studio's ``TASK_API_PAGE_SIZE_MAX``), ``total``
    whether answers carry the total, ``claims`` a total larger than the tasks (some deleted meanwhile)."""

    def __init__(self, n, default=100, cap=None, total=True, claims=None):
        self.n, self.default, self.cap, self.total, self.claims = n, default, cap, total, claims
        self.pages = []                          # (page, page_size asked, query) per request of /api/tasks/

    def __call__(self, request):
        if request.url.path == "/api/projects/1/":
            return httpx.Response(200, json={"id": 1, "title": "p", "label_config": CONFIG})
        assert request.url.path == "/api/tasks/", request.url
        q = request.url.params
        self.pages.append((int(q["page"]), int(q["page_size"]) if "page_size" in q else None, q.get("query")))
        size = int(q.get("page_size", self.default))
        size = min(size, self.cap) if self.cap else size
        page = int(q["page"])
        if page > max(1, -(-self.n // size)):                 # past the last page (page 1 is always one)
            return httpx.Response(404, json={"detail": "Invalid page.", "status_code": 404})
        ids = range((page - 1) * size, min(self.n, page * size))
        body = {"tasks": [{"id": 100 + i, "data": {"skdbal_key": str(i)}, "annotations": []} for i in ids],
                "total_annotations": 0, "total_predictions": 0}
        if self.total:
            body["total"] = self.claims or self.n
        return httpx.Response(200, json=body)


def sync_of(server, page_size=None):
    from label_studio_sdk import LabelStudio

    from skdbal.labelstudio import LabelStudioSync

    client = LabelStudio(base_url="http://127.0.0.1:9", api_key="t",
                         httpx_client=httpx.Client(transport=httpx.MockTransport(server)))
    session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(POOL),
                               classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    return LabelStudioSync(session, client, project=1, **({} if page_size is None else {"page_size": page_size}))


# n tasks at 3 a page: the pages a full read asks for (hand-counted: ceil(n / 3), and page 1 for none)
@pytest.mark.parametrize("n, pages", [(0, [1]), (1, [1]), (2, [1]), (3, [1]), (4, [1, 2]), (5, [1, 2]),
                                      (6, [1, 2]), (7, [1, 2, 3])])
def test_a_pull_and_a_mapping_ask_for_each_page_once_and_none_past_the_last(n, pages):
    server = FakeLabelStudio(n, default=3)
    sync = sync_of(server, page_size=3)
    assert sync.map_tasks() == n
    assert [p for p, _, _ in server.pages] == pages
    assert server.pages == [(p, 3, None) for p in pages]
    assert sync.task_of == {i: 100 + i for i in range(n)}
    assert [sync.item_of_task(100 + i) for i in range(n)] == list(range(n)) and sync.item_of_task(100 + n) is None
    server.pages.clear()
    assert sync.pull() == 0                                  # no annotations: nothing new
    assert [p for p, _, _ in server.pages] == pages
    assert {size for _, size, _ in server.pages} == {3}
    annotated = {"conjunction": "or", "items": [                    # an annotation by anyone, or one counted
        {"filter": "filter:tasks:annotators", "operator": "empty", "type": "List", "value": False},
        {"filter": "filter:tasks:total_annotations", "operator": "greater", "type": "Number", "value": 0},
        {"filter": "filter:tasks:cancelled_annotations", "operator": "greater", "type": "Number", "value": 0}]}
    assert all(json.loads(q)["filters"] == annotated for _, _, q in server.pages)   # the annotated only


def test_a_new_mapping_answers_for_the_tasks_found_then_and_task_of_is_a_copy():
    """The backend asks the sync which item a task is (no dict handed out to compare by identity): a task
    mapped before and gone now is no item; changing the copy changes nothing."""
    server = FakeLabelStudio(4, default=3)
    sync = sync_of(server, page_size=3)
    sync.map_tasks()
    sync.task_of[0] = 999
    assert sync.task_of[0] == 100 and sync.item_of_task(999) is None
    server.n = 2
    assert sync.map_tasks() == 2
    assert sync.task_of == {0: 100, 1: 101} and sync.item_of_task(101) == 1 and sync.item_of_task(103) is None


def test_the_default_page_size_is_label_studios_100():
    server = FakeLabelStudio(POOL)
    assert sync_of(server).map_tasks() == POOL
    assert [p for p, _, _ in server.pages] == [1]
    assert server.pages == [(1, 100, None)]


def test_a_server_that_serves_smaller_pages_than_asked_is_read_to_the_end():
    """7 tasks, 5 asked a page, 3 served: pages of 3, 3, 1; the total, not the short page, ends it."""
    server = FakeLabelStudio(7, cap=3)
    sync = sync_of(server, page_size=5)
    assert sync.map_tasks() == 7
    assert [p for p, _, _ in server.pages] == [1, 2, 3]
    assert server.pages == [(1, 5, None), (2, 5, None), (3, 5, None)]


def test_without_a_total_a_short_page_ends_the_list():
    server = FakeLabelStudio(7, total=False)
    sync = sync_of(server, page_size=3)
    assert sync.map_tasks() == 7
    assert [p for p, _, _ in server.pages] == [1, 2, 3]


def test_tasks_deleted_between_two_pages_end_the_list_without_an_error():
    """The first page says 7 tasks; only 6 are left: page 3 answers 404, and the 6 are the list."""
    server = FakeLabelStudio(6, claims=7)
    sync = sync_of(server, page_size=3)
    assert sync.map_tasks() == 6
    assert [p for p, _, _ in server.pages] == [1, 2, 3]


def test_an_error_on_the_first_page_is_raised():
    from label_studio_sdk import LabelStudio
    from label_studio_sdk.core.api_error import ApiError

    from skdbal.labelstudio.sync import list_tasks

    asked = []

    def missing(request):
        asked.append(request.url.params["page"])
        return httpx.Response(404, json={"detail": "Not found."})

    client = LabelStudio(base_url="http://127.0.0.1:9", api_key="t",
                         httpx_client=httpx.Client(transport=httpx.MockTransport(missing)))
    with pytest.raises(ApiError) as e:
        list_tasks(client, 1)
    assert e.value.status_code == 404 and asked == ["1"]
