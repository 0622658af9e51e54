"""A labelling session: the one loop with people as the oracle, kept in a durable store.

:class:`LabellingSession` runs :class:`skdbal.loop.ActiveLearningLoop` in a
background thread. Its oracle, :class:`~skdbal.labelling.StoreOracle`, is the store: a queried
batch is offered to annotators on the session's offer board
(:class:`~skdbal.labelling._offers.OfferBoard`: leased, with a timeout),
their labels, skips and undos are committed to the store as they arrive, in
any order, and the loop retrains once ``retrain_after`` new labels have
come. People never wait for the model: they label the current batch while it
trains. The journal is the store too (:class:`~skdbal.labelling.StoreJournal`): each model
version with the last event it saw. With ``seeding="step"`` a restarted
session trains the same model again from those labels, and queries the same
pending batch.

The session owns its collaborators and wires them: the board (what people
are offered), the oracle and journal (:mod:`skdbal.labelling._oracle`, which
take the board and the store), and the second looks
(:mod:`skdbal.labelling._second_looks`).
"""
from __future__ import annotations

import concurrent.futures
import copy
import threading
import time as _time
import uuid
import warnings
from typing import Dict, List, Optional, Sequence

import numpy as np

from .._validation import check_query_kwargs, read_rows
from ..loop import ActiveLearningLoop
from ._offers import OfferBoard, covering_first_batch, strategy_name
from ._oracle import SessionStopped, StoreJournal, StoreOracle
from ._second_looks import SecondLooks
from .accuracy_panel import AccuracyPanel
from .audit_share import AuditShare, check_audit_share, draw_reservoir
from .progress_report import progress, version_figures
from .stop_advice import DEFAULT, session_stopping
from .store import LabelStore

__all__ = ["LabellingSession", "EMBEDDINGS"]

#: What the first model waits for while the features given as ``features`` are computed (the page says it).
EMBEDDINGS = "the pool's embeddings"


class LabellingSession:
    """Label a pool with people, the model choosing what comes next.

    Parameters
    ----------
    learner : ActiveLearner
        With ``seeding="step"`` (so that a restart trains the same model
        again) and an estimator whose ``classes`` are ``classes``.
    X : array-like of shape (N, ...)
        The pool; a dask array is queried on its cluster (through
        :mod:`skdbal.dask`, found by the array's type), and only the rows
        labelled or guessed are read (and, to choose the first batch, at most
        10,000 rows, once).
    classes : sequence
        The labels people may give: two or more, distinct as text (else a
        ``ValueError``, before the store is written).
    store : str, path-like or LabelStore
        The SQLite store; a new session is created in an empty file, an
        existing one resumed.
    keys : sequence of str, optional
        A name per pool row (file names); the positions by default.
    batch_size : int, default=10
        Items queried per batch; fewer than the pool's items (else a ``ValueError``).
    retrain_after : int, optional
        New labels after which the model retrains; by default a batch
        (``batch_size``, and for the first model the first batch's size).
        A new label is an item labelled since the last retrain: one labelled,
        undone and labelled again counts once, one labelled and undone not at
        all (:func:`skdbal.labelling._oracle.new_labels`).
    initial : array-like of int, optional
        The first batch, labelled before any model exists; by default
        ``batch_size`` rows that cover the pool: those nearest the centroids
        of k-means (:func:`skdbal.initial.kmeans_representative`, seeded by
        the learner's ``random_state``; over a seeded sample of 10,000 rows
        of a larger pool). The first model is trained once it is answered
        (with the default ``retrain_after``) and its labels hold two
        classes; until then, more items of a covering order are offered
        when it runs out (:meth:`next_batch`).
    lease_timeout : float, default=300
        Seconds an item handed out by :meth:`next_batch` stays its annotator's without labelling activity
        from them: each label, skip or undo of theirs renews all their leases for this long; asking for
        items again (a page's long poll) does not. Then the item goes back to the batch, for anyone; its
        annotator's late label is still kept if nobody else was handed the item meanwhile.
    X_test, y_test : array-like, optional
        A labelled test set: its accuracy is recorded per model version.
    query_kwargs : dict, optional
        Passed to each query, and so to the strategy (``{"n_samples": 50}``).
        To score a random subsample of a large pool at each query, give the
        learner ``pool_subsample``.
    second_looks : float, "dynamic", "quantile", callable or None, default="dynamic"
        When a label arrives, the current model (which has not seen it)
        judges it: a label whose probability ``p̄(y = given | x)`` is below
        the trust threshold of this rule (the noise filter's rules,
        :func:`skdbal.noisy_labels.trust_threshold`, over every label judged so
        far) is flagged, and offered to another annotator for a second look
        (:meth:`next_batch` offers it first to anyone but its annotator).
        The two rules that estimate the annotators' noise rate flag only
        when the judging models are trusted: on the last 50 judged labels
        (at least 40), their guesses' agreement with the labels against
        their probabilities, and a plausible noise rate (the rule and its
        derivation: :mod:`skdbal.labelling._second_looks`); a flag that a
        later model guesses with 0.8 is withdrawn before it is offered. A
        number is the threshold itself. None flags nothing (the labels are
        still judged, for the model's ``guess_accuracy``).
    second_look_budget : float in (0, 1] or None, default=0.1
        At most this share of the judged labels is flagged, the least likely
        first: a second look costs a label, and an early model, which
        disagrees with many right labels, would otherwise flag them all.
        None sets no limit.
    features : concurrent.futures.Future, optional
        The model's features of the pool, which arrive later: the embeddings
        of an encoder that learns or embeds in another thread while people
        label. Until they arrive, ``X`` is what the first batch (``initial``)
        and the covering order after it are chosen in, a cheap representation
        ready at once; people label as usual, and once they have labelled the
        first batch the session keeps offering items of the covering order
        (``status()["waiting_for"]`` is :data:`EMBEDDINGS`). The loop waits for
        the future in its own thread before its first fit (or, on a resume,
        its refit); then the model trains, queries, guesses and judges on the
        features, one row per item, and every label given meanwhile counts. A
        future that fails ends the loop (``status()["error"]``).
    stopping : StoppingRule, AnyOf, "default" or None, default="default"
        The stopping rules (:mod:`skdbal.stopping`) run after each model version, on a stop set of
        ``stop_set_size`` unlabelled items drawn once when the first model is trained; their verdicts are
        kept with the version and shown as advice (the session never stops by itself:
        :mod:`skdbal.labelling.stop_advice`). ``"default"``:
        :class:`~skdbal.stopping.StabilizingPredictions` and
        :class:`~skdbal.stopping.OverallUncertainty`. None runs none.
    label_budget : int, optional
        Adds :class:`~skdbal.stopping.LabelBudget` of this many labels to the rules.
    stop_set_size : int, default=500
        Unlabelled items the rules watch (fewer in a smaller pool): the model predicts them after
        each retrain (on a busy machine, 0.76 s for 1,000 28×28 images on one thread, with the MC
        dropout network ``skdbal label`` builds for a pool of one's own).
    item_noun : str, default="items"
        What the page calls the pool's items in the estimate and the rules' words (``"images"``).
    audit_share : float, default=0
        A share in (0, 1) of the labels people give that only check the model: a new store sets a
        reservoir aside, a fifth of the pool drawn once (seeded) and kept in the store; the model never
        queries it nor trains on it, and each batch carries, spread through it, the next reservoir items
        (in a fixed random order) needed for audit labels to be this share of the labels given. After each
        retrain the model judges them all, and the page's estimate is theirs, with Wilson's interval
        (:mod:`skdbal.labelling.audit_share`). A store started without an audit share is refused
        (``ValueError``); one started with it keeps its reservoir out of training at any share.

    Notes
    -----
    Every label that arrives after the first model is judged by the model of
    its time, which had not seen it: its guess and ``p̄(y = given | x)`` are
    kept in the store. The share of guesses that the labels confirmed is the
    model's own accuracy on what came next (a prequential estimate,
    ``guess_accuracy`` in :meth:`versions`), which needs no test set; the
    estimate the page shows (``status()["accuracy"]``,
    :mod:`skdbal.labelling.accuracy_panel`) is made from the same
    judgements, unbiased when the strategy draws its batches with known
    probabilities. A
    flagged label stays the item's label, and the model trains on it, until
    a second look changes it: the later label counts.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.acquisition import max_entropy
    >>> from skdbal.labelling import LabellingSession
    >>> X, y = load_digits(return_X_y=True)
    >>> learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
    ...                         seeding="step")
    >>> store = os.path.join(tempfile.mkdtemp(), "digits.db")
    >>> with LabellingSession(learner, X[:300], classes=range(10), store=store, batch_size=10) as session:
    ...     for item in session.next_batch(annotator="ann", timeout=10):     # a person answers
    ...         _ = session.submit(item["item"], int(y[item["item"]]), annotator="ann")
    ...     session.wait_for_version(0, timeout=30)
    ...     status = session.status()
    >>> status["labelled"], status["model_version"]
    (10, 0)
    """

    def __init__(self, learner, X, classes, store, *, keys=None, batch_size: int = 10,
                 retrain_after: Optional[int] = None, initial=None, lease_timeout: float = 300.0,
                 X_test=None, y_test=None, query_kwargs=None, second_looks="dynamic",
                 second_look_budget: Optional[float] = 0.1, features: Optional[concurrent.futures.Future] = None,
                 stopping=DEFAULT, label_budget: Optional[int] = None, stop_set_size: int = 500,
                 item_noun: str = "items", audit_share: float = 0.0):
        self.learner = learner
        # refused here, before the store is written
        self.stopping = session_stopping(stopping, label_budget)
        if isinstance(stop_set_size, bool) or not isinstance(stop_set_size, (int, np.integer)) or stop_set_size < 1:
            raise ValueError(f"stop_set_size must be an int >= 1; got {stop_set_size!r}")
        self.stop_set_size = int(stop_set_size)
        self.audit_share = check_audit_share(audit_share)
        self.item_noun = str(item_noun)
        self.features = features
        self.X = X
        self.classes = list(classes)
        self.keys = [str(k) for k in (range(len(X)) if keys is None else keys)]
        # refused here, before the store is written: a session that could never train, or never query
        self._by_text = {str(c): c for c in self.classes}
        if len(self._by_text) != len(self.classes):
            raise ValueError("classes must be distinct as text")
        if len(self._by_text) < 2:
            raise ValueError(f"classes must name at least two distinct classes (a model learns from two or "
                             f"more); got {[str(c) for c in self.classes]}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1; got {batch_size!r}")
        if batch_size >= len(self.keys):
            raise ValueError(f"batch_size={batch_size} is at least the pool's {len(self.keys)} items: the first "
                             f"batch would leave nothing for the model to choose; give a batch size below "
                             f"{len(self.keys)}")
        self.batch_size = int(batch_size)
        self.retrain_after = batch_size if retrain_after is None else retrain_after
        self.initial = initial
        if isinstance(lease_timeout, bool) or not isinstance(lease_timeout, (int, float, np.integer, np.floating)) \
                or not 0 < lease_timeout < float("inf"):
            raise ValueError(f"lease_timeout must be a positive number of seconds; got {lease_timeout!r}")
        self.lease_timeout = float(lease_timeout)
        self.X_test, self.y_test = X_test, y_test
        self.query_kwargs = check_query_kwargs(query_kwargs)   # refused here, before the store is written
        self.second_looks = second_looks
        self.second_look_budget = second_look_budget
        if second_look_budget is not None and not (isinstance(second_look_budget, (int, float)) and
                                                   not isinstance(second_look_budget, bool) and
                                                   0 < second_look_budget <= 1):
            raise ValueError(f"second_look_budget must be a share in (0, 1] or None; got {second_look_budget!r}")
        if second_looks is not None:  # a bad rule is refused here, not in the loop's thread
            from ..noisy_labels import trust_threshold

            trust_threshold([0.5, 0.5], 2, second_looks)
        #: Called as ``callback(positions, scores)`` in the loop's thread after each query (the first
        #: batch included, with no scores), e.g. to push predictions to Label Studio.
        self.on_query: List = []
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[BaseException] = None
        config: dict = {"classes": [str(c) for c in self.classes], "batch_size": batch_size,
                  "retrain_after": self.retrain_after, "n_items": len(self.keys),
                  "learner": repr(learner), "second_looks": repr(second_looks),
                  "second_look_budget": second_look_budget,
                  **({"query_kwargs": {k: repr(v) for k, v in sorted(self.query_kwargs.items())}}
                     if self.query_kwargs else {})}
        if self.audit_share:   # kept by a new store only: a store keeps its first configuration, and reservoir
            rs = getattr(learner, "random_state", None)
            seed = int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else 0
            config.update(audit_share=self.audit_share, audit_reservoir=draw_reservoir(len(self.keys), seed))
        # what the labels mean is compared; how the session runs may change
        informative = ("batch_size", "retrain_after", "learner", "second_looks", "second_look_budget",
                       "query_kwargs", "audit_share", "audit_reservoir")
        # a store of another configuration or pool is refused before anything is written to it
        owned = not isinstance(store, LabelStore)
        self.store = LabelStore(store, config=config, informative=informative, keys=self.keys) \
            if owned else store
        try:
            self.store.set_config(config, informative=informative)
            order = (self.store.config() or {}).get("audit_reservoir")
            if self.audit_share and order is None:
                raise ValueError(f"audit_share: {self.store.path} was started without an audit share, and its "
                                 "items were chosen from the whole pool; audit with a new store")
            self.store.add_items(self.keys)
        except BaseException:
            if owned:
                self.store.close()
            raise
        #: What people are offered: the batch, the tail, the leases, the guesses.
        self.board = OfferBoard(self.store, X, self.keys, learner, batch_size=self.batch_size,
                                lease_timeout=lease_timeout, query_kwargs=self.query_kwargs,
                                second_looks=second_looks is not None)
        #: The loop's oracle (a :class:`~skdbal.labelling.StoreOracle`): people's answers, read from the store.
        self.oracle = StoreOracle(self.board, self.store, learner, retrain_after=self.retrain_after,
                                  first_retrain_after=retrain_after, label_of=self._label_of,
                                  judge=self._judge, on_query=self.on_query)
        #: The loop's journal (a :class:`~skdbal.labelling.StoreJournal`): a row per model version, in the store.
        self.journal = StoreJournal(self.store, self.oracle, on_version=self._on_version)
        self._looks = SecondLooks(self.store, X, learner, rule=second_looks, budget=second_look_budget)
        #: The audit share and its reservoir (:mod:`skdbal.labelling.audit_share`; an empty one without).
        self.audit = AuditShare(self.audit_share, order or [])
        self.board.reserved = self.audit.reserved
        if self.audit.share:
            self.board.audits = self._with_audits
        #: The accuracy estimates, one per model version, from the store (:mod:`skdbal.labelling.accuracy_panel`).
        self.panel = AccuracyPanel(self.store, reserved=self.audit.reserved)
        self._progress: Optional[tuple] = None

    @property
    def training(self) -> bool:
        """Whether the loop is fitting or querying now (from the first batch's last label needed to the
        next batch offered)."""
        return self.board.training

    @property
    def waiting_for(self) -> Optional[str]:
        """What the session waits for before it can train (from people, or :data:`EMBEDDINGS`): None, or a
        sentence."""
        return self.board.waiting_for

    @property
    def last_retrain(self) -> Optional[float]:
        """When the last model version was recorded (``time.time()``), or None."""
        return self.journal.last_retrain

    def _label_of(self, text: str):
        return self._by_text[text]

    # ------------------------------------------------------------ the loop
    def start(self) -> "LabellingSession":
        """Start (or resume) the loop in a background thread."""
        self.learner.set_pool(self.X, ids=np.arange(len(self.X)))
        evaluate = None
        if self.X_test is not None:
            from ..loop import evaluate as _evaluate

            evaluate = lambda m: _evaluate(m, self.X_test, self.y_test)  # noqa: E731
        self.loop = ActiveLearningLoop(self.learner, self.oracle, n_instances=self.batch_size, evaluate=evaluate,
                                       journal=self.journal, query_kwargs=self.query_kwargs, verbose=False,
                                       stopping=self.stopping, stop_on="record", stop_set_size=self.stop_set_size)
        self.oracle.loop = self.loop
        self._thread = threading.Thread(target=self._run, name="skdbal-labelling-loop", daemon=True)
        self._thread.start()
        return self

    def _run(self):
        try:
            models = self.store.models()
            if models:
                # the embeddings first (an encoder learnt again: the page says so, and offers the covering
                # order), then the last model is trained again from its labels
                self._await_features()
                self.board.start_training()
                self.oracle.replay_upto = models[-1]["last_event"]
                self.loop.resume()
                self._publish()
            else:
                initial = self.initial
                if initial is None:  # a batch that covers the pool, seeded
                    initial = covering_first_batch(self.X, self.batch_size, self.board.seed())
                initial = [int(i) for i in initial if int(i) not in self.audit.reserved]  # never trained on
                self.board.offer_first(initial)   # people may label it from now on
                self._await_features()
                self._warm_up()
                self.loop.start(initial)
            while not self.oracle.stopping:
                self.loop.step()
        except SessionStopped:
            pass
        except BaseException as exc:  # reported by status() and wait_for_version()
            self.error = exc
            self.board.finish_training()

    def _publish(self) -> None:
        """Publish the learner's model and its version as one pair, from the loop's thread, for the
        requests that people's threads serve (:meth:`guesses`, :meth:`save_model`).

        They never read the learner while the loop changes it: the learner sets its model and then its
        version, so two reads from another thread could pair a version with the model before or after
        it, and a model retrained in place (``retrain="warm"``) would be predicted with, or saved, in
        the middle of its training, its dropout switched off under it by the prediction. A warm model
        is therefore published as a copy; a model trained from scratch is never changed again."""
        model = getattr(self.learner, "estimator_", None)
        version = getattr(self.learner, "step_", -1)
        if model is None or version < 0:
            return
        if getattr(self.learner, "retrain", "scratch") == "warm":
            try:
                model = copy.deepcopy(model)  # on its device: a GPU model's copy takes GPU memory
            except Exception as exc:  # noqa: BLE001 - the session goes on, as before copies were made
                warnings.warn(f"the model retrained in place cannot be copied ({type(exc).__name__}: {exc}); "
                              "people's guesses and downloads read it while it retrains", RuntimeWarning, stacklevel=2)
        self._looks.recheck((int(version), model))  # before people see the model: a flag it agrees with is
        self.board.publish(version, model)         # withdrawn, never offered

    def _on_version(self, version: int) -> Optional[dict]:
        """The journal's callback: a new model version is trained; it is published before the store
        records it (:meth:`wait_for_version` then finds it published), and judges every audit label given
        so far (kept with the version: :mod:`skdbal.labelling.audit_share`)."""
        self._publish()
        published = self.board.published
        if not self.audit.reserved or published is None:
            return None
        judged = self.audit.judge(published[1], self.board.X,
                                  {i: r["label"] for i, r in self.store.current_labels().items()})
        return None if judged is None else {"audit": judged}

    def _with_audits(self, batch: List[int]) -> List[int]:
        """The board's hook: ``batch`` with the audit items due interleaved (not told apart on the page, so
        that they are labelled as carefully as the rest)."""
        labels = self.store.current_labels()
        due = self.audit.due(labels, self.store.skipped(labels), batch)
        return self.audit.interleave(batch, due)

    def _judge(self, events: List[dict]) -> None:
        """The oracle's callback, as labels arrive: the current model's judgement of the new labels among
        ``events``, and their flags (:mod:`skdbal.labelling._second_looks`); the labels it flagged are
        offered as second looks, guessed here, not by a request."""
        self._looks.judge(events)
        self.board.guess_ahead(self.board.pending_looks())

    def _await_features(self) -> None:
        """In the loop's thread, before the first fit: wait for ``features`` (people label meanwhile, their
        labels kept in the store as always), then read the pool as those rows from now on."""
        future = self.features
        if future is None:
            return
        waits = not future.done() and not self.board.training
        if waits:
            self.board.wait_for(EMBEDDINGS)   # more items of the covering order, when the batch runs out
        while True:
            if self.oracle.stopping:
                raise SessionStopped("the session stopped")
            try:
                X = future.result(timeout=0.2)
                break
            except concurrent.futures.TimeoutError:
                continue
        if len(X) != len(self.keys):
            raise ValueError(f"the features have {len(X)} rows for the pool's {len(self.keys)} items")
        with self.board.changed:
            self.X = self.board.X = self._looks.X = X
        if "pool" in self.learner.estimator.get_params(deep=False):     # a head that reads the whole pool
            self.learner.estimator.set_params(pool=X)
        self.learner.set_pool(X, ids=np.arange(len(X)))
        self.features = None
        if waits:
            self.board.wait_for(None)

    def _warm_up(self) -> None:
        """Fit a throw-away copy of the model on a few rows while people label the first batch, so that
        the first real fit does not pay torch's first-call costs (about 1.4 s of a 1.6 s fit on digits).
        Best effort: a model that cannot fit on these rows is simply not warmed up."""
        from sklearn.base import clone

        n = min(len(self.X), max(len(self.classes), 2))
        y = np.asarray(self.classes, dtype=object)[np.arange(n) % len(self.classes)]
        labels = np.asarray(self.classes)[np.arange(n) % len(self.classes)] if y.dtype == object else y
        try:
            clone(self.learner.estimator).fit(read_rows(self.X, np.arange(n)), labels)
        except Exception:  # noqa: BLE001 - a warm-up only
            pass

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop's thread (labels are all in the store already), and close the store: its
        ``.db`` file alone then holds everything (:meth:`LabelStore.close`; a store given as a
        :class:`LabelStore` is checkpointed the same way). A later read opens it again."""
        self.oracle.stop()
        if self._thread is not None:
            self._thread.join(timeout)
        self.store.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def wait_for_version(self, version: int, timeout: float = 60.0) -> None:
        """Block until model ``version`` is trained (for scripts and tests)."""
        deadline = _time.time() + timeout
        while self.board.published is None or self.board.published[0] < version or not self.store.models() or \
                self.store.models()[-1]["version"] < version:
            if self.error is not None:
                raise RuntimeError("the session's loop failed") from self.error
            if _time.time() > deadline:
                raise TimeoutError(f"model version {version} was not trained within {timeout} s")
            _time.sleep(0.02)

    def versions(self) -> List[dict]:
        """Each model version: ``version``, ``time``, ``n_labels`` it saw, its
        ``metrics`` (test accuracy where a test set was given),
        ``guess_accuracy``, the share of the labels that came while it was the
        current model that it guessed right (None before any came), of
        ``n_judged`` labels, ``estimate``, the accuracy estimate of that
        version once the next is trained (:mod:`skdbal.labelling.accuracy_panel`;
        None before, or when it judged no label) and ``stopping``, what each
        stopping rule said of it (:mod:`skdbal.labelling.stop_advice`).

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import ActiveLearner
        >>> from skdbal.labelling import LabellingSession
        >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
        ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
        ...                            batch_size=2)
        >>> session.versions()      # no model yet
        []
        """
        judged: Dict[int, List[bool]] = {}
        for c in self.store.checks():
            judged.setdefault(c["model_version"], []).append(c["guess"] == c["label"])
        figures = {f["version"]: f for f in version_figures(self)}
        return [{"version": m["version"], "time": m["time"], "n_labels": m["n_labels"],
                 "metrics": {k: v for k, v in m["metrics"].items()
                             if k not in ("stopping", "stop_set", "draws", "audit")},
                 "guess_accuracy": float(np.mean(judged[m["version"]])) if judged.get(m["version"]) else None,
                 "n_judged": len(judged.get(m["version"], [])),
                 "estimate": figures[m["version"]]["estimate"], "stopping": figures[m["version"]]["stopping"]}
                for m in self.store.models()]

    def save_model(self, f) -> int:
        """Save the current model's parameters with skorch's ``save_params``; its version.

        ``f`` is a path or a binary file object. Load them into a net built
        as the learner's was: ``net.initialize(); net.load_params(f_params=f)``.

        Raises
        ------
        LookupError
            Before the first model.
        TypeError
            If the model is not a skorch net (pickle or joblib a scikit-learn
            model yourself).

        Examples
        --------
        >>> import io, os, tempfile
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import ActiveLearner
        >>> from skdbal.labelling import LabellingSession
        >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
        ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
        ...                            batch_size=2)
        >>> session.save_model(io.BytesIO())
        Traceback (most recent call last):
            ...
        LookupError: no model yet: the first is trained once the first batch is labelled
        """
        published = self.board.published
        if published is None:
            raise LookupError("no model yet: the first is trained once the first batch is labelled")
        version, model = published
        if not hasattr(model, "save_params"):
            raise TypeError(f"{type(model).__name__} is not a skorch net: save it with joblib or pickle")
        model.save_params(f_params=f)
        return version

    # --------------------------------------------------------------- verbs
    def check_item(self, item) -> int:
        """``item`` as an int id of the pool, else a ``ValueError`` naming it.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import ActiveLearner
        >>> from skdbal.labelling import LabellingSession
        >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
        ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
        ...                            batch_size=2)
        >>> session.check_item(3)
        3
        >>> session.check_item("../etc/passwd")
        Traceback (most recent call last):
            ...
        ValueError: unknown item '../etc/passwd': items are ids in [0, 4)
        """
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)) or not 0 <= item < len(self.keys):
            raise ValueError(f"unknown item {item!r}: items are ids in [0, {len(self.keys)})")
        return int(item)

    def next_batch(self, annotator: Optional[str] = None, n: Optional[int] = None,
                   timeout: float = 0.0, *, capped: bool = False, holding: Sequence[int] = ()) -> List[dict]:
        """The items for ``annotator`` to label now, leased to them, best first.

        First the flagged labels of other annotators awaiting a second look,
        then the items of the current batch that are unlabelled, not skipped
        and not held by someone else. Waits up to ``timeout`` seconds for a
        batch. ``capped=True`` (annotators known by their tokens): the
        annotator holds at most a share of the batch in all, those held
        before included, ``ceil(batch_size / k)`` for ``k`` annotators active
        now (holding items, or having asked for some within ``lease_timeout``)
        and at least two, so that no one can take every item from the others:
        5 of a batch of 10 for one or two annotators, 4 for three.
        Asking again gives back the items held, without renewing their leases
        (``lease_timeout``). ``holding``: items the caller holds already (the
        page's ``have``), left out; a caller holding an item whose lease ran
        out is idle, and is handed nothing more until the annotator labels,
        skips or undoes. Once the pool has no unlabelled item left but
        skipped ones, the skipped items are reopened (:meth:`reopen_skips`).

        When none of these is left while the model retrains, the tail: the
        next best items under the last model (a second query, outside the
        batch), recorded in the store as a ``"tail"`` query; before the
        first model, while the first batch holds labels of one class only
        (``status()["waiting_for"]``), the next items of a covering order
        (farthest first from those offered). Labels of tail items count as
        any other: the next retrain uses them.

        Returns
        -------
        list of dict
            ``item`` (id), ``key``, ``score`` (the acquisition score, NaN
            for the first batch), ``second_look`` (whether it is one; the
            first label is not shown, so as not to anchor), ``tail``
            (whether it is one of the tail's items).
        """
        return self.board.next_batch(annotator or "anonymous", n, timeout, capped=capped, holding=holding)

    def _event(self, item, kind, label=None, annotator=None, request_id=None, release=False,
               exclusive=False, lease_for=None, skip_limit=None) -> int:
        # the annotator's activity renews their leases (asking for items does not)
        event = self.store.add_event(item, kind, label, annotator=annotator, request_id=request_id, release=release,
                                     exclusive=exclusive, lease_for=lease_for, renew_for=self.lease_timeout,
                                     skip_limit=skip_limit)
        self.board.notify()
        return event

    def submit(self, item: int, label, annotator: Optional[str] = None, request_id: Optional[str] = None, *,
               exclusive: bool = False) -> int:
        """Record a label, committed before returning; the event id.

        ``exclusive=True`` (annotators known by their tokens) refuses an item
        whose last lease is not ``annotator``'s (another holds it or was
        handed it since, or nobody was: items are asked for with
        :meth:`next_batch`, within the cap). A lease that ran out is still
        its annotator's until someone else is handed the item: their late
        label is kept.

        Raises
        ------
        ValueError
            For an unknown item or a label not in ``classes``; nothing is
            recorded then. :class:`~skdbal.labelling.store.LeaseHeld` (a
            ``ValueError``) for an item not leased to ``annotator``, with
            ``exclusive``.
        """
        item = self.check_item(item)
        if str(label) not in self._by_text:
            raise ValueError(f"unknown class {label!r}; the classes are {self.classes}")
        return self._event(item, "label", str(label), annotator, request_id or uuid.uuid4().hex, release=True,
                           exclusive=exclusive)

    def skip(self, item: int, annotator: Optional[str] = None, *, exclusive: bool = False) -> int:
        """Decline to label ``item``: it is not offered again until the skips are reopened
        (:meth:`reopen_skips`, or once nothing else is left to label). ``exclusive``: as for
        :meth:`submit`, and an annotator's share of skips is a batch in a row: after ``batch_size``
        skips with no label of theirs standing since, a skip is refused
        (:class:`~skdbal.labelling.store.SkipLimit`, a ``ValueError``) until they label one."""
        item = self.check_item(item)
        return self._event(item, "skip", None, annotator, release=True, exclusive=exclusive,
                           skip_limit=self.batch_size if exclusive else None)

    def reopen_skips(self) -> List[int]:
        """Offer every skipped item again, as if it had never been skipped; the items reopened. (The
        session does this itself once fewer than two batches of other unlabelled items are left.)

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import ActiveLearner
        >>> from skdbal.labelling import LabellingSession
        >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
        ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
        ...                            batch_size=2)
        >>> _ = session.skip(3, annotator="ann")
        >>> session.status()["skipped"], session.reopen_skips(), session.status()["skipped"]
        (1, [3], 0)
        """
        return self.board.reopen_skips()

    def undo(self, item: int, annotator: Optional[str] = None, request_id: Optional[str] = None, *,
             exclusive: bool = False) -> int:
        """Undo the item's latest label: its label before, or none. The same ``request_id`` again is a
        replay: it answers the first undo's event and takes back nothing more. ``exclusive=True``
        (annotators known by their tokens) refuses it, with
        :class:`~skdbal.labelling.store.NotYours`, unless the item's latest label is ``annotator``'s, and
        leases the item back to them (``lease_timeout``), to label again."""
        return self._event(self.check_item(item), "undo", None, annotator, request_id, exclusive=exclusive,
                           lease_for=self.lease_timeout if exclusive else None)

    def guesses(self, items: Sequence[int]) -> list:
        """The current model's label for each item (as text), or None before the first model.

        The items people are offered (the batch, what earlier batches left, the second looks) were
        guessed by the loop when it published the model or queried the batch, so this never waits for
        a retrain; another item is guessed here, which may wait for it."""
        return self.board.guesses(items)

    def labels(self) -> List[dict]:
        """The current labels: ``item``, ``key``, ``label``, ``annotator``,
        ``time``, ``audit`` (whether it is an audit label, of the reservoir, never trained on:
        ``audit_share``; None for a session without a reservoir), and for an item whose label was
        flagged, ``p_given`` (the model's probability of the flagged label), ``first_label``,
        ``first_annotator`` and ``second_look`` (``"pending"``,
        ``"confirmed"``, ``"changed"`` or ``"withdrawn"``); None otherwise."""
        looks = {c["item"]: c for c in self.store.second_looks()}  # an item's latest flag counts
        out = []
        for i, r in self.store.current_labels().items():
            c = looks.get(i)
            out.append({"item": i, "key": self.keys[i], "label": self._label_of(r["label"]),
                        "annotator": r["annotator"], "time": r["time"],
                        "audit": (i in self.audit.reserved) if self.audit.reserved else None,
                        "p_given": None if c is None else c["p_given"],
                        "first_label": None if c is None else self._label_of(c["label"]),
                        "first_annotator": None if c is None else c["annotator"],
                        "second_look": None if c is None else c["outcome"]})
        return out

    def status(self) -> dict:
        """``labelled``, ``model_version`` (-1 before the first), ``last_retrain``, ``pending``
        (items of the current batch still to label), ``skipped``, ``second_looks`` (how many
        labels were flagged, and how many second looks are pending, confirmed, changed or
        withdrawn), ``error``; ``training`` (whether the loop is fitting or querying now),
        ``waiting_for`` (None, or what the session waits for from people, e.g. "labels of at least two
        classes") and ``strategy`` (the query strategy's name, e.g. "bald"); and how good the model is and
        what the stopping rules say (:func:`skdbal.labelling.progress_report.progress`: ``accuracy``,
        ``accuracy_words``, ``test_accuracy``, ``test_size``, ``test_version``, ``forecast``, ``stopping``,
        ``advice``)."""
        labelled = self.store.current_labels()
        skipped = set(self.store.skipped(labelled))
        models = self.store.models()
        key = models[-1]["version"] if models else -1
        if self._progress is None or self._progress[0] != key:   # it changes with a new model version only
            self._progress = (key, progress(self))
        return {**self._progress[1],"labelled": len(labelled), "model_version": models[-1]["version"] if models else -1,
                "last_retrain": models[-1]["time"] if models else None,
                "pending": self.board.pending(labelled, skipped),
                "skipped": len(skipped), "second_looks": self._second_look_counts(),
                "error": None if self.error is None else repr(self.error),
                "training": bool(self.training), "waiting_for": self.waiting_for,
                "strategy": strategy_name(self.learner)}

    def _second_look_counts(self) -> dict:
        looks = self.store.second_looks()
        counts = {"flagged": len(looks), "pending": 0, "confirmed": 0, "changed": 0, "withdrawn": 0}
        for c in looks:
            counts[c["outcome"]] += 1
        return counts
