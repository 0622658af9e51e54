"""Label Studio as the place where people label, skdbal choosing what comes next.

:class:`LabelStudioSync` keeps a :class:`skdbal.labelling.LabellingSession`
and a Label Studio project in step through Label Studio's Python client
(``label-studio-sdk``, the ``labelstudio`` extra): tasks for the pool,
annotations into the session's store, and predictions carrying the
acquisition score for the Data Manager to sort by.
:func:`skdbal.labelstudio.backend.backend_app` serves the same session to
Label Studio as an ML backend (``skdbal labelstudio --backend``): its
webhooks bring the annotations, and ``/predict`` answers with the pushed
guesses. The estimators never import this subpackage.
"""
from .sync import LabelStudioSync, choices_of, file_key, list_tasks

__all__ = ["LabelStudioSync", "choices_of", "file_key", "list_tasks"]
