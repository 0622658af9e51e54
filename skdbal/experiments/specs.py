"""What a grid is made of: one :class:`RunSpec` per run, and the checks made before any runs.

A run is a (preset, strategy, variant, seed) with, where asked, a noise rate
and an initial set; its :attr:`RunSpec.run_id` names its files and
:meth:`RunSpec.config` is the configuration they record. :func:`grid_specs`
checks the arguments of :func:`skdbal.experiments.run_grid` and lists its
runs; :func:`check_sizes` refuses a preset that asks for more than its data
set holds. Nothing here imports torch.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..acquisition import canonical_name, get_strategy
from .presets import Preset

__all__ = ["RunSpec", "LAST_LAYERS"]

#: Last-layer inference variants (Anonymous, n.d., §4; see
#: :class:`skdbal.BayesianLinearRegression`): RunSpec.last_layer.
LAST_LAYERS = ("analytic", "mfvi")

#: Initial labelled sets a run may start from (``RunSpec.initial_set``).
INITIAL_SETS = ("balanced_random", "kmeans_per_class", "kmeans")

#: Bumped whenever a change in skdbal changes the rows a run produces (e.g. how
#: dropout masks are drawn); run files of another version are not resumed.
#: Version 4 draws masks per pool row from numpy's PCG64. A preset with
#: ``mask_seeding="row"`` draws them from torch's generators per row as
#: version 3 did, and one with ``"stream"`` from one stream per call as version
#: 2 did; one with ``"row_philox"`` computes them with Philox-4x32-10 on the
#: device, version 5; their runs carry those versions (see :meth:`RunSpec.config`).
RESULTS_VERSION = 4

#: The results version of each mask seeding other than the default's, kept so that its grids reproduce.
_SEEDING_VERSIONS = {"stream": 2, "row": 3, "row_philox": 5}

#: Strategies whose deterministic (mc_dropout=False) baseline Gal et al. (2017, §5.2) report.
DETERMINISTIC_BASELINE = ("max_entropy", "variation_ratios")


@dataclass(frozen=True)
class RunSpec:
    """One run of a grid.

    Examples
    --------
    >>> from skdbal.experiments import RunSpec, get_preset
    >>> spec = RunSpec(get_preset("gal2017"), "filter(bald,dynamic)", seed=1, noise_rate=0.2)
    >>> spec.run_id                              # the name of its files in runs/
    'gal2017__filter-bald-dynamic__bayesian__seed1__noise0.2'
    >>> RunSpec(get_preset("gal2017"), "bald", 2, initial_set="kmeans_per_class").variant
    'bayesian-init-kmeans_per_class'
    >>> RunSpec(get_preset("gal2017"), "bald", 1, ensemble=5).variant   # 5 deterministic networks
    'ensemble5'
    >>> RunSpec(get_preset("kirsch2019"), "bald", 1, laplace=True).run_id   # a last-layer Laplace posterior
    'kirsch2019__bald__laplace__seed1'
    >>> RunSpec(get_preset("gal2017"), "bald", 1, representation="pool", head="bll").run_id   # a head on embeddings
    'gal2017__bald__pool-bll__seed1'
    """

    preset: Preset
    strategy: str
    seed: int
    mc_dropout: bool = True
    last_layer: Optional[str] = None
    noise_rate: float = 0.0
    initial_set: str = "balanced_random"
    ensemble: int = 0
    laplace: bool = False
    #: ``"none"`` (the network on the pixels), ``"pool"``, ``"pca"`` or ``"file:PATH"``
    #: (:mod:`skdbal.experiments.representations`), with ``head`` over its embeddings.
    representation: str = "none"
    head: str = "mc_dropout"
    #: Passes of a ``"pool"`` representation's encoder over the pool (PoolEncoder's max_epochs).
    encoder_epochs: float = 15.0

    @property
    def variant(self) -> str:
        if self.representation != "none":
            from .representations import representation_label

            base = f"{representation_label(self.representation)}-{self.head}"
        elif self.last_layer is not None:
            base = f"blr_{self.last_layer}"
        elif self.laplace:
            base = "laplace"
        elif self.ensemble:
            base = f"ensemble{self.ensemble}"
        else:
            base = "bayesian" if self.mc_dropout else "deterministic"
        return base if self.initial_set == "balanced_random" else f"{base}-init-{self.initial_set}"

    @property
    def run_id(self) -> str:
        # filter(bald,0.1) -> filter-bald-0.1; a minus sign is spelled out, so diverse(bald,-0.1) and
        # diverse(bald,0.1) get different files (diverse-bald-neg0.1, diverse-bald-0.1)
        strategy = re.sub(r"-(?=[0-9.])", "neg", self.strategy)
        strategy = re.sub(r"[^A-Za-z0-9_.]+", "-", strategy).strip("-")
        noise = f"__noise{self.noise_rate:g}" if self.noise_rate else ""
        return f"{self.preset.name}__{strategy}__{self.variant}__seed{self.seed}{noise}"

    def config(self) -> dict:
        config = {"preset": self.preset.as_dict(), "strategy": self.strategy, "seed": self.seed,
                  "mc_dropout": self.mc_dropout,
                  "results_version": _SEEDING_VERSIONS.get(self.preset.mask_seeding, RESULTS_VERSION),
                  # the strategy object with its parameters, e.g. "BALD()" (recorded only)
                  "strategy_object": repr(get_strategy(self.strategy))}
        if self.last_layer is not None:
            config["last_layer"] = self.last_layer
        if self.noise_rate:
            config["noise_rate"] = self.noise_rate
        if self.initial_set != "balanced_random":
            config["initial_set"] = self.initial_set
        if self.ensemble:
            config["ensemble"] = self.ensemble
        if self.laplace:
            config["laplace"] = True
        if self.representation != "none":  # only then: the runs on the pixels keep their configuration
            config["representation"] = self.representation
            config["head"] = self.head
            if self.representation == "pool":
                config["encoder_epochs"] = self.encoder_epochs
        return config


#: Sizes of the training and test sets of each data set (load_data's), for the
#: checks made before a run starts.
_DATA_SIZES = {"mnist": (60000, 10000), "repeated_mnist": (180000, 10000), "fashion_mnist": (60000, 10000),
               "digits": (1297, 500)}
#: Classes of every data set: the initial set holds n_initial_per_class of each.
_N_CLASSES = 10


def check_sizes(preset: Preset) -> None:
    """Raise ValueError if ``preset`` asks for more than its data set holds:
    a pool_size or n_test above what there is (which would be capped), or
    more labels than the pool has (the run would stop before n_queries)."""
    n_train, n_test = _DATA_SIZES[preset.dataset]
    available = n_train - preset.n_validation
    if preset.pool_size is not None and preset.pool_size > available:
        raise ValueError(f"pool_size={preset.pool_size} exceeds the {available} points that {preset.dataset} "
                         f"leaves for the pool ({n_train} training points less n_validation={preset.n_validation})")
    if preset.n_test is not None and preset.n_test > n_test:
        raise ValueError(f"n_test={preset.n_test} exceeds the {n_test} test points of {preset.dataset}")
    pool = available if preset.pool_size is None else preset.pool_size
    needed = _N_CLASSES * preset.n_initial_per_class + preset.n_queries * preset.n_instances
    if needed > pool:
        raise ValueError(
            f"the runs need {needed} labels (n_initial_per_class={preset.n_initial_per_class} x {_N_CLASSES} classes "
            f"+ n_queries={preset.n_queries} x n_instances={preset.n_instances}), but the pool holds {pool}; "
            "lower n_queries or n_instances, or give a larger pool")


def _needs_samples(name: str) -> bool:
    """Whether strategy ``name`` (its base, under decorators) needs several
    predictive samples: with one, its scores are all equal (ties)."""
    from ..acquisition import BatchBALD

    strategy = get_strategy(name)
    while hasattr(strategy, "strategy") and not isinstance(strategy, BatchBALD):
        strategy = strategy.strategy
    return isinstance(strategy, BatchBALD) or bool(getattr(strategy, "needs_stochastic", False))


def grid_specs(preset: Preset, strategies: Sequence[str], seeds: Sequence[int], *,
               deterministic_baseline: bool = False, last_layer: Sequence[str] = (),
               noise_rates: Sequence[float] = (0.0,), initial_sets: Sequence[str] = ("balanced_random",),
               ensemble: int = 0, laplace: bool = False, representations: Sequence[str] = ("none",),
               head: str = "mc_dropout", encoder_epochs: float = 15.0) -> Tuple[List[RunSpec], dict]:
    """The runs of a grid, and its arguments as :func:`~skdbal.experiments.run_grid` records them.

    The arguments are :func:`~skdbal.experiments.run_grid`'s, checked as
    its documentation says (ValueError naming what is wrong, a UserWarning
    naming the strategies that get no deterministic baseline); repeats are
    dropped and each strategy takes its one spelling
    (:func:`skdbal.acquisition.canonical_name`).

    Returns
    -------
    specs : list of RunSpec
        By initial set, noise rate, variant, seed and strategy (the last
        varying fastest), then the deterministic baselines in the same order.
    arguments : dict
        ``strategies``, ``seeds``, ``deterministic_baseline``,
        ``last_layer``, ``noise_rates``, ``initial_sets``, ``ensemble`` (and
        ``laplace`` when set; ``representations``, ``head`` and
        ``encoder_epochs`` when a representation other than ``"none"`` is
        asked), as given but checked and without repeats.

    Examples
    --------
    >>> from skdbal.experiments import get_preset
    >>> from skdbal.experiments.specs import grid_specs
    >>> specs, arguments = grid_specs(get_preset("gal2017"), ["max_entropy", "variation_ratios", "max_entropy"],
    ...                               seeds=[1], deterministic_baseline=True)
    >>> [spec.variant for spec in specs]              # the strategies' runs, then their deterministic baselines
    ['bayesian', 'bayesian', 'deterministic', 'deterministic']
    >>> arguments["strategies"], arguments["noise_rates"]
    (['max_entropy', 'variation_ratios'], [0.0])
    """
    if isinstance(strategies, str):
        raise TypeError(f"strategies must be a list of names; got the str {strategies!r}")
    # one spelling per strategy (ValueError naming an unknown or malformed one), so that
    # "filter(bald, dynamic)" and "diverse(bald,0.10)" get the files of "filter(bald,dynamic)", "diverse(bald,0.1)"
    strategies = [canonical_name(name) for name in strategies]
    strategies, seeds, last_layer = (list(dict.fromkeys(v)) for v in (strategies, seeds, last_layer))  # no repeats
    if not strategies:
        raise ValueError("give at least one strategy")
    check_sizes(preset)
    noise_rates = [float(r) for r in dict.fromkeys(noise_rates)]
    bad_rates = [r for r in noise_rates if not 0.0 <= r < 1.0]
    if bad_rates or not noise_rates:
        raise ValueError(f"noise_rates must lie in [0, 1); got {list(noise_rates)}")
    if not seeds:
        raise ValueError("give at least one seed")
    initial_sets = list(dict.fromkeys(initial_sets))
    bad_sets = [i for i in initial_sets if i not in INITIAL_SETS]
    if bad_sets or not initial_sets:
        raise ValueError(f"unknown initial_sets {bad_sets or initial_sets}; choose from {list(INITIAL_SETS)}")
    bad = [v for v in last_layer if v not in LAST_LAYERS]
    if bad:
        raise ValueError(f"unknown last_layer {bad}; choose from {list(LAST_LAYERS)}")
    if isinstance(ensemble, bool) or not isinstance(ensemble, (int, np.integer)) or ensemble < 0:
        raise ValueError(f"ensemble must be an int >= 0 (the number of members; 0: none); got {ensemble!r}")
    if ensemble and last_layer:
        raise ValueError("ensemble and last_layer cannot be combined: each replaces the MC-dropout network")
    if ensemble == 1:
        sampled = [s for s in strategies if _needs_samples(s)]
        if sampled:
            raise ValueError(f"ensemble=1 gives one sample per point, so {', '.join(sampled)} would score every "
                             "point the same (ties); use ensemble >= 2")
    if ensemble and preset.warm_epochs is not None:
        raise ValueError("warm_epochs cannot be combined with ensemble: an ensemble's members are trained from "
                         "their own initialisations")
    if laplace and (ensemble or last_layer):
        raise ValueError("laplace cannot be combined with ensemble or last_layer: each replaces the MC-dropout "
                         "posterior")
    representations, encoder_epochs = _check_representations(preset, strategies, representations, head,
                                                             encoder_epochs, ensemble, last_layer, laplace,
                                                             deterministic_baseline)
    # the model of the runs (one RunSpec field each), then the deterministic baseline's, which runs for
    # DETERMINISTIC_BASELINE only
    variants: List[Dict[str, Any]] = ([{"laplace": True}] if laplace else [{"ensemble": int(ensemble)}] if ensemble
                else [{"last_layer": v} for v in last_layer] if last_layer else [{}])
    on_pixels = "none" in representations
    variants = ((variants if on_pixels else [])
                + [{"representation": r, "head": head, "encoder_epochs": encoder_epochs}
                   for r in representations if r != "none"])
    baseline = [{"mc_dropout": False}] if deterministic_baseline else []
    specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i, **variant)
             for group in (variants, baseline) for i in initial_sets for r in noise_rates for variant in group
             for seed in seeds for s in strategies if group is variants or s in DETERMINISTIC_BASELINE]
    for name in strategies:  # the model a strategy reads (its model_kind), which the runner must build
        kind = get_strategy(name).model_kind
        if kind == "network_regressor":
            raise ValueError(f"the {name} strategy needs a network regressor (its output gradients, as "
                             "skdbal.MCDropoutRegressor has); the runner trains classifiers, and with last_layer a "
                             "Bayesian last layer, which has none")
        if kind == "regressor" and not last_layer:
            raise ValueError(f"the {name} strategy needs a regressor: pass last_layer")
        if kind == "density" and representations != ["none"]:
            raise ValueError(f"the {name} strategy reads the feature density of a network; a representation's "
                             "runs train a head on embeddings, which has none")
    if deterministic_baseline:
        without = [s for s in strategies if s not in DETERMINISTIC_BASELINE]
        if len(without) == len(strategies):
            raise ValueError(f"--deterministic-baseline runs for {' and '.join(DETERMINISTIC_BASELINE)} only "
                             f"(Gal et al. 2017, §5.2), and the grid has neither: {', '.join(strategies)}")
        if without:
            warnings.warn(f"the deterministic baseline runs for {' and '.join(DETERMINISTIC_BASELINE)} only "
                          f"(Gal et al. 2017, §5.2); {', '.join(without)} get none", UserWarning, stacklevel=3)
    arguments = {"strategies": list(strategies), "seeds": [int(s) for s in seeds],
                 "deterministic_baseline": deterministic_baseline, "last_layer": list(last_layer),
                 "noise_rates": noise_rates, "initial_sets": initial_sets, "ensemble": int(ensemble),
                 **({"laplace": True} if laplace else {}),
                 **({"representations": representations, "head": head, "encoder_epochs": encoder_epochs}
                    if representations != ["none"] else {})}
    return specs, arguments


def _check_representations(preset, strategies, representations, head, encoder_epochs, ensemble, last_layer,
                           laplace, deterministic_baseline):
    """``representations`` without repeats and ``encoder_epochs`` as a float, after the checks of
    :func:`grid_specs` (ValueError naming what is wrong)."""
    from .representations import check_representation

    if isinstance(representations, str):
        raise TypeError(f"representations must be a list of names; got the str {representations!r}")
    representations = list(dict.fromkeys(representations))
    if not representations:
        raise ValueError("give at least one representation ('none': the network on the pixels)")
    for name in representations:
        check_representation(name, head)
    if isinstance(encoder_epochs, bool) or not isinstance(encoder_epochs, (int, float, np.integer, np.floating)) \
            or not np.isfinite(encoder_epochs) or encoder_epochs <= 0:
        raise ValueError(f"encoder_epochs must be a number > 0; got {encoder_epochs!r}")
    if representations == ["none"] and head != "mc_dropout":
        raise ValueError(f"head={head!r} is the model over a representation's embeddings, and no representation "
                         "but 'none' (the network on the pixels) is asked; give one, e.g. representations=['pool']")
    if representations != ["none"]:
        if ensemble or last_layer or laplace:
            raise ValueError("a representation's runs use --head for their model; ensemble, last_layer and "
                             "laplace are the network's, and cannot be combined with it")
        if deterministic_baseline:
            raise ValueError("deterministic_baseline is the network's and cannot be combined with a representation")
        if preset.warm_epochs is not None:
            raise ValueError("warm_epochs is the network's; a representation's head refits from scratch at each "
                             "step, so it cannot be combined with a representation")
    return representations, float(encoder_epochs)
