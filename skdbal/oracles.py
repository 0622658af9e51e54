"""Oracles: who answers the learner's queries.

An oracle is asked for the labels of pool positions (:meth:`Oracle.request`)
and hands back whatever answers it has (:meth:`Oracle.collect`), as
:class:`Answer` records. The loop (:class:`skdbal.loop.ActiveLearningLoop`)
knows nothing else about it, so the same loop runs against

- :class:`KnownLabels`: labels known in advance (a simulation); every
  request is answered at once;
- :class:`NoisyAnnotator`: a fixed annotator who gives a flipped label for
  some points, always the same one (:func:`skdbal.datasets.make_noisy_labels`),
  with the true labels kept for the report;
- people (a labelling session): answers arrive later, in any order, some are
  skipped (``label=None``) and some change a label given before. The
  protocol is shaped for them: ``collect`` returns what has come back, and
  the loop waits on :meth:`Oracle.collect` only as long as the oracle says.

Answers carry the annotator and the time they were given, so that the
learner's label log records who labelled what, and when.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass
from typing import Any, List, Optional

import numpy as np

__all__ = ["Answer", "Oracle", "KnownLabels", "NoisyAnnotator"]


@dataclass(frozen=True)
class Answer:
    """One answer of an oracle.

    Attributes
    ----------
    position : int
        The pool position the answer is about.
    label : object or None
        The label, or ``None`` if the annotator skipped the point.
    annotator : str or None
        Who answered.
    time : float or None
        When, in seconds since the epoch.
    retract : bool, default=False
        The row's label is withdrawn (an undone label with none before it):
        the row is unlabelled again.

    Examples
    --------
    >>> from skdbal.oracles import Answer
    >>> Answer(7, None, "ann").skipped, Answer(7, "cat", "ann").skipped
    (True, False)
    """

    position: int
    label: Any
    annotator: Optional[str] = None
    time: Optional[float] = None
    retract: bool = False

    @property
    def skipped(self) -> bool:
        """Whether the annotator declined to label the point."""
        return self.label is None and not self.retract


class Oracle:
    """The protocol of an oracle (subclass it, or provide the same methods).

    The loop calls :meth:`request` with the positions it has queried, then
    :meth:`collect` for the answers. ``collect`` may return fewer answers
    than were requested (people label later), answers about positions
    requested in earlier rounds, and answers that change an earlier label.
    Positions that are still unanswered stay pending: the loop does not
    query them again.

    Examples
    --------
    A slow annotator who answers one request per call, and skips odd
    positions:

    >>> from skdbal.oracles import Answer, Oracle
    >>> class OneAtATime(Oracle):
    ...     annotator = "slow"
    ...     def __init__(self, y):
    ...         self.y, self.queue = y, []
    ...     def request(self, positions):
    ...         self.queue.extend(int(p) for p in positions)
    ...     def collect(self, pending):
    ...         if not self.queue:
    ...             return []
    ...         p = self.queue.pop(0)
    ...         return [Answer(p, None if p % 2 else self.y[p], self.annotator)]
    >>> oracle = OneAtATime([5, 6, 7, 8])
    >>> oracle.request([3, 2])
    >>> [(a.position, a.label) for a in oracle.collect([3, 2]) + oracle.collect([2])]
    [(3, None), (2, 7)]
    """

    #: Name recorded with each answer.
    annotator: Optional[str] = None

    def request(self, positions: np.ndarray) -> None:  # pragma: no cover - protocol
        """Ask for the labels of these pool positions."""
        raise NotImplementedError

    def collect(self, pending: np.ndarray) -> List[Answer]:  # pragma: no cover - protocol
        """The answers that have come back since the last call.

        Parameters
        ----------
        pending : ndarray of int
            The positions requested and not answered yet; an oracle that
            waits for people may block until they are answered, or until
            its own timeout.
        """
        raise NotImplementedError

    def pool_labels(self) -> Optional[np.ndarray]:
        """The labels it would give every pool row, if known in advance, else ``None``.

        A simulated oracle knows them; the loop passes them to the strategy
        as ``y_pool`` (what :func:`~skdbal.acquisition.noise_filter` needs,
        Anonymous, n.d., §5.1). People do not.
        """
        return None


class KnownLabels(Oracle):
    """An oracle that knows every label: it answers each request at once.

    Parameters
    ----------
    y : array-like of shape (N,) or (N, n_outputs)
        The label of every pool row.
    annotator : str, default="known"
        Name recorded with each answer.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.oracles import KnownLabels
    >>> oracle = KnownLabels(np.array([3, 1, 4, 1, 5]))
    >>> oracle.request(np.array([4, 0]))
    >>> [(a.position, int(a.label)) for a in oracle.collect(np.array([4, 0]))]
    [(4, 5), (0, 3)]
    """

    def __init__(self, y, *, annotator: str = "known"):
        self.y = np.asarray(y)
        self.annotator = annotator
        self._requested: List[int] = []

    def request(self, positions) -> None:
        positions = np.asarray(positions, dtype=np.intp).reshape(-1)
        if len(positions) and (positions.min() < 0 or positions.max() >= len(self.y)):
            raise ValueError(f"positions must lie in [0, {len(self.y)}); got "
                             f"[{positions.min()}, {positions.max()}]")
        self._requested.extend(positions.tolist())

    def collect(self, pending=None) -> List[Answer]:
        now = _time.time()
        answers = [Answer(p, self.y[p], self.annotator, now) for p in self._requested]
        self._requested = []
        return answers

    def pool_labels(self) -> np.ndarray:
        return self.y


class NoisyAnnotator(KnownLabels):
    """A fixed annotator who gives wrong labels for some points (label noise).

    The annotator's labels are fixed once: asked twice about a point, it
    gives the same label. The true labels are kept, so that a report can
    count the flipped labels that were acquired or rejected.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        The true labels.
    y_given : array-like of shape (N,)
        The labels the annotator gives (see :meth:`flip`).
    annotator : str, default="noisy"

    Attributes
    ----------
    flipped : ndarray of bool, shape (N,)
        Where the annotator's label is not the true one.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.oracles import NoisyAnnotator
    >>> y = np.arange(10) % 3
    >>> oracle = NoisyAnnotator.flip(y, 0.5, random_state=0, clean=[0, 1])
    >>> bool(oracle.flipped[[0, 1]].any()), int(oracle.flipped.sum()) > 0
    (False, True)
    >>> oracle.request([2]); bool(oracle.collect([2])[0].label == oracle.y[2])
    True
    """

    def __init__(self, y_true, y_given, *, annotator: str = "noisy"):
        y_true, y_given = np.asarray(y_true), np.asarray(y_given)
        if y_true.shape != y_given.shape:
            raise ValueError(f"y_true and y_given have different shapes: {y_true.shape} and {y_given.shape}")
        super().__init__(y_given, annotator=annotator)
        self.y_true = y_true
        self.flipped = y_given != y_true

    @classmethod
    def flip(cls, y_true, noise_rate: float, *, classes=None, random_state=None, clean=None,
             annotator: str = "noisy") -> "NoisyAnnotator":
        """An annotator that flips a ``noise_rate`` share of labels to another class.

        Parameters
        ----------
        y_true : array-like of shape (N,)
        noise_rate : float
            Share of points whose label is flipped
            (:func:`skdbal.datasets.make_noisy_labels`).
        classes : array-like, optional
            The classes to flip to; by default those in ``y_true``.
        random_state : int, RandomState instance or None
        clean : array-like of int, optional
            Positions labelled correctly whatever the draw (the initial set
            of a noise experiment, as in Anonymous, n.d., §5.1).
        annotator : str, default="noisy"
        """
        from .datasets import make_noisy_labels

        y_true = np.asarray(y_true)
        classes = np.unique(y_true) if classes is None else classes
        y_given, _ = make_noisy_labels(y_true, noise_rate, classes=classes, random_state=random_state)
        if clean is not None:
            clean = np.asarray(clean, dtype=np.intp)
            y_given[clean] = y_true[clean]
        return cls(y_true, y_given, annotator=annotator)
