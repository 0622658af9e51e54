"""Documented experiment protocols, every number a field.

``gal2017`` follows Gal et al. (2017, §5.1) [1]_ as in their Keras code,
``pilz2025`` the reproduction of Pilz (2025, §3.1) [2]_, ``kirsch2019``
the training of Kirsch et al. (2019) [3]_ on Gal's acquisition protocol.

References
----------
.. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
   with image data", ICML 2017, arXiv:1703.02910.
.. [2] P. Pilz, "Deep active learning for image data", preprint (Practical
   Work in AI, Institute for Machine Learning, Johannes Kepler University
   Linz), 2025.
.. [3] A. Kirsch, J. van Amersfoort and Y. Gal, "BatchBALD: efficient and
   diverse batch acquisition for deep Bayesian active learning", NeurIPS
   2019, arXiv:1906.08158.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Optional, Tuple

__all__ = ["Preset", "PRESETS", "get_preset"]


_DATASETS = ("mnist", "repeated_mnist", "fashion_mnist", "digits")
#: Optimizer names a preset accepts, and the ``torch.optim`` class each names
#: (by name: this module does not import torch).
OPTIMIZER_CLASSES = {"adam": "Adam", "adamw": "AdamW"}
_OPTIMIZERS = tuple(OPTIMIZER_CLASSES)
_SELECTIONS = ("last", "best_valid_loss", "early_stopping")
_EVAL_METHODS = ("deterministic", "mc")
_BATCH_SPLITS = ("fixed", "even")
#: Integer fields and their smallest allowed value.
_INT_FIELDS = {"n_initial_per_class": 1, "n_validation": 0, "pool_size": 1, "pool_subsample": 1, "n_queries": 0,
               "n_instances": 1, "max_epochs": 1, "batch_size": 1, "epoch_samples": 1, "n_samples": 1, "patience": 1,
               "n_test": 1, "warm_epochs": 1}
#: Float fields and their smallest allowed value.
_FLOAT_FIELDS = {"lr": 0.0, "weight_decay": 0.0, "scaled_l2": 0.0, "last_layer_noise_variance": 0.0,
                 "last_layer_prior_variance": 0.0}
#: Float fields that must be strictly above it.
_POSITIVE = ("lr", "last_layer_noise_variance", "last_layer_prior_variance")
#: Fields that may be None.
_OPTIONAL = ("pool_size", "pool_subsample", "batch_size", "epoch_samples", "n_test", "scaled_l2", "warm_epochs")
#: Bool fields: True or False only (a string such as "false" would be truthy).
BOOL_FIELDS = ("last_layer_fit_hyperparameters", "monitor")
#: Opt-in fields that add columns to a run's rows and leave the rest of them as they were: left out of
#: :meth:`Preset.as_dict` while they hold their defaults, so that a run without them records the configuration
#: it recorded before they existed.
WATCH_FIELDS = {"stopping": (), "monitor": False}
#: skdbal.models._mc_masks.MASK_SEEDINGS (this module imports neither torch nor numpy; a test keeps them equal).
_MASK_SEEDINGS = ("row_pcg64", "row", "stream", "row_philox")


def _np_bool():
    """numpy's bool type, when numpy is imported (this module does not import it)."""
    import sys

    numpy = sys.modules.get("numpy")
    return numpy.bool_ if numpy is not None else bool


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {value!r}")


def _check_number(name, value, low, *, integer, optional, strict=False):
    """``value`` as a plain int/float (numpy scalars included, so that the
    stored configuration compares equal), after checking type and range."""
    if value is None and optional:
        return None
    kinds = (numbers.Integral,) if integer else (numbers.Real,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {kind}{' or None' if optional else ''}; got {value!r}")
    value = int(value) if integer else float(value)
    if not math.isfinite(value) or value < low or (strict and value == low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}; got {value!r}")
    return value


@dataclass(frozen=True)
class Preset:
    """Every number of an active-learning protocol, as a parameter.

    Attributes
    ----------
    name : str
    dataset : {"mnist", "repeated_mnist", "fashion_mnist", "digits"}
        ``"repeated_mnist"`` is Kirsch et al.'s Repeated-MNIST: every training
        image 3 times with Gaussian noise of std ``0.1 · 0.3081`` on pixels
        in [0, 1] (:func:`skdbal.datasets.make_repeated`; the test set is
        MNIST's). ``"fashion_mnist"`` is Fashion-MNIST, the same sizes as
        MNIST (:func:`skdbal.datasets.load_fashion_mnist`). ``"digits"`` (scikit-learn's 8×8, 500 test images) is for
        smoke tests.
    module : str
        A network in :mod:`skdbal.models`.
    module_params : tuple of (str, value) pairs
        Extra network parameters.
    n_initial_per_class : int
        Balanced initial labelled set.
    n_validation : int
        Held out of the pool; used for model selection when
        ``selection="best_valid_loss"``.
    pool_size : int or None
        Cap on the pool (after the validation split); None: the rest of the
        training set.
    pool_subsample : int or None
        Points scored per step (a fresh random subset each step).
    n_queries, n_instances : int
        Acquisition steps, and points acquired per step.
    max_epochs : int
    batch_size : int or None
        None: full batch.
    batch_split : {"fixed", "even"}
        ``"fixed"``: mini-batches of ``batch_size`` with a partial last one
        (the Keras and skorch default, and Gal's code). ``"even"``: the same
        number of batches, ``ceil(N / batch_size)``, of nearly equal size, so
        there is no tiny last batch (130 labels: 65 + 65 instead of
        128 + 2). Adam takes as large a step on a 2-image batch as on a full
        one, and with few labels that step is a large share of training: see
        docs/results/README.md.
    epoch_samples : int or None
        Draws per epoch (:class:`skdbal.models.FixedLengthLoader`): with
        fewer labels than this, an epoch repeats the labelled set in random
        order up to ``epoch_samples`` draws, so that the amount of training
        does not shrink with the labelled set (Kirsch et al., 2019). None:
        an epoch is one pass over the labelled set.
    optimizer : {"adam", "adamw"}
    lr, weight_decay : float
        ``weight_decay`` is the optimizer's own, on every parameter.
    scaled_l2 : float or None
        ``c`` of Gal's ``l2(c / N)`` on the dense layer (see
        :class:`skdbal.models.ScaledL2`); None: off.
    n_samples : int
        MC passes ``T`` for acquisition.
    selection : {"last", "best_valid_loss", "early_stopping"}
        Keep the last epoch's weights; those with the lowest loss on the
        validation set over all ``max_epochs``; or stop once the validation
        loss has not improved for ``patience`` epochs and keep the best.
    patience : int
        Epochs without improvement before early stopping.
    eval_method : {"deterministic", "mc"}
        Test accuracy from the weight-scaled pass, or the MC average.
    n_test : int or None
        Evaluate on a seeded random subset of the test set; None: all of it.
    last_layer_noise_variance, last_layer_prior_variance : float
        ``sigma^2`` and ``s^2`` of the Bayesian last layer (Anonymous, n.d.,
        §4), used only by runs with ``last_layer`` (see
        :func:`skdbal.experiments.run_grid`).
    last_layer_fit_hyperparameters : bool
        Fit them per step instead (evidence for analytic, ELBO for mfvi).
    mask_seeding : {"row_pcg64", "row", "stream", "row_philox"}
        How MC-dropout masks are drawn (see
        :class:`~skdbal.MCDropoutClassifier`): per pool row, independent of
        the pool's order and chunking, from numpy's PCG64 (the default,
        results version 4), from torch's generators (results version 3) or
        from the counter-based Philox-4x32-10 on the run's device, the same
        bits on the CPU and CUDA (results version 5); or from one stream per
        call, as every run of results version 2 (before the field existed).
        A grid names one explicitly (not the estimator's ``"auto"``), so its
        rows do not depend on the device it runs on.
    warm_epochs : int or None
        None (Gal's protocol, and every run written before the field
        existed): every step trains from scratch for ``max_epochs``. An int:
        step 0 does, and each later step trains on from the previous step's
        weights (with a fresh optimizer) for ``warm_epochs`` epochs, or until
        ``selection="early_stopping"`` stops it. A step's model then depends
        on every earlier step: a run resumes from its cached weights, or
        replays the earlier steps' training when they are missing.
    stopping : tuple of str
        Stopping rules to record at every step, each named by a spec
        (:mod:`skdbal.experiments.stopping_specs`), e.g.
        ``("stabilizing_predictions", "label_budget(max_labels=200)")``: the
        run's rows get the loop's ``stop_<name>``, ``stop_<name>_value`` and
        ``stop_reason`` columns (several rules: an
        :class:`~skdbal.stopping.AnyOf`, with a pair of columns for each), and
        step 0's row the ``stop_set`` (the training-set indices the rules read
        predictions on). The run goes on to ``n_queries`` whatever they say
        (the loop's ``stop_on="record"``). Empty by default: no such columns.
    monitor : bool
        Record the loop's accuracy estimate at every step
        (:class:`~skdbal.accuracy_monitor.AccuracyMonitor`): the rows get
        ``estimate_acc``, ``estimate_lo``, ``estimate_hi``, ``estimate_kind``,
        ``estimate_biased`` and ``estimate_n``. False by default. Both change
        no other column. A resumed run shows the rules and the monitor its
        last model afresh (the loop's :meth:`~skdbal.loop.ActiveLearningLoop.resume`),
        so their windows restart there and its later ``stop_*`` and
        ``estimate_*`` cells may differ from an uninterrupted run's; the stop
        set is the one step 0 drew.
    notes : str
        A description of the protocol; ignored when presets are compared.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> from skdbal.experiments import Preset, get_preset
    >>> gal = get_preset("gal2017")
    >>> gal.n_queries, gal.n_instances, gal.pool_subsample, gal.n_samples
    (100, 10, 2000, 100)
    >>> short = gal.replace(n_queries=50)              # presets are frozen: change a copy
    >>> short.n_queries, gal.n_queries
    (50, 100)
    >>> Preset(name="mine", dataset="digits", optimizer="sgd")
    Traceback (most recent call last):
        ...
    ValueError: optimizer must be one of ['adam', 'adamw']; got 'sgd'
    """

    name: str
    dataset: str = "mnist"
    module: str = "BayesianCNN"
    module_params: Tuple[Tuple[str, object], ...] = ()
    n_initial_per_class: int = 2
    n_validation: int = 100
    pool_size: Optional[int] = None
    pool_subsample: Optional[int] = 2000
    n_queries: int = 100
    n_instances: int = 10
    max_epochs: int = 50
    batch_size: Optional[int] = 128
    batch_split: str = "fixed"
    epoch_samples: Optional[int] = None
    optimizer: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    scaled_l2: Optional[float] = 3.5
    n_samples: int = 100
    selection: str = "last"
    patience: int = 5
    eval_method: str = "deterministic"
    n_test: Optional[int] = None
    last_layer_noise_variance: float = 0.1
    last_layer_prior_variance: float = 1.0
    last_layer_fit_hyperparameters: bool = False
    mask_seeding: str = "row_pcg64"
    warm_epochs: Optional[int] = None
    stopping: Tuple[str, ...] = ()
    monitor: bool = False
    notes: str = field(default="", compare=False)

    def __post_init__(self):
        _check_choice("dataset", self.dataset, _DATASETS)
        _check_choice("optimizer", self.optimizer, _OPTIMIZERS)
        _check_choice("selection", self.selection, _SELECTIONS)
        _check_choice("eval_method", self.eval_method, _EVAL_METHODS)
        _check_choice("batch_split", self.batch_split, _BATCH_SPLITS)
        _check_choice("mask_seeding", self.mask_seeding, _MASK_SEEDINGS)
        if not isinstance(self.module, str) or not self.module:
            raise TypeError(f"module must be the name of a network in skdbal.models; got {self.module!r}")
        for name in ("name", "notes"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str; got {getattr(self, name)!r}")
        for name in BOOL_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (bool, _np_bool())):
                raise TypeError(f"{name} must be True or False; got {value!r}")
            object.__setattr__(self, name, bool(value))
        params = self.module_params
        if isinstance(params, dict):
            params = tuple(sorted(params.items()))
        if not isinstance(params, (tuple, list)) or not all(
                isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) for p in params):
            raise TypeError("module_params must be a dict of parameter names (str) to values, or a tuple of "
                            f"(name, value) pairs; got {self.module_params!r}")
        object.__setattr__(self, "module_params", tuple((k, v) for k, v in params))
        if self.stopping != ():   # spelt one way (imports the rules, never torch, only when some are named)
            from .stopping_specs import canonical_rules

            object.__setattr__(self, "stopping", canonical_rules(self.stopping))
        for name, low in _INT_FIELDS.items():
            value = _check_number(name, getattr(self, name), low, integer=True, optional=name in _OPTIONAL)
            object.__setattr__(self, name, value)  # frozen dataclass: normalise numpy ints to int
        for name, low in _FLOAT_FIELDS.items():
            value = _check_number(name, getattr(self, name), low, integer=False, optional=name in _OPTIONAL,
                                  strict=name in _POSITIVE)
            object.__setattr__(self, name, value)

    def replace(self, **changes) -> "Preset":
        """A copy with some fields changed; unknown names raise ValueError."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"unknown preset field(s) {unknown}; the fields are "
                             f"{[f.name for f in dataclasses.fields(self)]}")
        if "module_params" in changes and isinstance(changes["module_params"], dict):
            changes["module_params"] = tuple(sorted(changes["module_params"].items()))
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        """The fields as a dict (``module_params`` a dict), leaving out :data:`WATCH_FIELDS` at their defaults.

        Examples
        --------
        >>> from skdbal.experiments import get_preset
        >>> "monitor" in get_preset("gal2017").as_dict(), get_preset("gal2017", monitor=True).as_dict()["monitor"]
        (False, True)
        """
        d = dataclasses.asdict(self)
        d["module_params"] = dict(self.module_params)
        for name, default in WATCH_FIELDS.items():
            if d[name] == default:
                del d[name]
        return d


PRESETS = {
    "gal2017": Preset(
        name="gal2017",
        notes=(
            "Gal, Islam & Ghahramani (2017) §5.1 as in their Keras code: Bayesian CNN, 20 balanced "
            "initial points, 100 validation points held out, the rest of the 60k training set as "
            "pool, 2,000 random pool points scored per step, 100 acquisitions of 10, retrain from "
            "scratch with Adam (lr 1e-3, batch 128, 50 epochs) and l2(3.5/N) on the dense layer, "
            "T=100, deterministic test accuracy on all 10k test images."
        ),
    ),
    "pilz2025": Preset(
        name="pilz2025",
        module="LeNet5",
        n_validation=1000,
        pool_subsample=5000,
        max_epochs=400,
        batch_size=None,
        optimizer="adamw",
        weight_decay=0.01,
        scaled_l2=None,
        n_samples=64,
        selection="best_valid_loss",
        notes=(
            "Pilz's (2025) reproduction: LeNet-5 with dropout, 1,000 validation points for "
            "best-validation-loss selection over 400 full-batch epochs, AdamW (lr 1e-3, weight decay "
            "0.01), 5,000 pool points scored per step, T=64. Pilz tested on 3,000 random test "
            "images; we keep the full 10k test set (set n_test=3000 to match)."
        ),
    ),
    "kirsch2019": Preset(
        name="kirsch2019",
        module="KirschCNN",
        n_queries=30,
        max_epochs=1,
        batch_size=64,
        epoch_samples=24576,
        scaled_l2=None,
        notes=(
            "The training of Kirsch, van Amersfoort & Gal (2019, BatchBALD) on Gal's MNIST protocol: their "
            "CNN (conv 32x5x5 and 64x5x5 with channel dropout, dense 128), Adam (lr 1e-3), batches of 64, "
            "each step trained from scratch on 24,576 draws from the labelled set (4096 x 6, as in the "
            "authors' batchbald_redux example), no validation-based stopping, T=100 for acquisition; 20 "
            "balanced initial points, 2,000 random pool points scored per step, 10 per step, 30 steps; "
            "deterministic (weight-scaled) test accuracy on all 10k test images."
        ),
    ),
    "fewlabels": Preset(
        name="fewlabels",
        n_initial_per_class=1,
        n_queries=29,
        notes=(
            "skdbal's low-budget protocol, for comparing the network on the pixels with a Bayesian head on a "
            "representation (skdbal experiment --representation none pool pca) where few labels are paid for: "
            "gal2017's network and training for the runs on the pixels, 10 balanced initial labels (one per "
            "class), 29 acquisitions of 10, so 300 labels in all with the initial ones counted, 2,000 random pool "
            "points scored per step (TypiClust and ProbCover choose among them too), T=100, deterministic test "
            "accuracy on all 10k test images."
        ),
    ),
}


def get_preset(name, **overrides) -> Preset:
    """A preset by name (or a :class:`Preset`), with fields overridden.

    Examples
    --------
    >>> from skdbal.experiments import get_preset
    >>> p = get_preset("gal2017", n_queries=3, pool_size=200, max_epochs=2)
    >>> (p.n_queries, p.n_samples, p.pool_subsample)
    (3, 100, 2000)
    """
    if isinstance(name, Preset):
        preset = name
    elif name in PRESETS:
        preset = PRESETS[name]
    else:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return preset.replace(**overrides) if overrides else preset
