"""The one active learning loop: query → ask the oracle → label → retrain → evaluate → journal.

:class:`ActiveLearningLoop` drives a learner that owns its pool
(:meth:`skdbal.ActiveLearner.set_pool`) against an oracle
(:mod:`skdbal.oracles`): known labels, a noisy annotator, or people, whose
answers come back late, in any order, skipped or changed. Every step is
written to a journal; the loop resumes from it. Three callers run this loop
and only it:

- :meth:`skdbal.ActiveLearner.simulate`, with an in-memory journal (its
  ``history_``);
- the experiment runner (:mod:`skdbal.experiments.runner`), whose run files
  (CSV rows, JSON configuration, cached weights) are the journal on disk;
- a labelling session with people.

::

    start(initial)   oracle.request(initial) → collect → label → fit step 0 → journal
    step(s)          query the unlabelled, not pending rows → oracle.request(picks)
                     → collect what came back → label (new, changed; skipped ones
                     are never asked again) → fit step s if anything changed
                     → evaluate → journal
    resume()         the journal's rows → labels asked again from the oracle
                     → the model of the last step → continue

With stopping rules (:mod:`skdbal.stopping`), every fit is also shown to
the rules, each step's row carries their verdicts, and :meth:`run` ends at
the first step whose verdict says stop.
"""
from __future__ import annotations

import time
from numbers import Integral
from typing import Callable, Dict, List, Optional

import joblib
import numpy as np
from sklearn.base import clone, is_regressor

from ._loop_accuracy import AUDIT_KEYS, LoopAccuracy, check_monitor
from ._validation import check_positive_int, check_query_kwargs, read_rows
from .accuracy_monitor import journal_fields
from .stopping import AnyOf, StoppingRule, Verdict

__all__ = ["ActiveLearningLoop", "MemoryJournal", "check_monitor", "check_stopping", "evaluate", "step_seed"]

#: Keys of a history row that a strategy's ``Acquisition.info`` may not use.
_HISTORY_KEYS = frozenset({"step", "n_labels", "accuracy", "rmse", "query_indices", "query_time", "fit_time",
                           "labelled_indices", "skipped_indices", "n_pending"})
#: Prefix of the stopping rules' history columns, which a strategy's ``Acquisition.info`` may not use either.
_STOP_PREFIX = "stop_"
#: Salt of the stop set's generator, so that it is not the stream of the queries seeded by the same int.
_STOP_SALT = 2009


def step_seed(seed: int, step: int) -> int:
    """The seed of the model trained at ``step`` of a run seeded by ``seed``.

    A function of ``(seed, step)`` alone, so that a step's model can be
    trained again, identically, from its labels (how a journal resumes).

    Examples
    --------
    >>> from skdbal.loop import step_seed
    >>> step_seed(1, 0) == step_seed(1, 0) != step_seed(1, 1)
    True
    """
    return int(np.random.RandomState([int(seed), int(step), 2017]).randint(2**31 - 1))


def evaluate(model, X_test, y_test) -> dict:
    """Test metrics of a fitted model: ``accuracy``, or ``rmse`` for a regressor.

    For a regressor with 2-d one-hot targets the argmax ``accuracy`` is
    reported too.

    Parameters
    ----------
    model : estimator
        A fitted classifier or regressor (or a learner wrapping one).
    X_test, y_test : array-like or None
        The test set; ``None`` gives an empty dict.

    Returns
    -------
    dict

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.dummy import DummyClassifier
    >>> from skdbal.loop import evaluate
    >>> clf = DummyClassifier(strategy="most_frequent").fit([[0]] * 4, [1, 1, 1, 0])
    >>> evaluate(clf, [[0]] * 4, [1, 0, 1, 1])
    {'accuracy': 0.75}
    """
    if X_test is None:
        return {}
    pred = model.predict(X_test)
    if is_regressor(getattr(model, "estimator_", model)):
        y_test = np.asarray(y_test, dtype=float)
        pred = np.asarray(pred, dtype=float).reshape(y_test.shape)
        row = {"rmse": float(np.sqrt(np.mean((pred - y_test) ** 2)))}
        if y_test.ndim == 2 and y_test.shape[1] > 1:  # one-hot targets: also the argmax accuracy
            row["accuracy"] = float(np.mean(pred.argmax(axis=1) == y_test.argmax(axis=1)))
        return row
    return {"accuracy": float(np.mean(pred == np.asarray(y_test)))}


class MemoryJournal:
    """A journal kept in memory: the list of step rows.

    A journal records each finished step (:meth:`append`) and gives the
    rows back (:meth:`rows`) for a resume. A row holds the step number, the
    pool positions queried (``query_indices``), those labelled in the step
    when they differ from the picks (``labelled_indices``), the size of the
    labelled set the step's model was trained on (``n_labels``), timings and
    metrics. The experiment runner's run files are the same journal on disk.

    Parameters
    ----------
    rows : list of dict, optional
        Rows to continue from; the list is appended to in place.

    Examples
    --------
    >>> from skdbal.loop import MemoryJournal
    >>> journal = MemoryJournal()
    >>> journal.append({"step": 0, "n_labels": 20, "query_indices": [4, 2]}, learner=None)
    >>> journal.rows()[-1]["step"]
    0
    """

    def __init__(self, rows: Optional[List[dict]] = None):
        self.history = rows if rows is not None else []

    def rows(self) -> List[dict]:
        """The rows written so far."""
        return self.history

    def append(self, row: dict, learner) -> None:
        """Record a finished step."""
        self.history.append(row)


def _plain(value):
    return value.tolist() if isinstance(value, np.ndarray) else value


def check_stopping(stopping) -> Optional[StoppingRule]:
    """A validated clone of a stopping rule (None stays None), as the loop keeps it.

    Parameters
    ----------
    stopping : StoppingRule or None

    Returns
    -------
    StoppingRule or None
        A fresh clone, its parameters checked (a ValueError names the first
        bad one), so that the caller's object is never changed.

    Examples
    --------
    >>> from skdbal.loop import check_stopping
    >>> from skdbal.stopping import LabelBudget
    >>> rule = LabelBudget(max_labels=50)
    >>> own = check_stopping(rule)
    >>> own is not rule, own.max_labels
    (True, 50)
    """
    if stopping is None:
        return None
    if not isinstance(stopping, StoppingRule):
        raise TypeError(f"stopping must be a stopping rule (skdbal.stopping.StoppingRule) or None; "
                        f"got {type(stopping).__name__}")
    own = clone(stopping).validate()
    names = _rule_names(own)
    taken = sorted({"reason", "set"} & set(names))
    if taken:
        raise ValueError(f"a stopping rule may not be named {taken[0]!r}: its column stop_{taken[0]} is the "
                         "loop's own")
    return own


def _rule_names(rule: StoppingRule) -> List[str]:
    """The names of a rule's journal columns: its own, then each rule of an AnyOf."""
    names = [rule.name]
    if isinstance(rule, AnyOf):
        names += list(rule.named_rules())
    return names


def _verdict_columns(rule: StoppingRule, verdict: Verdict) -> Dict[str, object]:
    """``stop_<name>``, ``stop_<name>_value`` for the rule and each rule of an AnyOf, and ``stop_reason``."""
    verdicts = {rule.name: verdict}
    if isinstance(rule, AnyOf):
        verdicts.update(rule.verdicts_)
    columns: Dict[str, object] = {}
    for name, v in verdicts.items():
        columns[f"{_STOP_PREFIX}{name}"] = bool(v.stop)
        columns[f"{_STOP_PREFIX}{name}_value"] = float(v.value)
    columns[f"{_STOP_PREFIX}reason"] = verdict.reason if verdict.stop else ""
    return columns


class ActiveLearningLoop(LoopAccuracy):
    """Run a learner against an oracle, step by step, writing a journal.

    Parameters
    ----------
    learner : ActiveLearner
        A learner that owns its pool (:meth:`~skdbal.ActiveLearner.set_pool`);
        the loop uses its ``query(n_instances=...)``, ``label`` and
        ``refit``.
    oracle : Oracle
        Answers the queries (:mod:`skdbal.oracles`).
    n_instances : int, default=1
        Points queried per step.
    evaluate : callable, optional
        ``evaluate(learner) -> dict`` of metrics after every fit, written
        into the step's row.
    journal : journal, optional
        Where each step is written (:class:`MemoryJournal` by default).
    fit_model : callable, optional
        ``fit_model(step, X, y) -> model``: how the model of a step is
        trained on the labelled set, instead of the learner's own retrain
        (the experiment runner's per-step networks, ensembles and last
        layers). The model is handed to ``learner.refit(model=...)``.
    query_kwargs : dict, optional
        Keywords for every query (``random_tie_break``, ``y_pool``...);
        not ``candidates``, ``n_instances`` or ``X_pool``, which the loop sets.
    pass_pool_labels : bool, default=False
        Pass the oracle's labels known in advance (``oracle.pool_labels()``)
        to every query as ``y_pool``, as the noise filter needs.
    stopping : StoppingRule, optional
        A stopping rule (:mod:`skdbal.stopping`), or an
        :class:`~skdbal.stopping.AnyOf` of several. The loop works on a
        clone (``stopping_``), so the object given is never changed. After
        every fit it shows the rule a :class:`~skdbal.stopping.StepView`
        holding only the fields that the rule ``needs()``: the model's
        ``predict_proba`` (and ``predict_proba_samples(consistent=True)``)
        on the stop set, the previous model's probabilities and the
        strategy's scores on the batch just bought, ``batch_size =
        n_instances`` and the number of pool rows still unlabelled. The
        step's row gets ``stop_<name>`` (the verdict) and
        ``stop_<name>_value`` for the rule and for each rule of an
        ``AnyOf``, and ``stop_reason``: the reasons of those that said stop,
        else ``""``. Step 0's row also holds the stop set (``stop_set``).
        A step that trained no new model (no answer came back) shows the
        rule nothing new, and its row carries no verdict.
    monitor : bool or AccuracyMonitor, optional
        Estimate the model's accuracy at every step from the labels bought
        (:class:`~skdbal.accuracy_monitor.AccuracyMonitor`): True, or a fresh
        monitor whose settings are copied; off by default. The loop keeps
        its own (``monitor_``). After the oracle answers, it is fed the
        step's picks that came back labelled: whether the model that chose
        them (argmax of its ``predict_proba``, taken before the fit) guessed
        each label, with the strategy's ``info["draw_log_q"]`` when it has
        one (a stochastic batch) and the candidates the batch was drawn
        from (the unlabelled rows nobody is labelling, and the
        ``pool_subsample`` drawn from them). With draw probabilities only the
        labelled prefix of the picks, in the order drawn, is fed (a pick
        skipped or still pending ends it); a noise filter's draw depends on
        the labels, so it is fed as a top-k batch. After the fit, the step's
        row gets ``estimate_acc``, ``estimate_lo``, ``estimate_hi``,
        ``estimate_kind``, ``estimate_biased`` and ``estimate_n``
        (:func:`~skdbal.accuracy_monitor.journal_fields`): the previous
        model's estimate, bridged to the new model through their
        disagreement on the stop set's rows still unlabelled. Those columns
        are None at step 0, at a step that trained no new model, and until
        a batch was observed. The monitor is not written to the journal: a
        resumed loop starts a fresh one.

        **Audits.** With a monitor's ``audit_share > 0``, :meth:`start` sets
        a reservoir aside (a ``reservoir_share`` of the pool rows outside the
        initial set; step 0's row holds it, ``reservoir``) that acquisition
        never draws from, and each step buys audit labels from it through
        the same oracle, an ``audit_share`` of the labels asked since the
        initial set, drawn by the monitor's ``audit_proposal``
        (:func:`~skdbal.audit.draw_audit`, with the model that chose the
        batch). They are never trained on: after each fit the new model is
        judged on all of them, and the row's estimate is the audit's
        (``"audit-lure-kish-wilson"``, unbiased for the reservoir). Rows get
        ``n_audit`` (audit labels bought so far: the labels paid are
        ``n_labels + n_audit``), and ``audit_indices`` and ``audit_q`` (the
        step's draws, in order, and their probabilities); a resume asks for
        them again and feeds them to its fresh monitor. An audit draw not
        answered yet, or skipped, ends the run of draws fed to the monitor.
    stop_set_size : int, default=2000
        Rows of the stop set, drawn once in :meth:`start` from the pool rows
        not labelled then (all of them when fewer are left). The set is
        fixed for the whole run, as Bloodgood & Vijay-Shanker's stop set is:
        rows labelled later stay in it, and their labels are never read.
        It is drawn with a stopping rule or a monitor.
    stop_on : {"any", "record"}, default="any"
        ``"any"``: :meth:`run` ends after the first step whose verdict says
        stop. ``"record"``: the verdicts are written and :meth:`run` goes on.
    stop_seed : int, optional
        Seeds the stop set. By default the learner's ``random_state`` when it
        is an int; for a generator, a hash of its state (read, not
        advanced); otherwise fresh entropy. The queries' random stream is
        never drawn from.
    verbose : bool, default=True
        Show a tqdm progress bar in :meth:`run`.

    Attributes
    ----------
    history : list of dict
        The journal's rows.
    pending : ndarray of int
        Positions requested and not answered yet (never queried again).
    skipped : ndarray of int
        Positions the oracle declined to label (never queried again).
    stopping_ : StoppingRule or None
        The loop's own clone of ``stopping``, holding what it has seen.
    stop_set_ : ndarray of int or None
        The stop set's pool positions, once :meth:`start` or :meth:`resume`
        has run with a rule or a monitor.
    monitor_ : AccuracyMonitor or None
        The loop's own monitor, fed at every step (None without ``monitor``).
    reservoir_ : ndarray of int or None
        The audit reservoir's pool positions (None without audits).
    n_audit : int
        Audit labels bought (answered) so far.
    stopped_by_ : list of str or None
        With ``stop_on="any"``: the names of the rules that said stop at the
        last step (None while none does, and always with ``"record"``).

    References
    ----------
    .. [1] P. Atighehchian, F. Branchaud-Charron, J. Freyberg, R. Pardinas,
       L. Schell and G. Pearse, "Baal, a Bayesian active learning library",
       2022 (its ``ActiveLearningLoop``).

    Examples
    --------
    The first ten digits are one of each class: start from them, then
    acquire 5 points per step for two steps.

    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.acquisition import max_entropy
    >>> from skdbal.loop import ActiveLearningLoop, evaluate
    >>> from skdbal.oracles import KnownLabels
    >>> X, y = load_digits(return_X_y=True)              # 8x8 images, flattened to 64 columns
    >>> learner = ActiveLearner(LogisticRegression(max_iter=500), max_entropy, random_state=0)
    >>> learner = learner.set_pool(X[:200])               # no label known yet
    >>> loop = ActiveLearningLoop(learner, KnownLabels(y[:200]), n_instances=5, verbose=False,
    ...                           evaluate=lambda m: evaluate(m, X[200:400], y[200:400]))
    >>> row = loop.start(np.arange(10))
    >>> history = loop.run(2)
    >>> [row["n_labels"] for row in history], len(learner.labelled_idx_)
    ([10, 15, 20], 20)

    With a stopping rule, ``run(n)`` runs at most ``n`` steps: here it ends
    once 40 labels are bought, and every row says what the rule saw.

    >>> from skdbal.stopping import LabelBudget
    >>> learner = ActiveLearner(LogisticRegression(max_iter=500), max_entropy, random_state=0)
    >>> learner = learner.set_pool(X[:200])
    >>> loop = ActiveLearningLoop(learner, KnownLabels(y[:200]), n_instances=10, verbose=False,
    ...                           stopping=LabelBudget(max_labels=40))
    >>> row = loop.start(np.arange(10))
    >>> history = loop.run(10)                            # at most 10 steps
    >>> [(row["n_labels"], row["stop_label_budget"]) for row in history]
    [(10, False), (20, False), (30, False), (40, True)]
    >>> loop.stopped_by_, loop.history[-1]["stop_reason"]
    (['label_budget'], '40 labels bought: the budget of 40 is spent')

    With ``monitor=True`` every row estimates the accuracy from the labels
    bought; for a top-k strategy it is marked biased.

    >>> learner = ActiveLearner(LogisticRegression(max_iter=500), max_entropy, random_state=0)
    >>> loop = ActiveLearningLoop(learner.set_pool(X[:200]), KnownLabels(y[:200]), n_instances=5,
    ...                           verbose=False, monitor=True)
    >>> row = loop.start(np.arange(10))
    >>> row = loop.step()
    >>> row["estimate_kind"], row["estimate_biased"], row["estimate_n"]
    ('bridge-prequential-biased', True, 5)
    >>> bool(row["estimate_lo"] <= row["estimate_acc"] <= row["estimate_hi"])
    True

    With an audit share, a fifth of the labels paid test the model instead:
    drawn from a reservoir it never trains on, they give an unbiased estimate.

    >>> from skdbal.accuracy_monitor import AccuracyMonitor
    >>> learner = ActiveLearner(LogisticRegression(max_iter=500), max_entropy, random_state=0)
    >>> loop = ActiveLearningLoop(learner.set_pool(X[:200]), KnownLabels(y[:200]), n_instances=8,
    ...                           verbose=False, monitor=AccuracyMonitor(audit_share=0.2))
    >>> row = loop.start(np.arange(10))
    >>> history = loop.run(2)
    >>> [(row["n_labels"], row["n_audit"]) for row in history]
    [(10, 0), (18, 2), (26, 4)]
    >>> row = history[-1]
    >>> row["estimate_kind"], row["estimate_biased"], row["estimate_n"]
    ('audit-lure-kish-wilson', False, 4)
    """

    def __init__(self, learner, oracle, *, n_instances: int = 1, evaluate: Optional[Callable] = None,
                 journal=None, fit_model: Optional[Callable] = None, query_kwargs: Optional[dict] = None,
                 pass_pool_labels: bool = False, stopping: Optional[StoppingRule] = None,
                 monitor=None, stop_set_size: int = 2000, stop_on: str = "any", stop_seed: Optional[int] = None,
                 verbose: bool = True):
        if not hasattr(learner, "X_pool_"):
            raise ValueError("the loop needs a learner that owns its pool: call learner.set_pool(X_pool) first")
        self.stopping_ = check_stopping(stopping)
        self.monitor_ = check_monitor(monitor)
        if self.monitor_ is not None and is_regressor(learner):
            raise ValueError("monitor estimates a classifier's accuracy; this learner trains a regressor")
        self.stop_set_size = check_positive_int(stop_set_size, "stop_set_size")
        if stop_on not in ("any", "record"):
            raise ValueError(f"stop_on must be 'any' or 'record'; got {stop_on!r}")
        if stop_seed is not None and (isinstance(stop_seed, bool) or not isinstance(stop_seed, Integral)):
            raise ValueError(f"stop_seed must be None or an int; got {stop_seed!r}")
        self.stopping = stopping
        self.monitor = monitor
        self._sample_pred: Optional[np.ndarray] = None   # the current model's guesses on the stop set
        self._chooser_pred: Optional[np.ndarray] = None  # those of the model that chose the last batch observed
        self.stop_on = stop_on
        self.stop_seed = stop_seed
        self.stop_set_: Optional[np.ndarray] = None
        self.stopped_by_: Optional[List[str]] = None
        self.learner = learner
        self.oracle = oracle
        self.n_instances = n_instances
        self.evaluate = evaluate
        self.journal = MemoryJournal() if journal is None else journal
        self.fit_model = fit_model
        self.query_kwargs = check_query_kwargs(query_kwargs)
        self.pass_pool_labels = pass_pool_labels
        self.verbose = verbose
        self._pending: List[int] = []
        self._skipped: List[int] = []
        self._reset_audits(None)

    # ------------------------------------------------------------ state
    @property
    def history(self) -> List[dict]:
        return self.journal.rows()

    @property
    def pending(self) -> np.ndarray:
        return np.asarray(self._pending, dtype=np.intp)

    @property
    def skipped(self) -> np.ndarray:
        return np.asarray(self._skipped, dtype=np.intp)

    def _ask(self, positions) -> tuple:
        """Request ``positions``, collect the answers and record them (no fit).
        Returns (labelled positions in order, skipped positions)."""
        positions = np.asarray(positions, dtype=np.intp)
        if len(positions):
            self.oracle.request(positions)
        self._pending.extend(int(p) for p in positions if p not in self._pending)
        answers = self._route_audit_answers(self.oracle.collect(self.pending))
        last = {}
        for a in answers:  # two answers about one row in one batch: the later one counts
            if not a.skipped:
                last[a.position] = a  # keeps the row's first place, takes its last label
        retracted = [a for a in last.values() if a.retract and self.learner.labelled_mask_[a.position]]
        labelled = [a for a in last.values() if not a.retract]
        if labelled:  # one call: a bad answer (a label outside the classes) changes nothing, and raises
            self.learner.label([a.position for a in labelled], np.asarray([a.label for a in labelled]),
                               annotator=[a.annotator for a in labelled], time=[a.time for a in labelled],
                               refit=False)
        if retracted:
            self.learner.unlabel([a.position for a in retracted])
        skipped = []
        for a in answers:
            if a.position in self._pending:
                self._pending.remove(a.position)
            if a.skipped:
                if a.position not in self._skipped and not self.learner.labelled_mask_[a.position]:
                    self._skipped.append(int(a.position))
                    skipped.append(int(a.position))
            elif a.position in self._skipped:  # skipped by one annotator, labelled by another
                self._skipped.remove(a.position)
        return [int(a.position) for a in labelled], skipped

    def _fit(self, step: int) -> float:
        t0 = time.perf_counter()
        if self.fit_model is not None:
            model = self.fit_model(step, self.learner.X_training_, self.learner.y_training_)
            self.learner.refit(model=model, step=step)
        else:
            self.learner.refit(step=step)
        return time.perf_counter() - t0

    def _metrics(self) -> dict:
        return dict(self.evaluate(self.learner)) if self.evaluate is not None else {}

    # ------------------------------------------------------------ stopping
    def _stop_rng(self) -> np.random.RandomState:
        seed = self._seed()
        return np.random.RandomState(None if seed is None else [seed, _STOP_SALT])

    def _seed(self) -> Optional[int]:
        """The run's seed for the loop's own draws (stop set, reservoir, audits): ``stop_seed``, else the
        learner's ``random_state``: an int, or a hash of a generator's state (read, not advanced)."""
        seed = self.stop_seed
        state = getattr(self.learner, "random_state", None)
        if seed is None and isinstance(state, Integral) and not isinstance(state, bool):
            seed = int(state)
        elif seed is None and isinstance(state, np.random.RandomState):  # its state is read, never advanced
            seed = int(joblib.hash(state.get_state()), 16) % 2**31
        return None if seed is None else int(seed)

    def _rule(self) -> StoppingRule:
        """The loop's own stopping rule (only called where there is one)."""
        if self.stopping_ is None:
            raise RuntimeError("this loop has no stopping rule")
        return self.stopping_

    def _draw_stop_set(self, exclude) -> np.ndarray:
        """The stop set: ``stop_set_size`` pool positions outside ``exclude`` and the labelled rows, sorted."""
        free = ~self.learner.labelled_mask_
        free[np.asarray(exclude, dtype=np.intp)] = False
        rows = np.flatnonzero(free)
        if not len(rows) and self.stopping_ is not None and self._rule().needs() & {"stop_proba", "stop_samples"}:
            raise ValueError(f"{type(self._rule()).__name__} reads a stop set of unlabelled pool rows, and "
                             "no pool row is left outside the initial set")
        if len(rows) > self.stop_set_size:
            rows = np.sort(self._stop_rng().choice(rows, self.stop_set_size, replace=False))
        return rows.astype(np.intp)

    def _view(self, step: int, batch_proba=None, batch_scores=None) -> dict:
        """The step's view, with only what the rule needs computed."""
        learner, needs = self.learner, self._rule().needs()
        view = {"step": step, "n_labels": len(learner.y_training_), "batch_size": self.n_instances,
                "n_unlabelled": int(np.count_nonzero(~learner.labelled_mask_))}
        if needs & {"stop_proba", "stop_samples"}:
            X_stop = read_rows(learner.X_pool_, self.stop_set_)
            if "stop_proba" in needs:
                view["stop_proba"] = learner.predict_proba(X_stop)
            if "stop_samples" in needs:
                view["stop_samples"] = learner.predict_proba_samples(X_stop, consistent=True)
        if "batch_proba" in needs:
            view["batch_proba"] = batch_proba
        if "batch_scores" in needs:
            view["batch_scores"] = batch_scores
        return view

    def _judge(self, row: dict, view: dict) -> None:
        """Show the rule the step, write its verdicts into the row, and note who said stop."""
        rule = self._rule()
        verdict = rule.update(view)
        row.update(_verdict_columns(rule, verdict))
        stopped = None
        if verdict.stop and self.stop_on == "any":
            verdicts = getattr(rule, "verdicts_", {rule.name: verdict})
            stopped = [name for name, v in verdicts.items() if v.stop]
        self.stopped_by_ = stopped

    def prime(self) -> None:
        """Prepare the stopping rule to continue the journal with the learner's current model.

        Called by :meth:`resume`, and by a caller that continues a journal with a learner that already holds its
        labels and model (a warm start). The stop set is the one step 0's row holds (a new one, outside the
        initial set and the labelled rows, for a journal written without rules); the rule is reset and shown the
        current model as a first step (no batch), and that verdict is discarded, so windows (κ's, patience)
        restart from it. Does nothing without a rule or rows.
        """
        rows = self.journal.rows()
        if (self.stopping_ is None and self.monitor_ is None) or not rows:
            return
        stored = rows[0].get("stop_set")
        initial = rows[0].get("labelled_indices", rows[0]["query_indices"])
        self.stop_set_ = (np.asarray(stored, dtype=np.intp) if stored is not None
                          else self._draw_stop_set(initial))
        self._restore_audits()
        self._watch_from_here(None)   # the monitor is not in the journal: a fresh one, from this model on

    def _watch_from_here(self, row: Optional[dict]) -> None:
        """Reset the rule and give the loop a fresh monitor at the current model, the first step they see: its
        verdict written into ``row`` (step 0), or, with ``row`` None (a resume), shown to the rule and discarded."""
        view = None
        if self.stopping_ is not None:
            view = self._view(0)
            self.stopping_.reset()
            if row is None:
                self.stopping_.update(view)
                self.stopped_by_ = None
            else:
                self._judge(row, view)
        if self.monitor_ is not None:
            self.monitor_ = check_monitor(self.monitor)
            self._feed_audits()   # the audit labels bought before, judged by this model
            self._sample_pred, self._chooser_pred = self._guesses(view), None
            if row is not None:
                row.update(journal_fields(None))

    # ------------------------------------------------------------ steps
    def start(self, initial_idx) -> dict:
        """Step 0: ask the oracle for the initial set, fit on it, evaluate, write the row."""
        initial_idx = np.asarray(initial_idx, dtype=np.intp)
        watched = self.stopping_ is not None or self.monitor_ is not None
        stop_set = self._draw_stop_set(initial_idx) if watched else None  # before anything is asked
        self._reset_audits(self._draw_reservoir(initial_idx) if self.audits else None)
        labelled, skipped = self._ask(initial_idx)
        if not labelled:
            raise ValueError("the oracle labelled none of the initial set: the initial model needs labels")
        fit_time = self._fit(0)
        row = {"step": 0, "n_labels": len(self.learner.y_training_), **self._metrics(),
               "query_indices": initial_idx.tolist(), "query_time": 0.0, "fit_time": fit_time}
        self._extra(row, initial_idx, labelled, skipped)
        if stop_set is not None:
            self.stop_set_ = stop_set
            self._watch_from_here(row)
            row["stop_set"] = stop_set.tolist()
        if self.reservoir_ is not None:
            row.update(reservoir=self.reservoir_.tolist(), **self._audit_columns())
        self.journal.append(row, self.learner)
        return row

    def _extra(self, row, picks, labelled, skipped):
        if list(labelled) != list(np.asarray(picks).tolist()):
            row["labelled_indices"] = list(labelled)
        if skipped:
            row["skipped_indices"] = list(skipped)
        if self._pending:
            row["n_pending"] = len(self._pending)

    def resume(self) -> bool:
        """Continue from the journal's rows: ask the oracle again for every label
        they record, in order, and train the model of the last step.

        With a stopping rule, the stop set is the one step 0's row holds (a
        new one is drawn for a journal written without rules), and the rule
        is reset and shown the last step's model, a verdict discarded: its
        windows (the κ's of :class:`~skdbal.stopping.StabilizingPredictions`,
        the patience of :class:`~skdbal.stopping.ExpectedGain`) restart
        there, so a resumed run may stop later than the uninterrupted one.

        Returns
        -------
        bool
            Whether there was anything to resume.
        """
        rows = self.journal.rows()
        if not rows:
            return False
        # each row once, in the order first labelled (a changed label is asked again once)
        order = list(dict.fromkeys(int(p) for r in rows for p in r.get("labelled_indices", r["query_indices"])))
        self._ask(order)
        self._fit(int(rows[-1]["step"]))
        self.prime()
        return True

    def step(self, step: Optional[int] = None) -> dict:
        """One round: query the unlabelled rows nobody is labelling, ask the
        oracle, label what came back, retrain if anything changed, evaluate.

        Parameters
        ----------
        step : int, optional
            The row's step number; one after the last by default.

        Returns
        -------
        row : dict
            Also written to the journal.
        """
        history = self.journal.rows()
        if step is None:
            step = history[-1]["step"] + 1 if history else 1
        learner = self.learner
        kwargs = dict(self.query_kwargs)
        if self.pass_pool_labels and "y_pool" not in kwargs:
            known = self.oracle.pool_labels()
            if known is not None:
                kwargs["y_pool"] = known
        candidates = None
        taken = getattr(self.oracle, "taken", None)   # rows the oracle answers or holds, not told yet
        taken = np.asarray(taken() if callable(taken) else [], dtype=np.intp)
        if self._pending or self._skipped or len(taken) or self.reservoir_ is not None:
            free = ~learner.labelled_mask_
            free[self.pending] = False
            free[self.skipped] = False
            free[taken] = False
            free[self._not_acquirable()] = False
            candidates = np.flatnonzero(free)
        # the rows the batch is drawn from: the candidates, or the pool_subsample's uniform draw from them
        n_unlabelled = len(candidates) if candidates is not None else int(np.count_nonzero(~learner.labelled_mask_))
        subsample = getattr(learner, "pool_subsample", None)
        n_drawn_from = n_unlabelled if subsample is None else min(n_unlabelled, int(subsample))
        n_before = len(learner.label_log_)
        t0 = time.perf_counter()
        q, X_query = learner.query(n_instances=self.n_instances, candidates=candidates, **kwargs)
        acquisition = getattr(learner, "last_acquisition_", None)
        info = dict(acquisition.info) if acquisition is not None else {}
        clash = sorted(set(info) & _HISTORY_KEYS) + sorted(k for k in info if str(k).startswith(_STOP_PREFIX))
        if self.monitor_ is not None:
            clash += sorted(set(info) & (set(journal_fields(None)) | (AUDIT_KEYS if self.audits else set())))
        if clash:  # before anything is asked: the picks stay unlabelled, no row is written
            raise ValueError(f"the strategy's Acquisition.info uses the history's own keys {clash} "
                             f"(or the stopping rules' prefix {_STOP_PREFIX!r}); rename them")
        t1 = time.perf_counter()
        needs = self.stopping_.needs() if self.stopping_ is not None else frozenset()
        # the batch as the model that chose it saw it: taken before the fit
        watch = self.monitor_ is not None
        batch_proba = learner.predict_proba(X_query) if "batch_proba" in needs or watch else None
        guesses = np.asarray(learner.classes_)[np.asarray(batch_proba).argmax(axis=1)] if watch else None
        batch_scores = getattr(acquisition, "scores", None) if "batch_scores" in needs else None
        audited = self._draw_audits(step, len(q))   # by the model that chose the batch, before the fit
        labelled, skipped = self._ask(np.concatenate([q, audited]))
        if watch:
            self._observe(q, guesses, labelled, info, n_drawn_from, n_unlabelled)
        refit = len(learner.label_log_) > n_before
        fit_time = self._fit(step) if refit else 0.0
        row = {"step": step, "n_labels": len(learner.y_training_), **self._metrics(),
               "query_indices": q.tolist(), "query_time": t1 - t0, "fit_time": fit_time,
               **{k: _plain(v) for k, v in info.items()}}
        self._extra(row, q, labelled, skipped)
        row.update(self._audit_columns(audited))
        # a step that trained no new model shows the rule nothing new, and has no new estimate
        view = self._view(step, batch_proba, batch_scores) if self.stopping_ is not None and refit else None
        if watch:
            if refit:
                self._estimate(row, view)
            else:
                row.update(journal_fields(None))
        if view is not None:
            self._judge(row, view)
        self.journal.append(row, learner)
        return row

    def run(self, n_queries: int) -> List[dict]:
        """Run up to ``n_queries`` steps (with a progress bar when ``verbose``); return the history.

        With a stopping rule and ``stop_on="any"``, ``n_queries`` is a
        maximum: the run ends after the first step whose verdict says stop
        (``stopped_by_`` names the rules), and runs no step when the last
        one already said stop. :meth:`step` still steps on when called.
        """
        from tqdm.auto import tqdm

        history = self.journal.rows()
        first = history[-1]["step"] + 1 if history else 1
        for step in tqdm(range(first, first + n_queries), disable=not self.verbose, desc="active learning"):
            if self.stopped_by_:
                break
            self.step(step)
        return self.journal.rows()
