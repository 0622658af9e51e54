"""The loop's oracle and journal in the store: people's answers read from it, each model version written to it.

:class:`StoreOracle` is the oracle of a labelling session's loop: a queried batch is offered on the
session's :class:`~skdbal.labelling._offers.OfferBoard`, and the answers are the store's events since the
last collect. :class:`StoreJournal` is its journal: one row per model version, reported to the session
through a callback before the store records it. Both take the board and the store, never the session.

:mod:`skdbal.labelling` exports both (a session's ``oracle`` and ``journal`` are theirs);
:class:`SessionStopped` is internal to the session's loop.
"""
from __future__ import annotations

import time as _time
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

import numpy as np

from ..oracles import Answer, Oracle
from ._offers import TWO_CLASSES, OfferBoard

if TYPE_CHECKING:
    import skdbal.loop


class SessionStopped(RuntimeError):
    """Raised in the loop's thread when the session stops while it waits for labels.

    Examples
    --------
    >>> from skdbal.labelling._oracle import SessionStopped
    >>> issubclass(SessionStopped, RuntimeError)
    True
    """


class StoreOracle(Oracle):
    """People, through the store: answers are the store's events since the last collect.

    Parameters
    ----------
    board : OfferBoard
        Where each queried batch is offered.
    store : LabelStore
    learner : ActiveLearner
        The loop's learner (read for its version, labels and last acquisition).
    retrain_after : int
        New labels after which the model retrains (counted by :func:`new_labels`: an undo and a new label
        of one item count once).
    first_retrain_after : int, optional
        Labels the first model waits for; by default the first batch's size.
    label_of : callable
        A class as the store's text gives it back (``"3"`` -> ``3``).
    judge : callable, optional
        Called as ``judge(events)`` with the new labels as they arrive, outside the board's lock (the
        session judges them with the current model and offers the flagged ones for second looks).
    on_query : list of callable, optional
        Each called as ``callback(positions, scores)`` after a batch is offered.

    Examples
    --------
    Every session has one, as its loop's oracle:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    >>> session = LabellingSession(learner, np.eye(4), classes=["a", "b"],
    ...                            store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> type(session.oracle).__name__, session.oracle.cursor
    ('StoreOracle', 0)
    """

    annotator = None

    def __init__(self, board: OfferBoard, store, learner, *, retrain_after: int,
                 first_retrain_after: Optional[int] = None, label_of: Callable = str,
                 judge: Optional[Callable[[List[dict]], None]] = None, on_query: Optional[list] = None):
        self.board, self.store, self.learner = board, store, learner
        self.retrain_after, self.first_retrain_after = retrain_after, first_retrain_after
        self.label_of, self.judge = label_of, judge
        self.on_query = [] if on_query is None else on_query
        #: The loop this oracle answers (its pending and skipped rows are read), set when it starts.
        self.loop: Optional[skdbal.loop.ActiveLearningLoop] = None
        self.stopping = False      # set by stop(): a collect that waits raises SessionStopped
        self.cursor = 0            # answers were delivered for the events up to this id
        self.judged = 0            # the model judged the labels up to this id
        self.replay_upto: Optional[int] = None
        #: The batches queried since the last model version was recorded, each as a draw record
        #: (:func:`draw_record`); the journal writes them with the next version.
        self.draws: List[dict] = []
        self._taken: List[int] = []   # what taken() last told the loop: the query's candidates left it out

    def stop(self) -> None:
        """Stop: a collect waiting for labels raises :class:`SessionStopped`."""
        with self.board.changed:
            self.stopping = True
            self.board.changed.notify_all()

    def request(self, positions) -> None:
        positions = [int(p) for p in positions]
        if self.replay_upto is not None:
            return  # a resume asks again for labels already given: nothing to offer
        learner = self.learner
        acq = getattr(learner, "last_acquisition_", None)
        record = draw_record(positions, acq, learner, self.loop, self._taken)
        if record is not None:
            self.draws.append(record)
        scores = {}
        if acq is not None and acq.scores is not None and len(acq.indices) == len(positions):
            scores = {int(i): float(s) for i, s in zip(acq.indices, acq.scores)}
        # the new picks, then what earlier batches left unanswered (the loop keeps those out of its
        # queries, so they are offered until answered); the loop's own state, read in its thread
        loop = self.loop
        left = [int(p) for p in (loop.pending if loop is not None else []) if p not in set(positions)]
        self.board.guess_ahead(positions + left)  # before people see the batch: their requests never wait
        self.board.offer(positions, left, scores, getattr(learner, "step_", None))
        for callback in list(self.on_query):  # in the loop's thread, after people can see the batch
            callback(positions, scores)
        # the next best, for when people finish the batch first
        self.board.prepare_tail(self.board.batch, loop.skipped if loop is not None else ())

    def taken(self) -> List[int]:
        """Items the next query must leave out although the learner has no label of them yet
        (:meth:`OfferBoard.taken`). When they would leave less than a batch to query, the skips are
        reopened first (items skipped again since the last collect, which the loop has not heard of)."""
        taken, loop = self.board.taken(), self.loop
        if loop is not None and self.store.skipped():
            free = ~self.learner.labelled_mask_
            for out in (loop.pending, loop.skipped, taken):
                free[np.asarray(out, dtype=np.intp)] = False
            if free.sum() < self.board.batch_size:
                self.board.reopen_skips()
                taken = self.board.taken()
        self._taken = list(taken)   # the next query's candidates leave these out: its draw record counts them
        return taken

    def _answers(self, upto: Optional[int], items: Optional[Sequence[int]] = None,
                 events: Optional[List[dict]] = None) -> List[Answer]:
        store, learner = self.store, self.learner
        events = store.events(after=self.cursor) if events is None else events
        if upto is not None:
            events = [e for e in events if e["event"] <= upto]
        touched = list(dict.fromkeys(e["item"] for e in events)) if items is None else list(items)
        touched = [i for i in touched if i not in self.board.reserved]   # audit labels: never trained on
        current = store.current_labels(upto=upto)
        skipped = set(store.skipped(current))   # a skip since reopened is no answer
        labelled = learner.labelled_mask_
        answers = []
        for item in touched:
            if item in current:
                c = current[item]
                label = self.label_of(c["label"])
                if labelled[item] and learner.y_pool_[item] == label:
                    continue  # a confirmed second look, a skip of a labelled item: nothing changes
                answers.append(Answer(item, label, c["annotator"], c["time"]))
            elif labelled[item]:
                answers.append(Answer(item, None, None, None, retract=True))
            elif item in skipped and any(e["item"] == item and e["kind"] == "skip" for e in events):
                answers.append(Answer(item, None, None, None))
        if events:
            self.cursor = max(self.cursor, events[-1]["event"])
        return answers

    def collect(self, pending) -> List[Answer]:
        board, store = self.board, self.store
        if self.replay_upto is not None:  # resume: the labels as the last model saw them
            upto, self.replay_upto = self.replay_upto, None
            answers = self._answers(upto, [int(p) for p in pending])
            self.cursor = upto
            self.judged = max([upto] + [c["event"] for c in store.checks()])
            return answers
        new: List[dict] = []   # the events since the cursor, read as they come
        while True:
            with board.changed:
                if self.stopping:
                    raise SessionStopped("the session stopped")
                more = store.events(after=new[-1]["event"] if new else self.cursor)
                new += more
                n_labels = new_labels([e for e in new if e["item"] not in board.reserved])   # audits: not
                answered = answered_items(new)                                           # towards a retrain
                waiting = [p for p in pending if p not in answered]
                if getattr(self.learner, "step_", -1) >= 0:
                    ready = bool(new) and (n_labels >= self.retrain_after or not waiting)
                else:  # the first model: a retrain's worth of labels (by default the whole first batch,
                    # as simulate() trains on its initial set), of two classes at least
                    enough = bool(new) and self._enough_classes(new[-1]["event"])
                    first = len([i for i in board.batch if i not in board.reserved]) \
                        if self.first_retrain_after is None else self.first_retrain_after
                    ready = (n_labels >= first or not waiting) and enough
                    # the first batch is answered with one class: more items are offered (a covering order)
                    board.wait_for(TWO_CLASSES if not waiting and not enough else None)
                if ready:
                    board.start_training()   # people finishing the batch get the tail at once
                unjudged = [e for e in new if e["event"] > self.judged and e["kind"] == "label"]
                if not ready and not unjudged:
                    board.changed.wait(timeout=0.5)
                    continue
            if unjudged:  # as labels arrive, outside the lock: submissions never wait for the model
                if self.judge is not None:
                    self.judge(unjudged)
                self.judged = unjudged[-1]["event"]
            if ready:
                break
        answers = self._answers(new[-1]["event"], events=new)   # the labels as of the events read, no later
        return answers + self._reopened(answers, waiting)

    def _reopened(self, answers: List[Answer], waiting: Sequence[int]) -> List[Answer]:
        """Answers to add after ``answers`` that take skips back (a retraction of an unlabelled item, which
        the loop reads as "not skipped"): of the items the store reopened since the loop heard of their skip
        (:meth:`LabellingSession.reopen_skips`); and, when fewer than two batches of items would be left
        for the next query and its tail but skipped ones, of every skipped item, the skips reopened and
        offered (:meth:`OfferBoard.reopen_skips`): the loop cannot query a batch out of fewer items."""
        store, loop = self.store, self.loop
        current = store.current_labels()
        mask = self.learner.labelled_mask_
        labelled = set(current) | {int(i) for i in np.flatnonzero(mask)}
        in_store = set(store.skipped(current))
        in_loop = {int(i) for i in (loop.skipped if loop is not None else ())} - labelled
        skipped = (in_store | in_loop | {a.position for a in answers if a.skipped}) - labelled
        busy = labelled | skipped | {int(p) for p in waiting} | set(self.board.taken())
        if skipped and len(mask) - len(busy) < 2 * self.board.batch_size:   # the query's batch and its tail
            self.board.reopen_skips()
        else:
            skipped = in_loop - in_store     # reopened meanwhile: the loop forgets their skips too
        return [Answer(int(i), None, retract=True) for i in sorted(skipped)]

    def _enough_classes(self, upto: int) -> bool:
        """A first model needs two classes among its labels: those of the events up to ``upto``, which
        it will be trained on (a label that came after them is not counted)."""
        reserved = self.board.reserved   # audit labels are never trained on
        return len({r["label"] for i, r in self.store.current_labels(upto=upto).items() if i not in reserved}) >= 2


def draw_record(positions: Sequence[int], acquisition, learner, loop, taken: Sequence[int]) -> Optional[dict]:
    """What the accuracy estimate needs of a queried batch, as the store keeps it (JSON): ``chooser`` (the
    model version that chose it), ``picks`` (in the order drawn), ``log_q`` (the log of each draw's
    probability among the candidates left, a stochastic strategy's ``info["draw_log_q"]``; None for a top-k
    batch, or a draw that depends on the labels, a noise filter's), ``n_candidates`` (the items it was drawn
    from: the candidates, or the learner's ``pool_subsample`` of them) and ``n_unlabelled`` (the candidates:
    the unlabelled items that no earlier batch holds, not skipped, not taken). The candidates are counted as
    the loop counted them for the query (:meth:`skdbal.loop.ActiveLearningLoop.step`). None for a request
    that is no query (the first batch).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> import numpy as np
    >>> from skdbal.labelling._oracle import draw_record
    >>> learner = SimpleNamespace(labelled_mask_=np.array([1, 0, 0, 0, 0, 0], bool), pool_subsample=None, step_=2)
    >>> loop = SimpleNamespace(pending=np.array([1]), skipped=np.array([], int))
    >>> acq = SimpleNamespace(indices=np.array([4, 2]), info={"draw_log_q": [-1.0, -0.5]})
    >>> draw_record([4, 2], acq, learner, loop, taken=[5])
    {'chooser': 2, 'picks': [4, 2], 'log_q': [-1.0, -0.5], 'n_candidates': 3, 'n_unlabelled': 3}
    """
    if acquisition is None or [int(i) for i in acquisition.indices] != [int(p) for p in positions] \
            or not len(positions) or getattr(learner, "step_", -1) < 0:
        return None
    info = dict(getattr(acquisition, "info", None) or {})
    log_q = info.get("draw_log_q")
    if log_q is None or "rejected_indices" in info or "n_rejected" in info or len(log_q) != len(positions):
        log_q = None
    free = ~np.asarray(learner.labelled_mask_, dtype=bool)
    for out in ((loop.pending, loop.skipped) if loop is not None else ()) + (taken,):
        free[np.asarray(out, dtype=np.intp)] = False
    n_unlabelled = int(free.sum())
    subsample = getattr(learner, "pool_subsample", None)
    n_candidates = n_unlabelled if subsample is None else min(n_unlabelled, int(subsample))
    return {"chooser": int(learner.step_), "picks": [int(p) for p in positions],
            "log_q": None if log_q is None else [float(x) for x in log_q], "n_candidates": n_candidates,
            "n_unlabelled": n_unlabelled}


def _last_kinds(events: Sequence[dict]) -> dict:
    """Each item's last event kind (``"label"``, ``"skip"`` or ``"undo"``) among ``events``."""
    return {e["item"]: e["kind"] for e in events}


def new_labels(events: Sequence[dict]) -> int:
    """The new labels among ``events`` (the store's events since the last retrain), towards the next one:
    the items labelled there whose last label or undo is a label. An item labelled, undone and labelled again
    counts once; one labelled and undone counts none; a skip or an undo alone counts none (a skip leaves a
    label as it was).

    Examples
    --------
    >>> from skdbal.labelling._oracle import new_labels
    >>> ev = lambda item, kind: {"item": item, "kind": kind}
    >>> new_labels([ev(1, "label"), ev(2, "label"), ev(2, "undo"), ev(2, "label")])
    2
    >>> new_labels([ev(1, "label"), ev(1, "undo"), ev(3, "skip"), ev(4, "undo")])
    0
    >>> new_labels([ev(5, "undo"), ev(5, "label")])    # a label of an earlier window taken back, then changed
    1
    >>> new_labels([ev(6, "label"), ev(6, "skip")])
    1
    """
    return sum(kind == "label" for kind in _last_kinds([e for e in events if e["kind"] != "skip"]).values())


def answered_items(events: Sequence[dict]) -> set:
    """The items that ``events`` answer: their last word is a label or a skip (an undo leaves one open).

    Examples
    --------
    >>> from skdbal.labelling._oracle import answered_items
    >>> sorted(answered_items([{"item": 1, "kind": "label"}, {"item": 2, "kind": "label"},
    ...                        {"item": 2, "kind": "undo"}, {"item": 3, "kind": "skip"}]))
    [1, 3]
    """
    return {item for item, kind in _last_kinds(events).items() if kind != "undo"}


#: What a model version's metrics hold beside its test accuracy: the stopping rules' verdicts, the stop set
#: (version 0), the draws of the batches its predecessor chose and its judgement of the audit labels
#: (:mod:`skdbal.labelling.audit_share`); the loop's journal rows do not show them.
_OWN_METRICS = ("stopping", "stop_set", "draws", "audit")


def rule_verdicts(rule, stop_set=None) -> List[dict]:
    """Each rule's verdict at its last update, as the store keeps it (JSON): ``rule`` (its journal name),
    ``kind`` (its class), ``params`` (its plain parameters), ``stop``, ``value`` (None for NaN) and
    ``reason``, and ``stop_set_size``, for each rule of ``rule``, an :class:`~skdbal.stopping.AnyOf` (the
    session wraps a single rule in one).

    Examples
    --------
    >>> from skdbal.labelling._oracle import rule_verdicts
    >>> from skdbal.stopping import AnyOf, LabelBudget
    >>> rule = AnyOf([LabelBudget(max_labels=50)])
    >>> _ = rule.update({"step": 1, "n_labels": 20})
    >>> rule_verdicts(rule, stop_set=[3, 4])
    [{'rule': 'label_budget', 'kind': 'LabelBudget', 'params': {'max_labels': 50}, 'stop': False, 'value': 20.0, \
'reason': '20 labels bought, 30 left in the budget of 50', 'stop_set_size': 2}]
    """
    from ..stopping import AnyOf

    if not isinstance(rule, AnyOf):
        return []
    named, verdicts = rule.named_rules(), getattr(rule, "verdicts_", {})
    out = []
    for name, r in named.items():
        v = verdicts.get(name)
        if v is None:
            continue
        params = {k: p for k, p in r.get_params(deep=False).items() if isinstance(p, (bool, int, float, str))}
        value = float(v.value)
        out.append({"rule": name, "kind": type(r).__name__, "params": params, "stop": bool(v.stop),
                    "value": value if value == value else None, "reason": str(v.reason),
                    "stop_set_size": None if stop_set is None else len(stop_set)})
    return out


class StoreJournal:
    """The loop's journal in the store: one row per model version.

    Parameters
    ----------
    store : LabelStore
    oracle : StoreOracle
        Its cursor is the last event a new model version saw.
    on_version : callable, optional
        Called as ``on_version(version)`` when the loop has trained a new model version, before the
        store records it (the session publishes the model then, so that a reader who finds the version
        in the store finds it published); a dict it returns is added to the version's metrics.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    >>> session = LabellingSession(learner, np.eye(4), classes=["a", "b"],
    ...                            store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> session.journal.rows()          # no model version yet
    []
    """

    def __init__(self, store, oracle: StoreOracle, on_version: Optional[Callable[[int], Optional[dict]]] = None):
        self.store, self.oracle, self.on_version = store, oracle, on_version
        #: When the last model version was recorded (``time.time()``), or None.
        self.last_retrain: Optional[float] = None

    def rows(self) -> List[dict]:
        store = self.store
        rows, before = [], set()
        for m in store.models():
            now = {i: r for i, r in store.current_labels(upto=m["last_event"]).items()
                   if i not in self.oracle.board.reserved}   # audit labels: never trained on, never asked again
            new = [i for i in now if i not in before]
            metrics = {k: v for k, v in m["metrics"].items() if k not in _OWN_METRICS}
            rows.append({"step": m["version"], "n_labels": m["n_labels"], "query_indices": new,
                         "labelled_indices": new, **metrics})
            if "stop_set" in m["metrics"]:    # a resume's stopping rules watch the same rows
                rows[-1]["stop_set"] = m["metrics"]["stop_set"]
            before = set(now)
        return rows

    def append(self, row: dict, learner) -> None:
        metrics = {k: row[k] for k in ("accuracy",) if k in row}
        if row["fit_time"] or row["step"] == 0:  # a new model version
            loop = self.oracle.loop
            rule = getattr(loop, "stopping_", None)
            if rule is not None and any(k.startswith("stop_") and k != "stop_set" for k in row):
                metrics["stopping"] = rule_verdicts(rule, getattr(loop, "stop_set_", None))
            if "stop_set" in row:
                metrics["stop_set"] = [int(i) for i in row["stop_set"]]
            if self.oracle.draws:
                metrics["draws"], self.oracle.draws = self.oracle.draws, []
            if self.on_version is not None:   # before the store says it exists
                metrics.update(self.on_version(learner.step_) or {})
            self.store.add_model(learner.step_, self.oracle.cursor, len(learner.y_training_), metrics)
            self.last_retrain = _time.time()
