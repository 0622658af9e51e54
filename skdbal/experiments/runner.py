"""Experiment grids: strategies × seeds × presets, resumable, in parallel.

Each run (preset, strategy, variant, seed) keeps its finished rows in
``runs/<run_id>.csv`` (with the pool indices it queried), its configuration in
``runs/<run_id>.json`` and, as a cache, the weights of its latest model in
``runs/<run_id>.pt``. Files are replaced atomically (temporary file, fsync,
:func:`os.replace`) after every step, so a run killed at any moment resumes
after its last finished step and never repeats one. Each step's randomness
(pool subset, tie breaks, weight initialisation, batch order, dropout masks)
is seeded from ``(seed, step)`` alone, so the model of the last finished step
can be rebuilt exactly from the labelled set when the weights cache is
missing or stale, and a resumed run ends with the rows of an uninterrupted
one. Only the CSV and JSON files need to be kept (e.g. committed) to resume.
Since every row is written with its line terminator, a last row without one
is torn (a cut copy) even when its fields still parse: a resume drops and
recomputes it, with a warning, and :func:`~skdbal.experiments.results.read_results` refuses it.

The tidy ``results.csv`` (one row per run and step) is assembled from the
run files after every step, again atomically.

This module runs grids (:func:`run_grid`) and runs (:func:`run_one`); the
rest has a home of its own: the runs of a grid in :mod:`~skdbal.experiments.specs`, the result
files in :mod:`~skdbal.experiments.results`, the comparison of
configurations in :mod:`~skdbal.experiments.configs`, the data and models in
:mod:`~skdbal.experiments.factories`, and a run's progress on disk in
:mod:`~skdbal.experiments.journal`.
"""
from __future__ import annotations

import json
import os
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from joblib import Parallel, delayed

from ..acquisition import DECORATORS, STRATEGIES, get_strategy, register, unregister
from ..learner import ActiveLearner
from ..loop import ActiveLearningLoop
from ..oracles import KnownLabels, NoisyAnnotator
from .configs import check_folder_config, check_run_config, folder_configs
from .factories import (
    fit_step_model,
    learner_template,
    load_data,
    network_of,
    resolve_device,
    split_indices,
)
from .journal import (
    RunJournal,
    device_mismatch,
    finished,
    labelled_indices,
    load_weights,
    record_device,
    stored_rows,
    thread_mismatch,
)
from .presets import Preset, get_preset
from .provenance import environment
from .results import assemble_results, atomic_write, exclusive_lock, has_rows
from .specs import RunSpec, check_sizes, grid_specs
from .stopping_specs import stopping_rule

__all__ = ["run_grid", "run_one"]


def run_one(spec: RunSpec, out_dir: Union[str, os.PathLike], *, torch_threads: Optional[int] = None,
            data_home: Optional[str] = None, verbose: bool = False, device: str = "cpu") -> List[dict]:
    """Run (or resume) one run of a grid; return its rows.

    Raises :class:`FolderLockedError` while another process writes the same
    run, and ValueError if the folder holds it, or other runs, with another
    configuration (see :func:`run_grid`), or the data set cannot hold it.
    A resume with another ``torch_threads`` than the run started with warns.

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import RunSpec, get_preset, run_one
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=2, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> rows = run_one(RunSpec(tiny, "bald", seed=1), out, torch_threads=1)
    >>> [(r["step"], r["n_labels"], r["n_acquired"]) for r in rows]
    [(0, 20, 0), (1, 30, 10), (2, 40, 20)]
    >>> len(run_one(RunSpec(tiny, "bald", seed=1), out, torch_threads=1))   # finished: read back, not rerun
    3
    """
    check_sizes(spec.preset)
    check_folder_config(spec, folder_configs(Path(out_dir) / "runs"))
    return _run_one(spec, out_dir, torch_threads, data_home, verbose, warn=True, device=resolve_device(device))


def _run_one(spec, out_dir, torch_threads, data_home, verbose, warn, device="cpu"):
    out_dir = Path(out_dir)
    runs = out_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    run_threads = torch_threads or threads
    with exclusive_lock(runs / f".{spec.run_id}.lock", f"run {spec.run_id} in {out_dir}"):
        config = check_run_config(spec, runs, warn=warn)  # under the lock: no writer can change it meanwhile
        config_path = runs / f"{spec.run_id}.json"
        if not config_path.exists() or not has_rows(runs / f"{spec.run_id}.csv"):  # new, or a failed start
            atomic_write(config_path, json.dumps({**config, "torch_threads": run_threads, "device": device,
                                                  "environment": environment()}, indent=1).encode())
        rows = stored_rows(spec, runs, warn=warn)
        if finished(spec, rows):
            return rows
        message = device_mismatch(spec, runs, device, rows) if warn else None
        if message:
            warnings.warn(message, UserWarning, stacklevel=2)
        record_device(config_path, len(rows), device)
        message = thread_mismatch(spec, runs, run_threads, rows) if warn else None
        if message:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        torch.set_num_threads(run_threads)
        try:
            return _run_steps(spec, out_dir, rows, data_home, verbose, device)
        finally:
            torch.set_num_threads(threads)


def _run_steps(spec, out_dir, rows, data_home, verbose, device="cpu"):
    """Run (or resume) ``spec``'s steps after ``rows`` with the one loop,
    :class:`skdbal.loop.ActiveLearningLoop`: a learner owning the run's pool
    (seeded per step), the run's oracle (known or noisy labels) and its
    journal on disk (:class:`~skdbal.experiments.journal.RunJournal`)."""
    preset = spec.preset
    X_train, y_train, X_test_all, y_test_all = load_data(preset.dataset, data_home)
    if spec.representation != "none":  # the images become their embeddings (learnt once per seed, cached)
        from .representations import embed_run_data

        _, pool, _, _ = split_indices(preset, spec.seed, y_train, len(y_test_all))  # the pool does not depend
        X_train, X_test_all = embed_run_data(spec, X_train, X_test_all, pool, out_dir, device)  # on the initial set
    val, pool, initial, test = split_indices(preset, spec.seed, y_train, len(y_test_all), X_train, spec.initial_set)
    valid = (X_train[val], y_train[val])
    pool_rows = X_train[pool] if spec.head == "spread" else None      # the graph a spreading head needs
    # the annotator: a fixed noisy one for a noise run, labelling the initial set correctly
    if spec.noise_rate:
        noisy = NoisyAnnotator.flip(y_train, spec.noise_rate, classes=np.unique(y_train),
                                    random_state=np.random.RandomState([spec.seed, 7907]), clean=initial)
        oracle = NoisyAnnotator(y_train[pool], noisy.y[pool])
    else:
        oracle = KnownLabels(y_train[pool])
    journal = RunJournal(spec, out_dir, rows, pool, initial, oracle, X_test_all[test], y_test_all[test], verbose)
    csv_path, weights_path = journal.csv_path, journal.weights_path
    if rows:
        labelled = labelled_indices(rows)
        if not np.array_equal(labelled[:len(initial)], initial):
            raise ValueError(f"{csv_path} does not start from this seed's initial set")
    cache = {"step": rows[-1]["step"] if rows else None}
    # warm_epochs: the network weights of the previous step's model, {"step", "state"}
    previous = {}

    def keep(step, model):
        if preset.warm_epochs is not None:
            previous.update(step=step, state={k: v.detach().clone() if torch.is_tensor(v) else v for k, v in
                                              network_of(model).module_.state_dict().items()})
        return model

    def start_of(step, X, y):
        """With warm_epochs, the weights step ``step`` trains on from: the previous step's, replayed
        from the labelled sets of the steps before when they are not at hand (a resume without a cache)."""
        if preset.warm_epochs is None or step == 0:
            return None
        if previous.get("step") != step - 1:
            sizes = {r["step"]: int(r["n_labels"]) for r in journal.csv_rows}
            if verbose:
                print(f"{spec.run_id}: replaying steps 0-{step - 1} (warm_epochs, no cached weights)", flush=True)
            for j in range(step):
                n = sizes[j]
                keep(j, fit_step_model(spec, j, X[:n], y[:n], valid, device, start=start_of(j, X, y),
                                         pool=pool_rows))
        return previous["state"]

    def fit_model(step, X, y):
        if step == cache.pop("step", None):  # resuming: the cached weights of the last step, if they fit
            state = load_weights(weights_path, step)
            if state is not None:
                try:
                    return keep(step, fit_step_model(spec, step, X, y, valid, device, state=state,
                                                     pool=pool_rows))
                except (RuntimeError, KeyError) as exc:  # a state of another architecture
                    warnings.warn(f"{weights_path} does not fit the model ({exc}); the model of step {step} is "
                                  "refitted from its labels instead", RuntimeWarning, stacklevel=2)
        # the same model every time: seeded by the step (and, with warm_epochs, by the earlier steps)
        return keep(step, fit_step_model(spec, step, X, y, valid, device, start=start_of(step, X, y),
                                         pool=pool_rows))

    learner = ActiveLearner(learner_template(spec, device, valid), get_strategy(spec.strategy),
                            pool_subsample=preset.pool_subsample, random_state=spec.seed, seeding="step",
                            verbose=False)
    learner.set_pool(X_train[pool], ids=pool)  # subsampled candidates are scored in training-set order
    # the opt-in stopping rules and accuracy estimate only add columns: the run goes on to n_queries
    loop = ActiveLearningLoop(learner, oracle, n_instances=preset.n_instances, journal=journal,
                              fit_model=fit_model, query_kwargs={"random_tie_break": True},
                              pass_pool_labels=True, verbose=False, stopping=stopping_rule(preset.stopping),
                              monitor=preset.monitor, stop_on="record")
    if not loop.resume():
        loop.start(journal.position[initial])
    loop.run(preset.n_queries - journal.rows()[-1]["step"])
    return journal.csv_rows


def run_grid(
    preset: Union[str, Preset],
    strategies: Sequence[str],
    seeds: Sequence[int],
    out_dir: Union[str, os.PathLike],
    *,
    deterministic_baseline: bool = False,
    last_layer: Sequence[str] = (),
    noise_rates: Sequence[float] = (0.0,),
    initial_sets: Sequence[str] = ("balanced_random",),
    ensemble: int = 0,
    laplace: bool = False,
    representations: Sequence[str] = ("none",),
    head: str = "mc_dropout",
    encoder_epochs: float = 15.0,
    n_jobs: int = 1,
    torch_threads: Optional[int] = None,
    data_home: Optional[str] = None,
    verbose: bool = True,
    device: str = "cpu",
    scheduler=None,
    **overrides,
) -> List[dict]:
    """Run a strategies × seeds grid of one preset, resuming what is there.

    Parameters
    ----------
    preset : str or Preset
        ``"gal2017"``, ``"pilz2025"``, ``"kirsch2019"`` or a :class:`~skdbal.experiments.Preset`.
    strategies : sequence of str
        Names in :data:`skdbal.acquisition.STRATEGIES`, or decorated names
        read by :func:`skdbal.acquisition.get_strategy`, such as
        ``"filter(bald,dynamic)"``; at least one. Each is taken in its one
        spelling (:func:`skdbal.acquisition.canonical_name`: no
        spaces, floats as ``repr``, so ``"diverse(bald, 0.10)"`` is
        ``"diverse(bald,0.1)"``), which names its runs A strategy or
        decorator registered in your own code
        (:func:`skdbal.acquisition.register`) runs too, in parallel or on a
        cluster as well: the runner registers it in each worker first.
    seeds : sequence of int
        Experiment seeds; each seeds one run per strategy (data split,
        initial set and every step's randomness).
    out_dir : path
        Holds the run files ``runs/*``, ``results.csv`` and ``grid.json``
        (the preset, the machines, and every call made on the folder). One
        grid at a time may write a folder: a second one raises RuntimeError.
        The runs of a folder share one configuration but for what differs
        per run (strategy, seed, noise rate, initial set, variant) and
        ``n_queries``, so that a report never averages runs of different
        configurations (another preset, ``max_epochs``, ``mask_seeding``...)
        as seeds: a run of another one is refused (ValueError naming each
        field) before anything is written. Fewer ``n_queries`` than
        ``grid.json`` records warn, as the report cuts every run of the
        folder at the latest grid's length.
    deterministic_baseline : bool, default=False
        Also run the ``mc_dropout=False`` baseline of Gal et al. (2017, §5.2)
        for the strategies among max_entropy and variation_ratios (spelt so:
        a decorated one gets none). The others get none, with a warning
        naming them; a grid with neither is refused (``ValueError``).
    last_layer : sequence of {"analytic", "mfvi"}, default=()
        Run these Bayesian-last-layer variants (Anonymous, n.d., §4) *instead
        of* the softmax CNN: each step trains the preset's network, fits
        :class:`~skdbal.BayesianLinearRegression` on its frozen penultimate
        features with one-hot targets, and records accuracy (argmax), RMSE
        and the mean predictive variance (trace) on the test set. Use the
        ``predictive_variance`` strategy for Fig. 3 of Anonymous (n.d.).
    noise_rates : sequence of float in [0, 1), default=(0.0,)
        Label noise of the annotator: every run is made at each rate. A
        rate > 0 flips each pool label once, symmetrically
        (:func:`skdbal.datasets.make_noisy_labels`, seeded by the seed); the
        initial set, validation and test sets stay clean. The strategies get
        the annotator's labels as ``y_pool``, and the rows record the rejects
        of a filter, how many of them were truly flipped, and the flipped
        labels acquired.
    initial_sets : sequence of {"balanced_random", "kmeans_per_class", "kmeans"}, default=("balanced_random",)
        The initial labelled set of each run: ``n_initial_per_class`` random
        points per class (Gal et al.), the points nearest the k-means
        centroids within each class (Anonymous, n.d., §5.2, which needs the
        pool's labels), or nearest the centroids of the whole pool
        (:func:`skdbal.initial.kmeans_representative`). Runs from a k-means
        set have the variant ``"<variant>-init-<initial_set>"``, so they sit
        beside the others in one folder and one report.
    ensemble : int, default=0
        With ``M >= 1``, run a deep ensemble of ``M`` of the preset's
        networks *instead of* the MC-dropout network
        (:class:`~skdbal.DeepEnsembleClassifier`; variant ``"ensembleM"``):
        each member trains with dropout from its own seed and predicts with
        dropout off, and the ``M`` members are the strategies' samples.
        Training costs ``M`` times as much.
        ``M = 1`` is refused with a strategy that needs several samples
        (BALD, mean_std, variation_ratios, BatchBALD, or one decorating
        them): one sample scores every point the same.
    laplace : bool, default=False
        Score and evaluate with a last-layer Laplace posterior of each
        step's network (:class:`~skdbal.models.LaplaceClassifier`, through
        laplace-torch, prior precision by marginal likelihood; variant
        ``"laplace"``) instead of MC dropout: the network trains as usual,
        then the posterior is fitted on the labelled set, and its
        ``n_samples`` last-layer samples are the strategies' samples.
    representations : sequence of str, default=("none",)
        What the runs learn on, each a run of its own: ``"none"``, the
        preset's network on the pixels; ``"pool"``, a self-supervised
        :class:`~skdbal.models.PoolEncoder` learnt from the run's pool (no
        labels) for ``encoder_epochs`` passes; ``"pca"``, the first 50
        principal components of the pool; or ``"file:PATH"``, a ``.npy`` of
        embeddings (the training images' rows, then the test images') or an
        encoder file (TorchScript ``.pt``, ``.pt2``, ``.onnx``). Every run
        but ``"none"``'s trains ``head`` on the embeddings of its labels
        (variant ``"<representation>-<head>"``) and its strategies choose
        among the pool's embeddings. The encoder is learnt once per seed and
        its embeddings kept under ``out_dir/cache/representations/``
        (:mod:`skdbal.experiments.representations`).
    head : {"mc_dropout", "laplace", "ensemble", "bll", "bll_mfvi", "spread"}, default="mc_dropout"
        The Bayesian head of the runs on a representation:
        :class:`~skdbal.models.MCDropoutHead`, a last-layer Laplace posterior
        over one, an ensemble of five, or
        :class:`~skdbal.models.BayesianLastLayerHead` (analytic or
        mean-field), or :class:`~skdbal.models.LabelSpreadingHead` over the
        pool's neighbour graph; each draws the preset's ``n_samples``.
    encoder_epochs : float, default=15.0
        Passes of the ``"pool"`` encoder over the pool.
    n_jobs : int, default=1
        Runs in parallel (joblib).
    torch_threads : int, optional
        torch threads per run; default: CPU count // n_jobs. Rows are
        reproducible for a fixed value; it is recorded in each run's JSON,
        and resuming a run with another value warns.
    data_home : str, optional
        Where the MNIST files are looked for (see
        :func:`skdbal.datasets.load_mnist`); unused for ``"digits"``.
    verbose : bool, default=True
        Print one line per finished step of each run.
    device : str, default="cpu"
        torch device of the networks: ``"cpu"``, ``"cuda"``, or ``"auto"``
        (CUDA when torch sees a GPU). Recorded in ``grid.json`` and in each
        run's JSON, with the steps of each device when a run is resumed on
        another one (which warns, naming both); a GPU's kernels and random
        numbers differ from the CPU's, so rows computed on one do not equal
        rows computed on the other.
    scheduler : str or distributed.Client, optional
        Run the grid on a Dask cluster (the ``dask`` extra): each run is one
        task on a worker (:func:`skdbal.dask.grid.map_runs`), as many at a
        time as the workers have threads, and ``n_jobs`` is unused. The
        output folder and ``data_home`` must be on a file system every
        worker reaches; the locks and the resume are a local run's.
        ``torch_threads`` defaults to 1 there.
    **overrides :
        Preset fields to change, e.g. ``n_queries=3``.

    Raises
    ------
    ValueError
        Before anything is written: a run of another configuration than the
        folder's, an unknown strategy, a preset that asks for more than its
        data set holds (``pool_size`` or ``n_test`` above what there is, or
        ``n_initial_per_class · 10 + n_queries · n_instances`` labels above
        the pool), and the other combinations named above.
    DamagedResultsError
        A run file that cannot be resumed, such as a run CSV with rows whose
        JSON (its configuration) is missing. A JSON without rows (a start
        that failed) is replaced, with a UserWarning.

    Returns
    -------
    rows : list of dict
        All rows of ``results.csv``.

    References
    ----------
    .. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.
    .. [2] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=2, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> rows = run_grid(tiny, ["bald", "random"], seeds=[1], out_dir=tempfile.mkdtemp(), torch_threads=1,
    ...                 verbose=False)
    >>> sorted({(r["strategy"], r["seed"], r["step"]) for r in rows})
    [('bald', 1, 0), ('bald', 1, 1), ('bald', 1, 2), ('random', 1, 0), ('random', 1, 1), ('random', 1, 2)]
    """
    preset = get_preset(preset, **overrides)
    specs, arguments = grid_specs(preset, strategies, seeds, deterministic_baseline=deterministic_baseline,
                                  last_layer=last_layer, noise_rates=noise_rates, initial_sets=initial_sets,
                                  ensemble=ensemble, laplace=laplace, representations=representations,
                                  head=head, encoder_epochs=encoder_epochs)
    if torch_threads is None:
        torch_threads = 1 if scheduler is not None else max(1, (os.cpu_count() or 1) // max(1, n_jobs))
    out_dir = Path(out_dir)
    device = resolve_device(device)
    seen: Dict[str, RunSpec] = {}
    for spec in specs:  # two runs of one grid must not share files
        other = seen.setdefault(spec.run_id, spec)
        if other is not spec:
            raise ValueError(f"strategies {other.strategy!r} and {spec.strategy!r} would write the same run files "
                             f"({spec.run_id}); name one of them differently")
    for spec in specs:  # refuse a clashing folder before writing anything: the run's own file first,
        check_run_config(spec, out_dir / "runs", warn=True)
    folder = folder_configs(out_dir / "runs")
    for spec in specs:  # then the folder's other runs
        check_folder_config(spec, folder)
    _check_report_length(out_dir, preset)
    done: List[Tuple[RunSpec, int]] = []
    resumed: List[Tuple[RunSpec, int]] = []
    new: List[Tuple[RunSpec, int]] = []
    for spec in specs:  # warned here: warnings raised in joblib's worker processes are lost
        rows = stored_rows(spec, out_dir / "runs", warn=True)  # raises here if a run is damaged beyond repair
        message = thread_mismatch(spec, out_dir / "runs", torch_threads, rows)
        if message:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        message = device_mismatch(spec, out_dir / "runs", device, rows)
        if message:
            warnings.warn(message, UserWarning, stacklevel=2)
        (done if finished(spec, rows) else resumed if rows else new).append((spec, len(rows)))
    if verbose:
        where = f"{n_jobs} at a time" if scheduler is None else "on the Dask cluster"
        print(f"{len(specs)} run(s) into {out_dir}: {len(done)} finished, {len(resumed)} to resume, {len(new)} new; "
              f"{where}, {torch_threads} torch thread(s) each", flush=True)
        for spec, n in resumed:
            print(f"  {spec.run_id}: resumes at step {n} of {spec.preset.n_queries}", flush=True)
        if new or resumed:
            print("  (each run loads its data and fits its current step before its first line)", flush=True)
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out_dir / ".lock", f"the grid in {out_dir}"):
        for stale in list(out_dir.glob(".*.tmp")) + list((out_dir / "runs").glob(".*.tmp")):
            stale.unlink()  # left by a killed write; the file it was replacing is intact
        _record_invocation(out_dir, preset, {
            **arguments, "n_jobs": n_jobs, "torch_threads": torch_threads, "device": device, "overrides": overrides,
            **({} if scheduler is None else {"scheduler": scheduler if isinstance(scheduler, str)
                                              else scheduler.scheduler_info()["address"]})})
        own = _user_registrations()  # a worker process knows only the built-ins: it registers these first
        if scheduler is None:
            Parallel(n_jobs=n_jobs)(delayed(_run_registered)(own, spec, out_dir, torch_threads, data_home, verbose,
                                                             warn=False, device=device) for spec in specs)
        else:
            from ..dask.grid import map_runs

            map_runs(scheduler, _run_registered, [((own, spec, out_dir.resolve(), torch_threads, data_home, verbose),
                                                   {"warn": False, "device": device}) for spec in specs],
                     [spec.run_id for spec in specs])
        return assemble_results(out_dir)


def _user_registrations() -> List[Any]:
    """The strategy and decorator classes registered beyond the package's own, in the order registered.

    A grid's runs may use them by name, but a worker process (joblib's, or a Dask worker) starts with the built-ins
    alone: the runner sends these classes with each run (cloudpickle carries a class defined in ``__main__`` or a
    test module by value) and registers them there first. A class is the package's own when its module is in
    ``skdbal``.
    """
    classes = [type(s) for s in STRATEGIES.values()] + [cls for cls, _ in DECORATORS.values()]
    return [cls for cls in classes if not cls.__module__.startswith("skdbal.")]


def _register_all(classes: Sequence[Any]) -> None:
    """Register ``classes`` (from :func:`_user_registrations`) in this process, as the grid's parent had them: a
    name held by another class that is not the package's own (a reused worker's earlier grid) is given back
    first."""
    for cls in classes:
        held: Any = STRATEGIES.get(cls.name)
        held = type(held) if held is not None else DECORATORS[cls.name][0] if cls.name in DECORATORS else None
        if held is cls:
            continue
        if held is not None and not held.__module__.startswith("skdbal."):
            unregister(cls.name)
        register(cls)


def _run_registered(classes, spec, *args, **kwargs):
    """:func:`_run_one` in a worker, after registering there the classes the parent registered beyond the
    built-ins."""
    _register_all(classes)
    return _run_one(spec, *args, **kwargs)


def _check_report_length(out_dir: Path, preset: Preset) -> None:
    """Warn when ``preset`` asks for fewer queries than the folder's grid.json
    records: the report cuts every run of the folder at the latest grid's
    n_queries, so earlier, longer runs will be reported shorter."""
    try:
        stored = json.loads((out_dir / "grid.json").read_text())["preset"]["n_queries"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if isinstance(stored, int) and preset.n_queries < stored:
        warnings.warn(f"n_queries={preset.n_queries} is below the {stored} that {out_dir / 'grid.json'} records: the "
                      f"report of {out_dir} will cut every run there at step {preset.n_queries} (runs are compared at "
                      f"the latest grid's length); pass n_queries={stored} to keep them whole", UserWarning,
                      stacklevel=3)


def _record_invocation(out_dir: Path, preset: Preset, invocation: dict) -> None:
    """Append this call (its arguments and preset, the machine with its package versions, the commit,
    the time) to ``grid.json``,
    which also holds the latest preset and every machine that made a call
    (``machines``); earlier calls are kept, so the file says how every run in
    the folder was started."""
    path = out_dir / "grid.json"
    meta = {}
    if path.exists():
        try:
            meta = json.loads(path.read_text())
        except ValueError as exc:  # only a log: keep the damaged one beside, start a new one
            aside = path.with_name("grid.json.damaged")
            os.replace(path, aside)
            warnings.warn(f"{path} is damaged ({exc}); it is only a log of the invocations, so it was moved "
                          f"to {aside} and a new one is started", RuntimeWarning, stacklevel=2)
    invocations = meta.get("invocations", [])
    if not invocations and "strategies" in meta:  # written before invocations were recorded
        invocations = [{k: meta[k] for k in ("strategies", "seeds", "deterministic_baseline", "last_layer",
                                             "n_jobs", "torch_threads", "machine") if k in meta}]
    env = environment()  # the hardware, the package versions and the commit (issue 44)
    machine = {k: v for k, v in env.items() if k != "commit"}
    invocation = {**invocation, "preset": preset.as_dict(), "machine": machine, "commit": env["commit"],
                  "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    invocations = invocations + [invocation]
    machines = []
    for entry in invocations:  # not only the latest: a folder's runs may come from several machines
        if entry.get("machine") is not None and entry["machine"] not in machines:
            machines.append(entry["machine"])
    meta = {"preset": preset.as_dict(), "machines": machines, "invocations": invocations}
    atomic_write(path, json.dumps(meta, indent=2, default=str).encode())
