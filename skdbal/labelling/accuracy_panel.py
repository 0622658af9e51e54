"""How good the session's model is, from the labels people gave: the estimate the labelling page shows.

Every label that arrives after the first model is judged by the model of its time, which had not seen
it (the store's ``checks``). Once the next version is trained, the labels that came while a version was
current are fed, as one batch, to an :class:`~skdbal.accuracy_monitor.AccuracyMonitor`:

- the batch the version chose was drawn with known probabilities (a stochastic strategy, whose draw
  the store keeps: :func:`skdbal.labelling._oracle.draw_record`): the labelled start of its draw, in the
  order drawn, up to the first item left unlabelled (skipped, or still pending at the retrain). The
  estimate is then unbiased for that version's accuracy on the items still unlabelled
  (``"stratified-lure-kish-wilson"``), with its 95% interval;
- otherwise (top-k, the usual strategies): every label it judged, and the estimate is the share of
  the last three versions' labels guessed right, the items the strategy asked about, its hardest:
  biased low for the whole pool (``"prequential-biased"``).

Each label is compared with the item's label as it stood when the next version was trained (an undo
or a second look given meanwhile counts; a later one does not change what was shown). Everything is
read from the store, so a restarted session shows the same estimates (:class:`AccuracyPanel`).
"""
from __future__ import annotations

import threading
from typing import AbstractSet, Callable, Dict, List, Mapping, Optional, Sequence

from ..accuracy_monitor import AccuracyMonitor
from ..estimates import AccuracyEstimate
from .audit_share import AUDIT_METHOD, audit_estimate

__all__ = ["judged_batches", "follow_estimates", "estimate_fields", "estimate_words", "AccuracyPanel"]


def judged_batches(models: Sequence[Mapping], checks: Sequence[Mapping],
                   labels_upto: Callable[[int], Mapping[int, str]]) -> List[dict]:
    """The batch each model version judged, once the next version is trained, oldest first.

    Parameters
    ----------
    models : sequence of dict
        The store's model versions (:meth:`LabelStore.models`), with ``version``, ``last_event``,
        ``n_labels`` and ``metrics`` (whose ``draws`` are the draw records of the batches the previous
        version chose).
    checks : sequence of dict
        The store's judged labels (:meth:`LabelStore.checks`): ``model_version``, ``item``, ``guess``.
    labels_upto : callable
        ``labels_upto(event)``: each labelled item's label (text) as of that event.

    Returns
    -------
    list of dict
        ``version``, ``n_labels`` (its training labels), ``items``, ``correct`` (whether it guessed
        each), and for a draw with known probabilities ``log_q``, ``n_candidates`` and
        ``n_unlabelled`` (else None). A version that judged no label has no batch.

    Examples
    --------
    Version 0 judged items 5, 7 and 9 (guessing 7 wrong); its batch was top-k:

    >>> from skdbal.labelling.accuracy_panel import judged_batches
    >>> models = [{"version": 0, "last_event": 10, "n_labels": 10, "metrics": {}},
    ...           {"version": 1, "last_event": 13, "n_labels": 13, "metrics": {}}]
    >>> checks = [{"model_version": 0, "item": i, "guess": g} for i, g in ((5, "a"), (7, "a"), (9, "b"))]
    >>> b = judged_batches(models, checks, lambda upto: {5: "a", 7: "b", 9: "b"})
    >>> b[0]["items"], b[0]["correct"], b[0]["log_q"]
    ([5, 7, 9], [True, False, True], None)
    """
    guesses: Dict[int, Dict[int, str]] = {}
    for c in checks:   # a model guesses an item once: its first judgement of it
        guesses.setdefault(int(c["model_version"]), {}).setdefault(int(c["item"]), c["guess"])
    draws = {}
    for m in models:
        for d in m["metrics"].get("draws", ()):
            draws[int(d["chooser"])] = d     # the last batch a version chose is the one its labels retrained
    out = []
    for m, after in zip(models, models[1:]):
        v = int(m["version"])
        judged = guesses.get(v)
        if not judged:
            continue
        truth = labels_upto(int(after["last_event"]))
        batch = {"version": v, "n_labels": int(m["n_labels"]), "log_q": None, "n_candidates": None,
                 "n_unlabelled": None}
        d = draws.get(v)
        if d is not None and d.get("log_q") is not None:
            k = 0
            while k < len(d["picks"]) and d["picks"][k] in judged and d["picks"][k] in truth:
                k += 1
            if k:
                items = [int(p) for p in d["picks"][:k]]
                out.append(dict(batch, items=items, correct=[judged[i] == truth[i] for i in items],
                                log_q=[float(x) for x in d["log_q"][:k]], n_candidates=int(d["n_candidates"]),
                                n_unlabelled=int(d["n_unlabelled"])))
                continue
        items = [i for i in judged if i in truth]
        if items:
            out.append(dict(batch, items=items, correct=[judged[i] == truth[i] for i in items]))
    return out


def follow_estimates(batches: Sequence[Mapping], window: int = 3,
                     confidence: float = 0.95) -> List[Optional[AccuracyEstimate]]:
    """The estimate after each batch of :func:`judged_batches`: an
    :class:`~skdbal.accuracy_monitor.AccuracyMonitor` fed them in order, each by its own version, asked
    for the model that chose the last (:meth:`~skdbal.accuracy_monitor.AccuracyMonitor.previous_model`).

    Parameters
    ----------
    batches : sequence of dict
        As :func:`judged_batches` gives them.
    window : int, default=3
        Top-k batches pooled by the biased estimate.
    confidence : float, default=0.95

    Returns
    -------
    list of AccuracyEstimate or None
        One per batch; None where nothing can be estimated (no item left unlabelled).

    Examples
    --------
    Two top-k batches, 2 of 3 then 3 of 3 right: the share of both, 5 of 6, biased:

    >>> from skdbal.labelling.accuracy_panel import follow_estimates
    >>> batches = [{"version": 0, "correct": [1, 0, 1], "log_q": None},
    ...            {"version": 1, "correct": [1, 1, 1], "log_q": None}]
    >>> e = follow_estimates(batches)[-1]
    >>> round(e.accuracy, 4), e.n_labels, e.biased
    (0.8333, 6, True)
    """
    monitor = AccuracyMonitor(window=window, confidence=confidence)
    out: List[Optional[AccuracyEstimate]] = []
    for b in batches:
        if b.get("log_q") is not None:
            monitor.observe(b["correct"], log_q=b["log_q"], n_candidates=b["n_candidates"],
                            n_unlabelled=b["n_unlabelled"], model=b["version"])
        else:
            monitor.observe(b["correct"], model=b["version"])
        try:
            out.append(monitor.previous_model())
        except ValueError:   # no unlabelled item left to estimate on
            out.append(None)
    return out


def estimate_fields(estimate: Optional[AccuracyEstimate]) -> Optional[dict]:
    """An estimate as the page's JSON: ``accuracy``, ``low``, ``high``, ``n_labels``, ``n_effective``,
    ``method``, ``biased``, ``population`` and ``confidence`` (None stays None).

    Examples
    --------
    >>> from skdbal.estimates import estimate_accuracy
    >>> from skdbal.labelling.accuracy_panel import estimate_fields
    >>> f = estimate_fields(estimate_accuracy([1, 1, 1, 0]))
    >>> f["accuracy"], f["method"], f["biased"], f["n_labels"]
    (0.75, 'wilson', False, 4)
    """
    if estimate is None:
        return None
    return {"accuracy": float(estimate.accuracy), "low": float(estimate.low), "high": float(estimate.high),
            "n_labels": int(estimate.n_labels), "n_effective": float(estimate.n_effective),
            "method": estimate.method, "biased": bool(estimate.biased), "population": estimate.population,
            "confidence": float(estimate.confidence)}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def estimate_words(fields: Optional[Mapping], noun: str = "items") -> str:
    """What an estimate says, in plain words, as the page shows it.

    A biased one is a share of the items the strategy asked about, never an interval of the accuracy;
    an unbiased one is the accuracy on the items still unlabelled, with its interval.

    Parameters
    ----------
    fields : dict or None
        :func:`estimate_fields`, with ``version`` (the model version it is of).
    noun : str, default="items"
        What the pool's items are called (``"images"``).

    Returns
    -------
    str

    Examples
    --------
    >>> from skdbal.labelling.accuracy_panel import estimate_words
    >>> print(estimate_words({"accuracy": 0.7133, "n_labels": 30, "biased": True, "version": 4}, "images"))
    Right on 71% of the last 30 images it asked about (its hardest cases, so on all images it is likely higher).
    >>> print(estimate_words({"accuracy": 0.94, "low": 0.89, "high": 0.97, "n_labels": 40, "biased": False,
    ...                       "confidence": 0.95, "population": "the 1180 rows still unlabelled", "version": 6}))
    Estimated accuracy 94% (89–97%, 95% interval) on the items still unlabelled, from 40 labels drawn at random \
with known odds (model version 6).
    >>> print(estimate_words({"accuracy": 0.94, "low": 0.89, "high": 0.97, "n_labels": 40, "biased": False,
    ...                       "method": "audit-uniform-wilson", "version": 6}, "images"))
    Estimated accuracy 94% (89–97%, 95% interval) on the images set aside for checking, from 40 of them labelled \
(not used for training), model version 6.
    >>> estimate_words(None)
    'No estimate yet: it needs the labels of a batch the model chose, judged before it retrained on them.'
    """
    if fields is None:
        return "No estimate yet: it needs the labels of a batch the model chose, judged before it retrained on them."
    n = int(fields["n_labels"])
    if fields.get("method") == AUDIT_METHOD:
        return (f"Estimated accuracy {_pct(fields['accuracy'])} ({100 * fields['low']:.0f}–{_pct(fields['high'])}, "
                f"{100 * float(fields.get('confidence', 0.95)):g}% interval) on the {noun} set aside for checking, "
                f"from {n} of them labelled (not used for training), model version {fields['version']}.")
    if fields["biased"]:
        return (f"Right on {_pct(fields['accuracy'])} of the last {n} {noun} it asked about (its hardest cases, "
                f"so on all {noun} it is likely higher).")
    level = f"{100 * float(fields.get('confidence', 0.95)):g}%"
    return (f"Estimated accuracy {_pct(fields['accuracy'])} ({100 * fields['low']:.0f}–{_pct(fields['high'])}, "
            f"{level} interval) on the {noun} still unlabelled, from {n} label{'s' if n != 1 else ''} drawn at "
            f"random with known odds (model version {fields['version']}).")


class AccuracyPanel:
    """The session's estimates, one per model version, read from its store and kept until a new version
    comes (a restart computes them again from the store, the same).

    Parameters
    ----------
    store : LabelStore
    window : int, default=3
    confidence : float, default=0.95
    reserved : set of int, optional
        The audit reservoir (:mod:`skdbal.labelling.audit_share`): its labels are left out of the estimates
        above, and a version that judged audit labels (its metrics' ``audit``, written at its retrain) has
        their estimate instead (:func:`~skdbal.labelling.audit_share.audit_estimate`), at once.

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling.store import LabelStore
    >>> from skdbal.labelling.accuracy_panel import AccuracyPanel
    >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    >>> AccuracyPanel(store).estimates()        # no model yet
    {}
    >>> store.close()
    """

    def __init__(self, store, window: int = 3, confidence: float = 0.95, reserved: AbstractSet[int] = frozenset()):
        self.store, self.window, self.confidence = store, window, confidence
        self.reserved = frozenset(reserved)
        self._lock = threading.Lock()
        self._key: Optional[tuple] = None
        self._estimates: Dict[int, dict] = {}

    def estimates(self) -> Dict[int, dict]:
        """``{version: estimate fields}`` of each version that judged a batch (with ``version`` and its
        training labels ``n_labels`` added; the estimate after it was fed)."""
        models = self.store.models()
        key = tuple(m["version"] for m in models)
        with self._lock:
            if key != self._key:
                store = self.store
                reserved = self.reserved
                checks = [c for c in store.checks() if c["item"] not in reserved]
                batches = judged_batches(models, checks, lambda upto: {
                    i: r["label"] for i, r in store.current_labels(upto=upto).items()})
                out = {}
                for b, e in zip(batches, follow_estimates(batches, self.window, self.confidence)):
                    f = estimate_fields(e)
                    if f is not None:
                        out[b["version"]] = dict(f, version=b["version"], n_labels_model=b["n_labels"])
                for m in models:    # the audit's estimate, where the version judged audit labels
                    if m["metrics"].get("audit"):
                        f = estimate_fields(audit_estimate(m["metrics"]["audit"], len(reserved), self.confidence))
                        if f is not None:
                            out[m["version"]] = dict(f, version=m["version"], n_labels_model=m["n_labels"])
                self._key, self._estimates = key, out
            return dict(self._estimates)

    def latest(self) -> Optional[dict]:
        """The estimate of the last version that judged a batch, or None."""
        estimates = self.estimates()
        return estimates[max(estimates)] if estimates else None
