"""The Data Manager's queries that :class:`~skdbal.labelstudio.LabelStudioSync` sends to Label Studio.

Private to :mod:`skdbal.labelstudio`: which tasks have annotations (a full pull), which have none (the
queue tab), which were updated since a time (an incremental pull), which hold a model version's
predictions (a push), and the time Label Studio writes.
"""
from __future__ import annotations

import json
from typing import Any, Dict

#: Data Manager filters: the tasks with no annotation, cancelled or not (the queue tab's), and the others (what a
#: full pull reads), by authors and by counters, each covering the other's gap (a counter Label Studio on SQLite
#: left at 0; an annotation whose author was deleted has none): tests/labelstudio/test_sync_real.py.
UNLABELLED: Dict[str, Any] = {"conjunction": "and", "items": [
    {"filter": "filter:tasks:annotators", "operator": "empty", "type": "List", "value": True}, *(
        {"filter": f"filter:tasks:{f}_annotations", "operator": "equal", "type": "Number", "value": 0}
        for f in ("total", "cancelled"))]}
ANNOTATED = json.dumps({"filters": {"conjunction": "or", "items": [
    {**f, "value": False} if f["type"] == "List" else {**f, "operator": "greater"} for f in UNLABELLED["items"]]}})
#: Label Studio's format of a Data Manager filter's time (``data_manager.managers.DATETIME_FORMAT``; UTC).
DATETIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def updated_filter(since: str) -> str:
    """The Data Manager's filter of the tasks updated after ``since`` (a time in :data:`DATETIME`)."""
    return json.dumps({"filters": {"conjunction": "and", "items": [
        {"filter": "filter:tasks:updated_at", "operator": "greater", "type": "Datetime", "value": since}]}})


def version_filter(name: str) -> str:
    """The Data Manager's filter of the tasks with a prediction whose model version contains ``name``
    (Label Studio matches a substring: ``skdbal-v1`` finds ``skdbal-v10`` too, so the caller checks)."""
    return json.dumps({"filters": {"conjunction": "and", "items": [
        {"filter": "filter:tasks:predictions_model_versions", "operator": "contains", "type": "List",
         "value": [name]}]}})


def utc_time(value):
    """A task's ``updated_at`` (a datetime, or Label Studio's ISO text) as an aware UTC datetime; None if absent."""
    from datetime import datetime, timezone

    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)
