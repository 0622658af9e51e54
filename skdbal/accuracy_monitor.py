"""Following a run's accuracy step by step, from the labels it bought: :class:`AccuracyMonitor`.

Every label an active learner buys goes into training, so the current model has seen all of them: its
accuracy on them is a training accuracy. A label is an honest test only of a model fitted *before* it
arrived. This module keeps, step after step, the honest tests a run has:

- the **next batches**, judged by the model that chose them, before it retrains on them (free, but they
  test a model one step old): weighted back to an unbiased estimate by :func:`stratified_lure_risk`
  when the batch was drawn with known probabilities (a stochastic batch), and only a biased
  prequential share for a top-k batch;
- the **bridge** from that model to the current one, through how often the two disagree on unlabelled
  rows (a conservative bound);
- an **audit**: labels drawn from a reservoir of the pool set aside at the start (:func:`reservoir`)
  that acquisition never draws from, honest for every later model, the current one included, at the
  cost of the labels.

Plain objects over arrays: nothing here knows the learner, the loop or the labelling page, which
feed them. Every result is an :class:`~skdbal.estimates.AccuracyEstimate` whose ``method`` says how it
was made and whose ``biased`` says whether it can be trusted as an interval for its population.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, Hashable, List, Mapping, Optional, Sequence

import numpy as np

from ._validation import check_bool, check_positive_int
from .audit import PROPOSALS
from .estimates import (
    AccuracyEstimate,
    clopper_pearson_interval,
    effective_sample_size,
    estimate_accuracy,
    lure_weights,
    prequential_accuracy,
    wilson_interval,
)

__all__ = ["stratified_lure_risk", "reservoir", "reservoir_size", "AccuracyMonitor", "journal_fields"]


# ---------------------------------------------------------------------------------------------------------------
# argument checks (each raises before any state changes)

def _count(value, name: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}; got {value!r}")
    return int(value)


def _correct(values, name: str = "correct") -> np.ndarray:
    c = np.asarray(values)
    if c.ndim != 1 or not len(c):
        raise ValueError(f"{name} must be a non-empty one-dimensional array (one entry per label); "
                         f"got shape {c.shape}")
    try:
        c = c.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold 0/1 or True/False (whether each label was guessed right)") from None
    if not np.isin(c, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold 0/1 or True/False (whether each label was guessed right)")
    return c


def _share(value, name: str, low: float, high: float, where: str, *, low_open: bool = False,
           high_closed: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) \
        and (low < value if low_open else low <= value) and (value <= high if high_closed else value < high)
    if not ok:
        raise ValueError(f"{name} must be a number in {where}; got {value!r}")
    return float(value)


def _draw_q(q, log_q, k: int) -> Optional[np.ndarray]:
    if q is not None and log_q is not None:
        raise ValueError("give q or log_q, not both")
    if log_q is not None:
        lq = np.asarray(log_q, dtype=np.float64)
        if lq.ndim != 1 or not (np.isfinite(lq).all() and (lq <= 0).all()):
            raise ValueError("log_q must be one-dimensional, finite and <= 0 (the log of each draw's probability)")
        q = np.exp(lq)
    if q is None:
        return None
    q = np.asarray(q, dtype=np.float64)
    if q.ndim != 1 or len(q) != k:
        raise ValueError(f"q must hold one probability per label ({k}); got shape {q.shape}")
    if not ((q > 0) & (q <= 1)).all():
        raise ValueError("q must lie in (0, 1] (the probability each draw had among the candidates left)")
    return q


# ---------------------------------------------------------------------------------------------------------------
# the stratified estimator

def stratified_lure_risk(losses, q, n_candidates, n_unlabelled=None, *, return_weights: bool = False):
    """One fixed model's risk on the pool still unlabelled, from several batches drawn after it.

    Batch ``b`` (``b = 1..B``) drew ``k_b`` items in order, with known
    probabilities ``q``, from ``N_b`` candidates, a uniform subsample (or all)
    of the ``n_b`` unlabelled items of its time. Its LURE estimate ``R̂_b``
    (:func:`~skdbal.estimates.lure_risk`) is unbiased for the model's risk on
    those ``n_b`` items. Every item that left the pool since was labelled by
    a later batch, with a loss known, so each estimate maps exactly onto the
    ``n_t = n_B - k_B`` items left after the last batch:
    ``Ř_b = (n_b R̂_b - sum of the losses of batches b..B) / n_t``, and
    ``R̂ = sum_b k_b Ř_b / sum_b k_b`` is unbiased for the model's risk on
    them, whatever the proposals, which may change from batch to batch and
    depend on everything seen before. The model must not have trained on any
    of the batches.

    Parameters
    ----------
    losses : sequence of array-like
        Per batch, oldest first, the model's loss on each drawn item in the
        order drawn (``1 - correct`` for the error rate); leading axes stack
        independent runs, draws last.
    q : sequence of array-like or None
        Per batch, the probability each draw had, the shape of its losses;
        None for a batch drawn without known probabilities (a top-k batch):
        it is no stratum, its losses only pass on to the rows left. At least
        one batch must have them.
    n_candidates : sequence of int or None
        Per batch, the ``N`` its draws were made from (None where ``q`` is).
    n_unlabelled : sequence of int, optional
        Per batch, the unlabelled items of its time, of which the candidates
        were a uniform subsample; ``n_candidates`` by default (needed where
        that is None). Batch ``b + 1`` must have ``n_b - k_b``: no item may
        leave the pool but by a batch.
    return_weights : bool, default=False
        Also return the coefficients ``n_b v_{b,m} / (K n_t)`` of the
        sampled losses (the ones behind the Kish effective size).

    Returns
    -------
    risk : float, or ndarray of shape (...) for stacked runs
    weights : list of ndarray, only with ``return_weights``

    Raises
    ------
    ValueError
        For mismatched lengths, bad ``q`` or counts, a population chain that
        breaks, or no item left after the last batch.

    Examples
    --------
    Four items, the first wrong. A first batch draws item 1 with probability
    1/6, a second draws item 0 with probability 1/7 from the three left: the
    two items left are both right, and the estimate of their risk, 1/2 of
    ``(4 R̂_1 - 1)/2 = -1/2`` and ``(1/q - 1)/2 = 3``, is 5/4 (unbiased,
    not bounded).

    >>> from skdbal.accuracy_monitor import stratified_lure_risk
    >>> stratified_lure_risk([[0], [1]], [[1/6], [1/7]], [4, 3])
    1.25
    """
    losses = [np.asarray(x, dtype=np.float64) for x in losses]
    q = [None if x is None else np.asarray(x, dtype=np.float64) for x in q]
    B = len(losses)
    if not B or len(q) != B or len(n_candidates) != B:
        raise ValueError(f"losses, q and n_candidates must hold one entry per batch, at least one; got "
                         f"{B}, {len(q)} and {len(n_candidates)}")
    if all(x is None for x in q):
        raise ValueError("q must give the draw probabilities of at least one batch")
    N: List[Optional[int]] = [None if x is None and c is None else _count(c, "n_candidates", 1)
                              for x, c in zip(q, n_candidates)]
    given = N if n_unlabelled is None else [_count(x, "n_unlabelled", 1) for x in n_unlabelled]
    if len(given) != B or any(x is None for x in given):
        raise ValueError(f"n_unlabelled must hold one int per batch ({B}) when a batch has no n_candidates")
    n: List[int] = [int(x) for x in given if x is not None]
    k = []
    for b in range(B):
        shape = losses[b].shape if q[b] is None else q[b].shape
        if losses[b].shape != shape or not losses[b].ndim or not losses[b].shape[-1]:
            raise ValueError(f"batch {b}: losses and q must have the same non-empty shape; got "
                             f"{losses[b].shape} and {shape}")
        if not np.isfinite(losses[b]).all():
            raise ValueError(f"batch {b}: losses must be finite")
        k.append(losses[b].shape[-1])
        Nb = N[b]
        if Nb is not None and n[b] < Nb:
            raise ValueError(f"batch {b}: n_unlabelled ({n[b]}) must be >= n_candidates ({Nb})")
        if b and n[b] != n[b - 1] - k[b - 1]:
            raise ValueError(f"batch {b}: n_unlabelled must be {n[b - 1] - k[b - 1]} (the last batch's "
                             f"{n[b - 1]} less its {k[b - 1]} labels); got {n[b]}")
    n_left = n[-1] - k[-1]
    if n_left <= 0:
        raise ValueError("no unlabelled item is left after the last batch: there is nothing to estimate")
    K = float(sum(kb for kb, x in zip(k, q) if x is not None))
    batch_sums = [x.sum(axis=-1) for x in losses]
    later = list(itertools.accumulate(batch_sums[::-1]))[::-1]   # sum of the losses of batches b..B
    risk = 0.0
    weights = []
    for b in range(B):
        qb, Nb = q[b], N[b]
        if qb is None or Nb is None:   # a batch drawn without known probabilities: its losses are only passed on
            continue
        coef = n[b] * lure_weights(qb, Nb) / (K * n_left)
        risk = risk + np.sum(coef * losses[b], axis=-1) - k[b] * later[b] / (K * n_left)
        weights.append(coef)
    risk = float(risk) if np.ndim(risk) == 0 else risk
    return (risk, weights) if return_weights else risk


def reservoir(pool_size: int, share: float = 0.2, random_state=None) -> np.ndarray:
    """The pool positions to set aside for audits: a uniform random ``share`` of the pool.

    Acquisition must never draw from them and audits only draw from them;
    then every audit draw of a run belongs to one sequence without
    replacement over one fixed population, and
    :meth:`AccuracyMonitor.audit_estimate` is unbiased for any model that did
    not train on the audit labels, the current one included.

    Parameters
    ----------
    pool_size : int
        Rows in the pool, ``>= 2``.
    share : float, default=0.2
        In ``(0, 1)``; ``round(share * pool_size)`` positions, at least 1 and at
        most ``pool_size - 1``.
    random_state : int, RandomState or None

    Returns
    -------
    ndarray of int, sorted

    Raises
    ------
    ValueError
        If ``pool_size`` is not an int ``>= 2`` or ``share`` is outside ``(0, 1)``.

    Examples
    --------
    >>> from skdbal.accuracy_monitor import reservoir
    >>> kept = reservoir(10, share=0.3, random_state=0)
    >>> len(kept), bool((kept[1:] > kept[:-1]).all()), bool(kept.max() < 10)
    (3, True, True)
    """
    size = reservoir_size(pool_size, share)
    rng = random_state if isinstance(random_state, np.random.RandomState) else np.random.RandomState(random_state)
    return np.sort(rng.choice(pool_size, size=size, replace=False)).astype(np.intp)


def reservoir_size(pool_size: int, share: float = 0.2) -> int:
    """The rows :func:`reservoir` sets aside: ``round(share * pool_size)``, at least 1 and at most ``pool_size - 1``.

    Parameters
    ----------
    pool_size : int
        Rows in the pool, ``>= 2``.
    share : float, default=0.2
        In ``(0, 1)``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``pool_size`` is not an int ``>= 2`` or ``share`` is outside ``(0, 1)``.

    Examples
    --------
    >>> from skdbal.accuracy_monitor import reservoir_size
    >>> reservoir_size(290), reservoir_size(2, 0.9), reservoir_size(10, 0.01)
    (58, 1, 1)
    """
    pool_size = _count(pool_size, "pool_size", 2)
    if isinstance(share, bool) or not isinstance(share, (int, float, np.floating)) or not 0 < share < 1:
        raise ValueError(f"share must be a number in (0, 1), e.g. 0.2; got {share!r}")
    return min(pool_size - 1, max(1, int(round(share * pool_size))))


# ---------------------------------------------------------------------------------------------------------------
# the monitor

@dataclass
class _Batch:
    k: int
    q: Optional[np.ndarray]
    n_candidates: Optional[int]
    n_unlabelled: Optional[int]
    chooser: Hashable
    correct: Dict[Hashable, np.ndarray] = field(default_factory=dict)


class AccuracyMonitor:
    """Accuracy estimates that follow an active learning run, fed one labelled batch at a time.

    Feed it, after each step:

    - :meth:`observe` with the batch just labelled: whether the model that
      chose it (the previous model) guessed each label right, the
      probability each draw had (``q`` or ``log_q``, e.g. a stochastic
      batch's ``info["draw_log_q"]``; None for a top-k batch) and the number
      of candidates the batch was drawn from;
    - :meth:`audit` with audit labels drawn from the :func:`reservoir`, if any.

    Then ask:

    - :meth:`previous_model`: the model that chose the last batch. For a
      stochastic batch, unbiased: the LURE estimate of its accuracy on the
      pool still unlabelled, stratified over every batch that model judged
      (:func:`stratified_lure_risk`), with the Kish–Wilson interval
      (``method="stratified-lure-kish-wilson"``). For a top-k batch no
      unbiased estimate exists: the share of the last ``window`` batches
      guessed right by the model of their time, ``biased=True``
      (``method="prequential-biased"``).
    - :meth:`current_model`: the model just retrained, through its
      disagreement with the previous one on unlabelled rows: the previous
      model's interval widened by ``D⁺`` on each side (``method="bridge-..."``).
      A conservative bound, usually far wider than the truth needs.
    - :meth:`audit_estimate`: the current model on the audit labels, LURE
      over all audit draws (unbiased, ``method="audit-lure-kish-wilson"``).
    - :meth:`estimate`: the one to show for the current model (the audit's,
      else the bridge, else the previous model's), and
      :func:`journal_fields` to write it as a journal row's ``estimate_*``.

    Parameters
    ----------
    window : int, default=3
        Top-k batches pooled by the biased prequential estimate.
    confidence : float, default=0.95
    audit_share : float, default=0.0
        For a caller that buys audits (:class:`~skdbal.loop.ActiveLearningLoop`):
        the share of the labels paid after the initial set that go to the
        audit, in ``[0, 1)``; 0 buys none. The monitor itself only records
        the audits it is given.
    audit_proposal : {"uniform", "active"}, default="uniform"
        How audit rows are drawn from the reservoir
        (:func:`~skdbal.audit.draw_audit`): uniformly, or by active testing
        (more often where the model is unsure).
    reservoir_share : float, default=0.2
        The share of the pool outside the initial set kept aside for audits
        (:func:`reservoir`), in ``(0, 1)``; used with ``audit_share > 0``.
    audit_epsilon : float, default=0.1
        The active proposal's uniform share, in ``(0, 1]``.

    Attributes
    ----------
    n_batches : int
        Batches observed.
    n_audit : int
        Audit labels observed.
    followed : list
        The keys of the models whose records are still open, oldest first.

    Notes
    -----
    A label tests honestly only the models fitted before it arrived. Each
    batch is judged by the model that chose it; a model that keeps choosing
    batches (a labelling session retraining every few batches: pass the same
    ``model`` key) gathers them all into its estimate, and an older model
    can judge later batches too (``older``), for the bridge to start from a
    model with more labels behind it. A batch drawn from candidates that
    are not the previous population less the previous batch (rows skipped,
    pending or removed) starts a model's record afresh, since the losses of
    the rows that left are unknown. Bad input raises a ``ValueError`` naming
    the argument and leaves the monitor as it was.

    Examples
    --------
    Ten unlabelled rows. The first model draws two of them with known
    probabilities (1/5, then 1/4 of the rest) and guesses the first right.
    LURE gives the second a weight of 4/9, so a risk of 2/9 on the ten rows;
    less the one error now known, ``(10 * 2/9 - 1) / 8 = 11/72`` on the eight
    rows left:

    >>> from skdbal.accuracy_monitor import AccuracyMonitor
    >>> monitor = AccuracyMonitor()
    >>> monitor.observe([1, 0], q=[1/5, 1/4], n_candidates=10)
    >>> e = monitor.previous_model()
    >>> round(e.accuracy, 4), e.method, e.biased
    (0.8472, 'stratified-lure-kish-wilson', False)

    The model retrains; on 20 unlabelled rows it disagrees with the previous
    model once, so its accuracy lies in a wider interval:

    >>> b = monitor.current_model([0] * 20, [0] * 19 + [1])
    >>> bool(b.low < e.low and b.high >= e.high), b.method
    (True, 'bridge-stratified-lure-kish-wilson')

    A top-k batch (no probabilities) gives only a biased estimate: the share
    of the last ``window`` batches each model guessed right, 3 of 5:

    >>> monitor.observe([1, 1, 0], n_candidates=8)
    >>> e = monitor.previous_model()
    >>> round(e.accuracy, 4), e.biased
    (0.6, True)
    """

    def __init__(self, window: int = 3, confidence: float = 0.95, *, audit_share: float = 0.0,
                 audit_proposal: str = "uniform", reservoir_share: float = 0.2, audit_epsilon: float = 0.1):
        self.window = check_positive_int(window, "window")
        wilson_interval(0.5, 1.0, confidence)  # checks confidence
        self.confidence = float(confidence)
        self.audit_share = _share(audit_share, "audit_share", 0, 1, "[0, 1) (the share of the labels paid that "
                                  "go to the audit; 0 for none)")
        if audit_proposal not in PROPOSALS:
            raise ValueError(f"audit_proposal must be one of {list(PROPOSALS)}; got {audit_proposal!r}")
        self.audit_proposal = audit_proposal
        self.reservoir_share = _share(reservoir_share, "reservoir_share", 0, 1, "(0, 1), e.g. 0.2", low_open=True)
        self.audit_epsilon = _share(audit_epsilon, "audit_epsilon", 0, 1, "(0, 1]", low_open=True, high_closed=True)
        self._batches: List[_Batch] = []
        self._records: Dict[Hashable, int] = {}     # model key -> first batch of its unbroken record
        self._audit_correct = np.zeros(0)
        self._audit_q = np.zeros(0)
        self._n_reservoir: Optional[int] = None

    # -- feeding ---------------------------------------------------------------------------------------------------

    @property
    def n_batches(self) -> int:
        return len(self._batches)

    @property
    def n_audit(self) -> int:
        return len(self._audit_correct)

    @property
    def followed(self) -> list:
        """The keys of the models still followed (each judged every batch since its first), oldest first."""
        return list(self._records)

    def observe(self, correct, q=None, n_candidates: Optional[int] = None, *, log_q=None,
                n_unlabelled: Optional[int] = None, model: Optional[Hashable] = None,
                older: Optional[Mapping[Hashable, Sequence]] = None) -> None:
        """Record the batch just labelled, judged by the model that chose it.

        Parameters
        ----------
        correct : array-like of shape (k,)
            1 (True) where the model that chose the batch, before it retrained
            on it, guessed the label right; in the order drawn.
        q : array-like of shape (k,), optional
            The probability each draw had among the candidates left (in
            ``(0, 1]``); None for a top-k batch, or an unknown draw.
        n_candidates : int, optional
            The candidates the batch was drawn from; needed with ``q``.
        log_q : array-like of shape (k,), optional
            ``log q`` instead of ``q`` (a stochastic batch's ``info["draw_log_q"]``).
        n_unlabelled : int, optional
            The unlabelled rows the candidates were a uniform subsample of
            (a ``pool_subsample``); ``n_candidates`` by default.
        model : hashable, optional
            A key for the model that chose the batch; the same key on
            consecutive batches means the same fitted model. By default each
            batch has a model of its own (a loop that retrains every step).
        older : mapping, optional
            ``{key: correct}``: the same batch judged by earlier models still
            followed (:attr:`followed`). An earlier model not judged here is
            no longer followed.

        Notes
        -----
        A batch labelled in part can be fed as the labelled prefix of its
        draws, in the order drawn (a prefix of a sequential draw is one);
        labels skipped in the middle depend on the items, and bias the
        estimate.

        Raises
        ------
        ValueError
            Naming the argument at fault; the monitor is left as it was.
        """
        c = _correct(correct)
        k = len(c)
        qq = _draw_q(q, log_q, k)
        if n_candidates is not None:
            n_candidates = _count(n_candidates, "n_candidates", k)
        if qq is not None and n_candidates is None:
            raise ValueError("n_candidates, the number of rows the batch was drawn from, is needed with q")
        if n_unlabelled is not None:
            n_unlabelled = _count(n_unlabelled, "n_unlabelled", max(k, n_candidates or 0))
        elif n_candidates is not None:
            n_unlabelled = n_candidates
        judged = {}
        for key, values in (older or {}).items():
            if key not in self._records:
                raise ValueError(f"older names the model {key!r}, which the monitor does not follow "
                                 f"(followed: {list(self._records)})")
            judged[key] = _correct(values, f"older[{key!r}]")
            if len(judged[key]) != k:
                raise ValueError(f"older[{key!r}] must hold one entry per label ({k}); got {len(judged[key])}")
        try:
            hash(model)
        except TypeError:
            raise ValueError(f"model must be a hashable key (a version number, a name); got {model!r}") from None
        key = ("batch", self.n_batches) if model is None else model
        if model is None and key in self._records:      # a key given by hand that looks like ours
            raise ValueError(f"model: the default key {key!r} is taken; name the model")
        if key in judged:
            raise ValueError(f"model {key!r} chose the batch; give its guesses as correct, not in older")
        judged[key] = c
        # all checks passed: change the state
        batch = _Batch(k, qq, n_candidates, n_unlabelled, key, judged)
        previous = self._batches[-1] if self._batches else None
        chained = previous is not None and previous.n_unlabelled is not None and n_unlabelled is not None \
            and n_unlabelled == previous.n_unlabelled - previous.k
        index = len(self._batches)
        self._batches.append(batch)
        self._records = {m: (start if chained else index) for m, start in self._records.items() if m in judged}
        self._records.setdefault(key, index)

    def audit(self, correct, q=None, n_reservoir: Optional[int] = None, *, log_q=None) -> None:
        """Record audit labels drawn from the reservoir, judged by the current model.

        All audit draws of a run form one sequence without replacement over
        the reservoir, so ``q`` is the probability each had among the
        reservoir rows not yet audited: ``1 / (rows left)`` for a uniform
        draw (the default when ``q`` is None), or an active-testing
        proposal's. After the model retrains, give its guesses on every audit
        label with :meth:`rejudge_audit`.

        Parameters
        ----------
        correct : array-like of shape (k,)
            1 (True) where the current model guessed the audit label right, in
            the order drawn.
        q : array-like of shape (k,), optional
            Each draw's probability; uniform when None.
        n_reservoir : int
            The size of the reservoir (all of it, audited or not); the same
            at every call.
        log_q : array-like of shape (k,), optional
            ``log q`` instead of ``q``.

        Raises
        ------
        ValueError
            Naming the argument at fault; the monitor is left as it was.
        """
        c = _correct(correct)
        k = len(c)
        qq = _draw_q(q, log_q, k)
        if n_reservoir is None:
            raise ValueError("n_reservoir, the size of the reservoir the audit draws from, is needed")
        n_reservoir = _count(n_reservoir, "n_reservoir", 1)
        if self._n_reservoir is not None and n_reservoir != self._n_reservoir:
            raise ValueError(f"n_reservoir must stay {self._n_reservoir} (the reservoir is fixed); got {n_reservoir}")
        done = self.n_audit
        if done + k > n_reservoir:
            raise ValueError(f"n_reservoir ({n_reservoir}) is smaller than the {done + k} audit labels drawn")
        if qq is None:
            qq = 1.0 / (n_reservoir - done - np.arange(k, dtype=np.float64))
        self._n_reservoir = n_reservoir
        self._audit_correct = np.concatenate([self._audit_correct, c])
        self._audit_q = np.concatenate([self._audit_q, qq])

    def rejudge_audit(self, correct) -> None:
        """Replace the audit labels' guesses by the current model's, after it retrained.

        Parameters
        ----------
        correct : array-like of shape (n_audit,)
            1 (True) where the current model guesses each audit label right, in
            the order the labels were drawn.

        Raises
        ------
        ValueError
            If the length is not :attr:`n_audit` or an entry is not 0/1; the
            monitor is left as it was.
        """
        c = _correct(correct)
        if len(c) != self.n_audit:
            raise ValueError(f"correct must hold one entry per audit label ({self.n_audit}); got {len(c)}")
        self._audit_correct = c

    # -- estimates -------------------------------------------------------------------------------------------------

    def _chooser(self, model):
        if not self._batches:
            raise ValueError("no batch observed yet")
        key = self._batches[-1].chooser if model is None else model
        if key not in self._records:
            raise ValueError(f"model {key!r} is not followed (followed: {list(self._records)})")
        return key

    def _previous(self, model, confidence: float) -> AccuracyEstimate:
        key = self._chooser(model)
        record = self._batches[self._records[key]:]
        first = next((i for i, b in enumerate(record) if b.q is not None), None)
        if first is None:
            if model is not None:
                raise ValueError(f"model {key!r} judged no batch drawn with known probabilities; only the "
                                 "biased prequential estimate (model=None) is left")
            return prequential_accuracy([b.correct[b.chooser] for b in self._batches], self.window, confidence)
        strata = record[first:]
        risk, weights = stratified_lure_risk([1.0 - b.correct[key] for b in strata], [b.q for b in strata],
                                             [b.n_candidates for b in strata], [b.n_unlabelled for b in strata],
                                             return_weights=True)
        acc = float(np.clip(1.0 - risk, 0.0, 1.0))
        n_eff = max(1.0, effective_sample_size(np.concatenate(weights)))
        low, high = wilson_interval(acc, n_eff, confidence)
        n_left = int(strata[-1].n_unlabelled or 0) - strata[-1].k
        n_labels = int(sum(b.k for b in strata if b.q is not None))
        return AccuracyEstimate(acc, float(low), float(high), n_labels, "stratified-lure-kish-wilson", False,
                                f"the {n_left} rows still unlabelled, for the model that chose the last batch",
                                float(confidence), n_eff)

    def previous_model(self, model: Optional[Hashable] = None) -> AccuracyEstimate:
        """The accuracy of the model that chose the last batch (or of ``model``), from the batches it judged.

        Parameters
        ----------
        model : hashable, optional
            A followed model's key; the last batch's chooser by default.

        Returns
        -------
        AccuracyEstimate
            Unbiased (``"stratified-lure-kish-wilson"``) when the model judged
            a batch drawn with known probabilities; otherwise the biased
            prequential share of the last ``window`` batches
            (``"prequential-biased"``, only for the default ``model``).

        Raises
        ------
        ValueError
            Before any batch, for a model not followed, or when no row is left.
        """
        return self._previous(model, self.confidence)

    def current_model(self, pred_previous, pred_current, *, model: Optional[Hashable] = None,
                      whole_pool: bool = False) -> AccuracyEstimate:
        """The current model's accuracy, bridged from the previous model's through their disagreement.

        ``|acc(f) - acc(g)| <= P(f != g)``: with ``[lo, hi]`` the previous
        model's interval and ``D⁺`` an upper bound on the share of unlabelled
        rows where the two models disagree, the current model's accuracy lies
        in ``[lo - D⁺, hi + D⁺]``. ``D⁺`` is the Clopper–Pearson upper bound
        of the disagreements seen on the sample (one-sided, at level
        ``1 - α/2``), and ``[lo, hi]`` is taken at level ``1 - α/2`` too
        (Bonferroni), so the bound holds at ``confidence`` whenever the
        previous interval does. It is conservative: the bound assumes every
        disagreement goes one way. The point estimate stays the previous
        model's.

        Parameters
        ----------
        pred_previous, pred_current : array-like of shape (n,)
            The previous and current models' predicted classes on the same
            unlabelled rows, a uniform sample of the pool (a fixed stop set).
        model : hashable, optional
            The earlier model to bridge from; the last batch's chooser by default.
        whole_pool : bool, default=False
            The rows are every unlabelled row, so the disagreement is exact.

        Returns
        -------
        AccuracyEstimate
            ``method="bridge-" + the previous estimate's method``; biased as it is.

        Raises
        ------
        ValueError
            For predictions of different or zero lengths, or as :meth:`previous_model`.
        """
        whole_pool = check_bool(whole_pool, "whole_pool")
        a = np.asarray(pred_previous)
        b = np.asarray(pred_current)
        if a.ndim != 1 or a.shape != b.shape or not len(a):
            raise ValueError(f"pred_previous and pred_current must be non-empty and of one length; got shapes "
                             f"{a.shape} and {b.shape}")
        alpha = 1.0 - self.confidence
        before = self._previous(model, 1.0 - alpha / 2)
        d = int(np.sum(a != b))
        d_plus = d / len(a) if whole_pool else float(clopper_pearson_interval(d, len(a), self.confidence)[1])
        low, high = max(0.0, before.low - d_plus), min(1.0, before.high + d_plus)
        return AccuracyEstimate(before.accuracy, low, high, before.n_labels, "bridge-" + before.method, before.biased,
                                f"{before.population}, bridged to the current model (disagreement at most "
                                f"{d_plus:.3f} on {len(a)} rows; a conservative bound)", self.confidence,
                                before.n_effective)

    def estimate(self, pred_previous=None, pred_current=None, *, whole_pool: bool = False) -> AccuracyEstimate:
        """The estimate to show for the current model: the audit's, else the bridge, else the previous model's.

        - Audit labels seen: :meth:`audit_estimate` (unbiased for the current
          model, whose guesses they must hold).
        - Otherwise, the two models' predictions on unlabelled rows given:
          :meth:`current_model` (a conservative bound).
        - Otherwise :meth:`previous_model`: the model one step old, which the
          result's ``population`` says.

        Parameters
        ----------
        pred_previous, pred_current : array-like of shape (n,), optional
            As in :meth:`current_model`; both or neither.
        whole_pool : bool, default=False

        Returns
        -------
        AccuracyEstimate

        Raises
        ------
        ValueError
            With one of the predictions only, or as the method chosen.

        Examples
        --------
        >>> from skdbal.accuracy_monitor import AccuracyMonitor
        >>> monitor = AccuracyMonitor()
        >>> monitor.observe([1, 0, 1, 1])
        >>> monitor.estimate().method, monitor.estimate([0, 1], [0, 1]).method
        ('prequential-biased', 'bridge-prequential-biased')
        >>> monitor.audit([1, 1, 1, 0, 1], n_reservoir=50)
        >>> e = monitor.estimate([0, 1], [0, 1])
        >>> e.accuracy, e.method, e.biased
        (0.8, 'audit-lure-kish-wilson', False)
        """
        if (pred_previous is None) != (pred_current is None):
            raise ValueError("give pred_previous and pred_current together, or neither")
        if self.n_audit:
            return self.audit_estimate()
        if pred_previous is not None:
            return self.current_model(pred_previous, pred_current, whole_pool=whole_pool)
        return self.previous_model()

    def audit_estimate(self) -> AccuracyEstimate:
        """The current model's accuracy on the reservoir, from every audit label: unbiased.

        LURE over all audit draws, one sequence over the reservoir (uniform
        draws have weight 1, so a uniform audit gives the plain mean with
        Wilson's interval), with the Kish–Wilson interval. The guesses must be
        the current model's (:meth:`rejudge_audit` after a retrain).

        Returns
        -------
        AccuracyEstimate
            ``method="audit-lure-kish-wilson"``, ``biased=False``.

        Raises
        ------
        ValueError
            Before any audit label.
        """
        if not self.n_audit:
            raise ValueError("no audit label observed yet")
        e = estimate_accuracy(self._audit_correct, self._audit_q, self._n_reservoir, self.confidence,
                              population=f"the {self._n_reservoir} rows of the audit reservoir")
        return AccuracyEstimate(e.accuracy, e.low, e.high, e.n_labels, "audit-" + e.method, False, e.population,
                                e.confidence, e.n_effective)



def journal_fields(estimate: Optional[AccuracyEstimate]) -> Dict[str, object]:
    """An estimate as the journal's ``estimate_*`` columns (all None when there is no estimate yet).

    Parameters
    ----------
    estimate : AccuracyEstimate or None

    Returns
    -------
    dict
        ``estimate_acc``, ``estimate_lo``, ``estimate_hi``, ``estimate_kind``
        (the ``method``), ``estimate_biased`` and ``estimate_n`` (the labels
        behind it).

    Examples
    --------
    >>> from skdbal.accuracy_monitor import AccuracyMonitor, journal_fields
    >>> monitor = AccuracyMonitor()
    >>> monitor.observe([1, 1, 0, 1])                       # a top-k batch
    >>> row = journal_fields(monitor.previous_model())
    >>> row["estimate_acc"], row["estimate_kind"], row["estimate_biased"], row["estimate_n"]
    (0.75, 'prequential-biased', True, 4)
    >>> journal_fields(None)["estimate_acc"] is None
    True
    """
    if estimate is None:
        return dict.fromkeys(("estimate_acc", "estimate_lo", "estimate_hi", "estimate_kind", "estimate_biased",
                              "estimate_n"))
    if not isinstance(estimate, AccuracyEstimate):
        raise TypeError(f"estimate must be an AccuracyEstimate or None; got {type(estimate).__name__}")
    return {"estimate_acc": float(estimate.accuracy), "estimate_lo": float(estimate.low),
            "estimate_hi": float(estimate.high), "estimate_kind": estimate.method,
            "estimate_biased": bool(estimate.biased), "estimate_n": int(estimate.n_labels)}
