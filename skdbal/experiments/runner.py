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
recomputes it, with a warning, and :func:`read_results` refuses it.

The tidy ``results.csv`` (one row per run and step) is assembled from the
run files after every step, again atomically.
"""
from __future__ import annotations

import csv
import io
import json
import os
import platform
import re
import tempfile
import time
import warnings
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

import numpy as np
import torch
from joblib import Parallel, delayed
from sklearn.base import clone
from skorch.callbacks import EarlyStopping
from skorch.dataset import Dataset
from skorch.helper import predefined_split

from .. import nets
from ..metrics import label_columns
from ..acquisition import get_strategy
from ..acquisition import canonical_name
from ..callbacks import ScaledL2
from ..initial import balanced_random
from ..learner import ActiveLearner
from ..loaders import FixedLengthLoader
from ..loop import ActiveLearningLoop, step_seed
from ..mc_dropout import MCDropoutClassifier
from ..metrics import expected_calibration_error
from ..oracles import KnownLabels, NoisyAnnotator
from .presets import OPTIMIZER_CLASSES, Preset, get_preset

__all__ = ["RunSpec", "run_grid", "run_one", "read_results", "check_run_rows", "assemble_results",
           "DamagedResultsError", "load_data", "make_estimator", "make_last_layer",
           "even_batch_size", "FolderLockedError",
           "COLUMNS", "LAST_LAYERS"]

#: Columns of results.csv. Those ending in ``time`` are wall-clock seconds; ``ece`` (top-label,
#: 15 bins) and ``nll`` (mean negative log-likelihood, nats) are the test set's, from the same
#: predictions as ``accuracy`` (the preset's ``eval_method``).
COLUMNS = ["preset", "strategy", "variant", "seed", "step", "n_labels", "n_acquired", "accuracy",
           "rmse", "mean_variance", "noise_rate", "n_rejected", "n_rejected_flipped", "n_flipped_acquired",
           "threshold", "noise_estimate", "ece", "nll", "train_time", "query_time", "eval_time", "time",
           "query_indices"]

#: Columns that only some runs fill (empty otherwise): a Bayesian last layer fills
#: rmse and mean_variance; a classifier's runs ece and nll (runs written before they
#: existed leave them empty); label-noise runs and filtered strategies the others.
OPTIONAL_COLUMNS = ("rmse", "mean_variance", "noise_rate", "n_rejected", "n_rejected_flipped",
                    "n_flipped_acquired", "threshold", "noise_estimate", "ece", "nll")

#: Last-layer inference variants (Anonymous, n.d., §4; see
#: :class:`skdbal.BayesianLinearRegression`): RunSpec.last_layer.
LAST_LAYERS = ("analytic", "mfvi")

#: Bumped whenever a change in skdbal changes the rows a run produces (e.g. how
#: dropout masks are drawn); run files of another version are not resumed.
#: Version 4 draws masks per pool row from numpy's PCG64. A preset with
#: ``mask_seeding="row"`` draws them from torch's generators per row as
#: version 3 did, and one with ``"stream"`` from one stream per call as version
#: 2 did; their runs carry those versions (see :meth:`RunSpec.config`).
RESULTS_VERSION = 4

#: The results version of each older mask seeding, kept so that its grids reproduce.
_SEEDING_VERSIONS = {"stream": 2, "row": 3}

#: Preset fields added since results version 2, with the value that run files
#: written before them implicitly used.
_IMPLICIT_BEFORE = {"mask_seeding": "stream", "warm_epochs": None}

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

    @property
    def variant(self) -> str:
        if self.last_layer is not None:
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
        return config


# ----------------------------------------------------------------------------- data
@lru_cache(maxsize=2)
def load_data(dataset: str, data_home: Optional[str] = None):
    """``(X_train, y_train, X_test, y_test)`` for a preset's dataset.

    Examples
    --------
    >>> from skdbal.experiments import load_data
    >>> X_train, y_train, X_test, y_test = load_data("digits")     # bundled with scikit-learn: no download
    >>> X_train.shape, X_test.shape, sorted(set(y_train.tolist())) == list(range(10))
    ((1297, 8, 8), (500, 8, 8), True)
    """
    if dataset == "mnist":
        from ..datasets import load_mnist

        X_train, y_train = load_mnist(data_home, subset="train", return_X_y=True)
        X_test, y_test = load_mnist(data_home, subset="test", return_X_y=True)
        return X_train, y_train, X_test, y_test
    if dataset == "repeated_mnist":
        from ..datasets import make_repeated

        X_train, y_train, X_test, y_test = load_data("mnist", data_home)
        # Kirsch et al. (2019): each training image 3 times, with N(0, 0.1²) noise on images
        # standardised by MNIST's pixel std 0.3081, that is 0.1 · 0.3081 on pixels in [0, 1]
        X_rep, y_rep = make_repeated(_to_float(X_train), y_train, n_repeats=3, noise_std=0.1 * 0.3081,
                                     random_state=20190618)
        return X_rep, y_rep, X_test, y_test
    if dataset == "digits":
        from .data import load_digits_images

        X_pool, X_test, y_pool, y_test = load_digits_images()
        return X_pool, y_pool, X_test, y_test
    raise ValueError(f"unknown dataset {dataset!r}; choose 'mnist', 'repeated_mnist' or 'digits'")


#: Initial labelled sets a run may start from (``RunSpec.initial_set``).
INITIAL_SETS = ("balanced_random", "kmeans_per_class", "kmeans")


def _split(preset: Preset, seed: int, y_train, n_test_total: int, X_train=None,
           initial_set: str = "balanced_random"):
    """Validation, pool, initial and test indices: a function of the seed only.

    ``initial_set``: ``n_initial_per_class`` random points of each class
    (Gal et al.), the points nearest the k-means centroids within each class
    (Anonymous, n.d., §5.2; needs the pool's labels), or nearest the
    ``n_initial_per_class · C`` centroids of the whole pool (label-free)."""
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(y_train))
    if preset.n_validation >= len(perm):
        raise ValueError(f"n_validation={preset.n_validation} leaves no pool")
    val = perm[:preset.n_validation]
    pool = perm[preset.n_validation:]
    if preset.pool_size is not None:
        pool = pool[:preset.pool_size]
    if initial_set == "balanced_random":
        initial = pool[balanced_random(y_train[pool], preset.n_initial_per_class, rng)]
    elif initial_set in ("kmeans_per_class", "kmeans"):
        if X_train is None:
            raise ValueError(f"initial_set={initial_set!r} needs X_train")
        from ..initial import kmeans_representative

        if initial_set == "kmeans_per_class":
            chosen = kmeans_representative(X_train[pool], y_train[pool], preset.n_initial_per_class,
                                           random_state=rng)
        else:
            chosen = kmeans_representative(X_train[pool], n_clusters=preset.n_initial_per_class
                                           * len(np.unique(y_train)), random_state=rng)
        initial = pool[chosen]
    else:
        raise ValueError(f"unknown initial_set {initial_set!r}; choose from {list(INITIAL_SETS)}")
    test = np.arange(n_test_total)
    if preset.n_test is not None and preset.n_test < n_test_total:
        test = np.sort(np.random.RandomState([seed, 7919]).choice(n_test_total, preset.n_test, replace=False))
    return val, pool, initial, test


def _to_float(X):
    return X.astype(np.float32) / 255.0 if X.dtype == np.uint8 else X.astype(np.float32)


def even_batch_size(n: int, batch_size: int) -> int:
    """The largest batch of ``ceil(n / batch_size)`` nearly equal batches.

    Used by ``batch_split="even"`` (see :class:`Preset`): 130 labels in
    batches of at most 128 become 65 + 65, not 128 + 2.

    Parameters
    ----------
    n : int
        Training points.
    batch_size : int
        The largest batch allowed.

    Returns
    -------
    int

    Examples
    --------
    >>> from skdbal.experiments import even_batch_size
    >>> even_batch_size(130, 128), even_batch_size(120, 128), even_batch_size(257, 128)
    (65, 120, 86)
    """
    if n < 1 or batch_size < 1:
        raise ValueError(f"n and batch_size must be >= 1; got {n}, {batch_size}")
    n_batches = -(-n // batch_size)
    return -(-n // n_batches)


def make_estimator(preset: Preset, *, mc_dropout: bool = True, random_state: Optional[int] = None,
                   valid=None, n_train: Optional[int] = None, device: str = "cpu") -> MCDropoutClassifier:
    """The classifier a preset trains at each step, on torch ``device``.

    ``valid`` is ``(X_val, y_val)``, used when ``preset.selection ==
    "best_valid_loss"``. ``n_train``, the size of the labelled set it will be
    fit on, is needed when ``preset.batch_split == "even"``.

    Examples
    --------
    >>> from skdbal.experiments import get_preset, make_estimator
    >>> net = make_estimator(get_preset("gal2017"), random_state=0)
    >>> type(net).__name__, net.n_samples, net.max_epochs, net.batch_size
    ('MCDropoutClassifier', 100, 50, 128)
    >>> make_estimator(get_preset("gal2017", batch_split="even"), n_train=130).batch_size   # 65 + 65
    65
    >>> make_estimator(get_preset("gal2017"), mc_dropout=False).mc_dropout   # the deterministic baseline
    False
    """
    module = getattr(nets, preset.module)
    optimizer = getattr(torch.optim, OPTIMIZER_CLASSES[preset.optimizer])
    callbacks = []
    params = {f"module__{k}": v for k, v in preset.module_params}
    batch_size = preset.batch_size if preset.batch_size else -1
    if preset.batch_split == "even" and preset.batch_size:
        if n_train is None:
            raise ValueError("batch_split='even' needs n_train, the size of the training set")
        batch_size = even_batch_size(n_train, preset.batch_size)
        params["iterator_valid__batch_size"] = preset.batch_size  # predict and score in batches as with "fixed"
    if preset.epoch_samples:
        params["iterator_train"] = FixedLengthLoader
        params["iterator_train__n_samples"] = preset.epoch_samples
    if preset.scaled_l2:
        callbacks.append(("scaled_l2", ScaledL2(c=preset.scaled_l2)))
    if preset.selection in ("best_valid_loss", "early_stopping"):
        if valid is None or len(valid[0]) == 0:
            raise ValueError(f"selection={preset.selection!r} needs a validation set (n_validation > 0)")
        X_val, y_val = valid
        params["train_split"] = predefined_split(Dataset(_to_float(X_val), np.asarray(y_val, dtype=np.int64)))
        patience = preset.max_epochs + 1 if preset.selection == "best_valid_loss" else preset.patience
        callbacks.append(("best_valid", EarlyStopping(monitor="valid_loss", patience=patience, load_best=True)))
    return MCDropoutClassifier(
        module=module,
        classes=np.arange(10),
        optimizer=optimizer,
        lr=preset.lr,
        optimizer__weight_decay=preset.weight_decay,
        max_epochs=preset.max_epochs,
        batch_size=batch_size,
        callbacks=callbacks or None,
        n_samples=preset.n_samples,
        mc_dropout=mc_dropout,
        predict_method="deterministic" if preset.eval_method == "deterministic" else "mc",
        mask_seeding=preset.mask_seeding,
        random_state=random_state,
        device=device,
        **params,
    )


def _one_hot(y, n_classes: int = 10) -> np.ndarray:
    return np.eye(n_classes)[np.asarray(y, dtype=np.intp)]


def _net_of(est):
    """The network of a step's model (itself, the features step of a pipeline, or DDU's network)."""
    if hasattr(est, "density_") or hasattr(est, "laplace_"):
        return est.estimator_
    return est[0].net_ if hasattr(est, "steps") else est


def make_last_layer(preset: Preset, net, inference: str):
    """``Pipeline(NetFeatures(net), BayesianLinearRegression(...))`` for one-hot
    targets (Anonymous, n.d., §4), with the preset's ``last_layer_*`` variances.

    ``net`` is used as given (frozen): the runner trains it on the labelled
    set first, so the features follow the labelled set as the CNN does.

    Parameters
    ----------
    preset : Preset
        Supplies ``last_layer_noise_variance``, ``last_layer_prior_variance``
        and ``last_layer_fit_hyperparameters``.
    net : estimator
        A fitted network with ``transform`` (a
        :class:`~skdbal.MCDropoutClassifier`), frozen by
        ``NetFeatures(net, refit=False)``.
    inference : {"analytic", "mfvi"}
        The last layer's ``inference``.

    Returns
    -------
    model : sklearn.pipeline.Pipeline
        Steps ``"features"`` (:class:`~skdbal.NetFeatures`) and ``"blr"``
        (:class:`~skdbal.BayesianLinearRegression`), unfitted.

    Raises
    ------
    ValueError
        If ``inference`` is not in :data:`LAST_LAYERS`.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> from skdbal.experiments import get_preset, make_estimator, make_last_layer
    >>> preset = get_preset("gal2017")
    >>> pipe = make_last_layer(preset, make_estimator(preset), "analytic")
    >>> [name for name, _ in pipe.steps], pipe[-1].noise_variance, pipe[-1].inference
    (['features', 'blr'], 0.1, 'analytic')
    """
    from sklearn.pipeline import Pipeline

    from ..bayesian_linear import BayesianLinearRegression
    from ..features import NetFeatures

    if inference not in LAST_LAYERS:
        raise ValueError(f"last_layer must be one of {LAST_LAYERS}; got {inference!r}")
    blr = BayesianLinearRegression(
        inference=inference, noise_variance=preset.last_layer_noise_variance,
        prior_variance=preset.last_layer_prior_variance,
        fit_hyperparameters=preset.last_layer_fit_hyperparameters)
    return Pipeline([("features", NetFeatures(net, refit=False)), ("blr", blr)])


# ------------------------------------------------------------------------ file I/O
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file, then a rename),
    with the permissions of an ordinary new file (mkstemp's are 0600)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class FolderLockedError(RuntimeError):
    """Another process is writing the same grid folder or run.

    Examples
    --------
    >>> import fcntl, tempfile
    >>> from pathlib import Path
    >>> from skdbal.experiments import FolderLockedError, run_grid
    >>> out = Path(tempfile.mkdtemp())
    >>> with open(out / ".lock", "a") as held:  # doctest: +ELLIPSIS
    ...     fcntl.flock(held, fcntl.LOCK_EX)      # the lock that a grid writing `out` holds
    ...     run_grid("gal2017", ["random"], seeds=[1], out_dir=out, dataset="digits", n_queries=0, verbose=False)
    Traceback (most recent call last):
        ...
    skdbal.experiments.runner.FolderLockedError: another process is writing the grid in ...
    >>> issubclass(FolderLockedError, RuntimeError)
    True
    """


@contextmanager
def _exclusive(lock_path: Path, what: str):
    """Hold an exclusive, non-blocking lock on ``lock_path`` (POSIX ``flock``;
    a no-op where ``fcntl`` is missing). A second writer gets a clear error
    instead of corrupting the files of the first."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    while True:
        f = open(lock_path, "a")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise FolderLockedError(f"another process is writing {what}; wait for it to finish or use "
                                    "another output folder") from None
        try:  # the holder before us may have removed the file after we opened it: lock the current one
            if os.stat(lock_path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()
    try:
        yield
    finally:  # no lock files are left behind: removed while still held, then released
        try:
            os.unlink(lock_path)
        except FileNotFoundError:
            pass
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        f.close()


def _csv_bytes(rows: Iterable[dict]) -> bytes:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") if k in OPTIONAL_COLUMNS else row[k] for k in COLUMNS})
    return buf.getvalue().encode()


class DamagedResultsError(ValueError):
    """A results file that does not check out: cut, edited or from another run.

    The message names the file and the line; ``row`` is the 0-based index of
    the data row at fault, where there is one.

    Examples
    --------
    >>> from skdbal.experiments import DamagedResultsError, check_run_rows
    >>> try:
    ...     check_run_rows([dict(preset="p", strategy="s", variant="v", seed=1, step=1, n_labels=1,
    ...                          n_acquired=0, query_indices="3")], "run.csv")
    ... except DamagedResultsError as exc:
    ...     print(exc.row, isinstance(exc, ValueError))
    0 True
    """

    def __init__(self, message: str, row: Optional[int] = None):
        super().__init__(message)
        self.row = row


_INT_COLUMNS = ("seed", "step", "n_labels", "n_acquired")
_FLOAT_COLUMNS = ("accuracy", "train_time", "query_time", "eval_time", "time")


def _parse_row(row: dict, where: str = "", index: Optional[int] = None) -> dict:
    """Parse one CSV row's numeric columns; raise :class:`DamagedResultsError`
    naming ``where`` (file and line) when a column is missing or malformed."""
    if None in row:  # more fields than the header: csv puts the rest under None
        raise DamagedResultsError(f"{where}: more fields than the header has; the file is damaged", index)
    for k in ("preset", "strategy", "variant") + _INT_COLUMNS + _FLOAT_COLUMNS + ("query_indices",):
        if row.get(k) in (None, "") and k != "query_indices":
            raise DamagedResultsError(f"{where}: column {k!r} is missing or empty; the file looks cut or damaged",
                                      index)
    try:
        for k in _INT_COLUMNS:
            row[k] = int(row[k])
        for k in _FLOAT_COLUMNS:
            row[k] = float(row[k])
        for k in OPTIONAL_COLUMNS:  # absent from files written before they existed
            value = row.get(k)
            row[k] = float(value) if value not in (None, "") else None
        indices = (row.get("query_indices") or "").split()
        [int(i) for i in indices]
    except (TypeError, ValueError) as exc:
        raise DamagedResultsError(f"{where}: {exc}; the file looks cut or damaged", index) from None
    if row["n_labels"] < 0 or row["step"] < 0 or not np.isfinite(row["accuracy"]):
        raise DamagedResultsError(f"{where}: impossible values (step {row['step']}, n_labels {row['n_labels']}, "
                                  f"accuracy {row['accuracy']})", index)
    return row


def read_results(path: Union[str, os.PathLike]) -> List[dict]:
    """Rows of a results.csv (or of one run's CSV), with numeric columns parsed.

    Every run in the file is checked with :func:`check_run_rows`. A last row
    without its line terminator is torn and refused, even when its fields
    still parse (a query index cut at a digit, ``... 231 1`` for
    ``... 231 1235``, keeps the count of indices right).

    Raises
    ------
    DamagedResultsError
        (a ValueError) naming the file and line of a row that is cut, torn,
        malformed or does not fit its run's history.

    Examples
    --------
    >>> import csv, tempfile
    >>> from pathlib import Path
    >>> from skdbal.experiments import COLUMNS
    >>> def write(path, rows):                   # a run's rows as the runner writes them
    ...     with open(path, "w", newline="") as f:
    ...         w = csv.DictWriter(f, COLUMNS)
    ...         w.writeheader()
    ...         w.writerows({**dict.fromkeys(COLUMNS, ""), **r} for r in rows)
    >>> run = [dict(preset="gal2017", strategy="bald", variant="bayesian", seed=1, step=i, n_labels=n,
    ...             n_acquired=n - 2, accuracy=acc, train_time=1, query_time=0, eval_time=0, time=1,
    ...             query_indices=q) for i, (n, acc, q) in enumerate([(2, 0.5, "4 7"), (3, 0.6, "9")])]
    >>> path = Path(tempfile.mkdtemp()) / "results.csv"
    >>> write(path, run)
    >>> [(r["step"], r["n_labels"], r["accuracy"], r["noise_rate"]) for r in read_results(path)]
    [(0, 2, 0.5, None), (1, 3, 0.6, None)]
    >>> write(path, [run[0], {**run[1], "n_labels": 4}])   # a total that the indices do not add up to
    >>> read_results(path)
    Traceback (most recent call last):
        ...
    skdbal.experiments.runner.DamagedResultsError: ...line 3 (step 1): n_labels is 4 and n_acquired 1, but the query indices so far add up to 3 labels, 1 acquired; the row is cut or damaged
    """
    raw, torn = _read_csv(path)
    # line numbers count the header as line 1
    rows = [_parse_row(row, f"{path}, line {i + 2}", i) for i, row in enumerate(raw)]
    if torn:
        raise _torn_row_error(path, rows)
    runs = defaultdict(list)
    for i, row in enumerate(rows):
        runs[(row["preset"], row["strategy"], row["variant"], row["seed"], row["noise_rate"] or 0.0)].append(i)
    for positions in runs.values():
        check_run_rows([rows[i] for i in positions], path, lines=[i + 2 for i in positions])
    return rows


def _read_csv(path) -> tuple:
    """The raw rows of the CSV file ``path``, and whether its last row is
    torn: written without its line terminator. The runner writes whole files
    atomically with every row terminated, so a last row without a terminator
    was cut (in a copy, a commit, a transfer), whether or not it still parses."""
    with open(path, newline="") as f:
        text = f.read()
    raw = list(csv.DictReader(io.StringIO(text)))
    return raw, bool(raw) and not text.endswith(("\n", "\r"))


def _torn_row_error(path, rows: list) -> DamagedResultsError:
    """The error for ``path``'s torn last row (``rows`` parsed, one per line)."""
    return DamagedResultsError(
        f"{path}, line {len(rows) + 1} (step {rows[-1]['step']}): the row has no line terminator, so it is torn "
        "(the file was cut while it was written or copied), even though its fields parse", len(rows) - 1)


def check_run_rows(rows: List[dict], path, initial=None, lines: Optional[Sequence[int]] = None) -> None:
    """Check that one run's rows form a consistent history.

    Steps are 0, 1, 2, ... in order; a run's preset, strategy, variant and
    seed are the same in every row; each row's ``n_labels`` is the running
    total of the query indices (the initial set in step 0) and
    ``n_acquired`` that total less the initial set; no index is
    labelled twice; the run starts from ``initial`` when it is given.

    ``lines`` are the rows' line numbers in ``path`` (default: one run per
    file, from line 2).

    Raises
    ------
    DamagedResultsError
        Naming ``path`` and the line of the first row that does not check out.

    Examples
    --------
    >>> from skdbal.experiments import check_run_rows
    >>> rows = [dict(preset="gal2017", strategy="bald", variant="bayesian", seed=1, step=0, n_labels=2,
    ...              n_acquired=0, query_indices="4 7"),
    ...         dict(preset="gal2017", strategy="bald", variant="bayesian", seed=1, step=1, n_labels=3,
    ...              n_acquired=1, query_indices="4")]
    >>> check_run_rows(rows[:1], "run.csv", initial=[4, 7])      # consistent: nothing happens
    >>> check_run_rows(rows, "run.csv")
    Traceback (most recent call last):
        ...
    skdbal.experiments.runner.DamagedResultsError: run.csv, line 3 (step 1): an index is labelled twice; the row is damaged
    """
    total, n_initial, seen = 0, 0, set()
    for i, row in enumerate(rows):
        where = f"{path}, line {lines[i] if lines is not None else i + 2} (step {row['step']})"
        if row["step"] != i:
            raise DamagedResultsError(f"{where}: expected step {i}; steps must run 0, 1, 2, ... without gaps", i)
        for k in ("preset", "strategy", "variant", "seed"):
            if row[k] != rows[0][k]:
                raise DamagedResultsError(f"{where}: {k} is {row[k]!r}, but {rows[0][k]!r} in the first row", i)
        indices = [int(v) for v in row["query_indices"].split()]
        total += len(indices)
        if i == 0:
            n_initial = total
        if row["n_labels"] != total or row["n_acquired"] != total - n_initial:
            raise DamagedResultsError(
                f"{where}: n_labels is {row['n_labels']} and n_acquired {row['n_acquired']}, but the query "
                f"indices so far add up to {total} labels, {total - n_initial} acquired; the row is cut or "
                "damaged", i)
        if seen.intersection(indices) or len(set(indices)) != len(indices):
            raise DamagedResultsError(f"{where}: an index is labelled twice; the row is damaged", i)
        seen.update(indices)
        if i == 0 and initial is not None and not np.array_equal(np.asarray(indices), np.asarray(initial)):
            raise DamagedResultsError(f"{where}: the run does not start from this seed's initial set", i)


def assemble_results(out_dir: Union[str, os.PathLike]) -> List[dict]:
    """Write ``out_dir/results.csv`` from the run files in ``out_dir/runs``
    and return its rows.

    Each run file is checked (:func:`check_run_rows`); a damaged last row is
    left out, as its run will compute that step again, and any other damage
    raises :class:`DamagedResultsError` naming the file and line.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from skdbal.experiments import RunSpec, assemble_results, get_preset, run_one
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=1, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = run_one(RunSpec(tiny, "random", seed=1), out, torch_threads=1)
    >>> (out / "results.csv").unlink()                # lost: the run files hold everything
    >>> [(r["strategy"], r["step"]) for r in assemble_results(out)], (out / "results.csv").exists()
    ([('random', 0), ('random', 1)], True)
    """
    out_dir = Path(out_dir)
    rows = []
    for run_csv in sorted((out_dir / "runs").glob("*.csv")):
        rows.extend(read_run_file(run_csv))
    rows.sort(key=lambda r: (r["preset"], r["strategy"], r["variant"], r["noise_rate"] or 0.0, r["seed"], r["step"]))
    _atomic_write(out_dir / "results.csv", _csv_bytes(rows))
    return rows


# ---------------------------------------------------------------------------- runs
#: Preset fields that do not change a run's rows: a run can be extended to more queries.
_FREE_FIELDS = ("n_queries", "notes")


#: Run-file keys recorded for the record, not compared when resuming.
_RECORDED_ONLY = ("torch_threads", "strategy_object", "device", "device_steps")


def _check_run_config(spec: RunSpec, runs: Path, warn: bool = False) -> dict:
    """The JSON form of ``spec``'s configuration; raise ValueError if ``runs``
    already holds this run with another configuration.

    A run CSV with rows but no JSON is refused (:class:`DamagedResultsError`):
    the configuration its rows were computed with is unknown. A JSON with no
    rows beside it (a start that failed before its first row) records
    nothing that was computed: another configuration replaces it (with a
    UserWarning if ``warn``)."""
    config = json.loads(json.dumps(spec.config(), default=str))
    config_path = runs / f"{spec.run_id}.json"
    csv_path = runs / f"{spec.run_id}.csv"
    if not config_path.exists() and _has_rows(csv_path):
        raise DamagedResultsError(
            f"{csv_path} holds rows but {config_path.name} is missing, so the configuration its rows were "
            f"computed with is unknown and the run cannot be resumed under any; restore {config_path}, or delete "
            f"{runs / spec.run_id}.* to run it again from the start")
    if config_path.exists() and not _has_rows(csv_path):
        try:
            stored = json.loads(config_path.read_text())
        except ValueError:
            stored = None
        if stored is None or not _same_config(stored, config):
            if warn:
                warnings.warn(f"{config_path} records a run that wrote no rows (a start that failed) with another "
                              "configuration; it is replaced by this one", UserWarning, stacklevel=3)
            return config
    if config_path.exists():
        try:
            stored = json.loads(config_path.read_text())
        except ValueError as exc:
            raise DamagedResultsError(
                f"{config_path} is damaged ({exc}). It records the configuration the run started with, so the "
                f"run cannot be resumed safely; restore the file, or delete {runs / spec.run_id}.* to run it "
                "again from the start") from None
        if not _same_config(stored, config):
            differences = "\n".join(f"  {key}: {a!r} in the folder, {b!r} asked"
                                     for key, a, b in _config_differences(stored, config))
            raise ValueError(
                f"{config_path} was written by a different configuration; use another output folder, or ask "
                f"for the same one:\n{differences}")
    return config


def _has_rows(csv_path: Path) -> bool:
    """Whether the run CSV ``csv_path`` exists with at least one row after its header."""
    try:
        with open(csv_path, "rb") as f:
            return len([line for line in f.read().splitlines() if line.strip()]) > 1
    except FileNotFoundError:
        return False


#: Run-file keys that differ between the runs of one grid by design; the rest
#: of a run's configuration (the preset but for ``_FREE_FIELDS``, the results
#: version) is the folder's, shared by every run in it.
_PER_RUN = ("strategy", "seed", "mc_dropout", "last_layer", "noise_rate", "initial_set", "ensemble", "laplace")


def _folder_configs(runs: Path) -> dict:
    """``{run file: stored configuration}`` of the runs in ``runs`` that wrote rows."""
    configs = {}
    for path in sorted(runs.glob("*.json")) if runs.is_dir() else []:
        if not _has_rows(path.with_suffix(".csv")):
            continue
        try:
            configs[path] = json.loads(path.read_text())
        except ValueError:
            continue  # damaged: its own run refuses it when resumed (_check_run_config)
    return configs


def _check_folder_config(spec: RunSpec, configs: dict) -> None:
    """Raise ValueError if ``spec`` differs from the runs already in the folder
    (``configs``, from :func:`_folder_configs`) in more than what differs per
    run by design (``_PER_RUN``), so that a report never averages runs of
    different configurations as seeds of one."""
    config = json.loads(json.dumps(spec.config(), default=str))
    mine = {k: v for k, v in config.items() if k not in _PER_RUN}
    for path, stored in configs.items():
        if path.stem == spec.run_id:
            continue  # the run itself: _check_run_config compares it whole
        theirs = {k: v for k, v in stored.items() if k not in _PER_RUN}
        differences = _config_differences(theirs, mine)
        if differences:
            lines = "\n".join(f"  {key}: {a!r} in the folder, {b!r} asked" for key, a, b in differences)
            raise ValueError(
                f"{path.parent.parent} holds runs of another configuration (e.g. {path.name}), and a report "
                f"would average them with {spec.run_id} as seeds of one; use another output folder, or ask for "
                f"the same configuration:\n{lines}")


def _config_differences(stored: dict, current: dict) -> list:
    """``(field, stored value, asked value)`` for each field that makes
    :func:`_same_config` false; preset fields as ``preset.<name>``."""
    a, b = comparable_configs(stored, current)
    out = []
    for key in sorted(set(a) | set(b)):
        if key == "preset":
            for name in sorted(set(a.get("preset", {})) | set(b.get("preset", {}))):
                x, y = a.get("preset", {}).get(name, "(missing)"), b.get("preset", {}).get(name, "(missing)")
                if x != y:
                    out.append((f"preset.{name}", x, y))
        elif a.get(key, "(missing)") != b.get(key, "(missing)"):
            out.append((key, a.get(key, "(missing)"), b.get(key, "(missing)")))
    return out


def _same_config(stored: dict, current: dict) -> bool:
    """Equal but for ``_FREE_FIELDS``; preset fields added since ``stored`` was
    written may hold their defaults."""
    a, b = comparable_configs(stored, current)
    return a == b


def comparable_configs(stored: dict, current: dict):
    """``stored`` and ``current`` without the fields that do not matter, and
    with the fields added since ``stored`` was written filled in."""
    defaults = json.loads(json.dumps(Preset(name="").as_dict(), default=str))
    a = {**stored, "preset": dict(stored.get("preset", {}))}
    b = {**current, "preset": dict(current.get("preset", {}))}
    for key in _RECORDED_ONLY:
        a.pop(key, None)
        b.pop(key, None)
    for key in _FREE_FIELDS:
        a["preset"].pop(key, None)
        b["preset"].pop(key, None)
    for key, value in b["preset"].items():
        if key not in a["preset"] and key in _IMPLICIT_BEFORE:
            a["preset"][key] = _IMPLICIT_BEFORE[key]
        elif key not in a["preset"] and key in defaults and value == defaults[key]:
            a["preset"][key] = value
    return a, b


def _duration(seconds: float) -> str:
    """``"42 s"``, ``"7 min"`` or ``"2.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


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
    _check_sizes(spec.preset)
    _check_folder_config(spec, _folder_configs(Path(out_dir) / "runs"))
    return _run_one(spec, out_dir, torch_threads, data_home, verbose, warn=True, device=resolve_device(device))


def resolve_device(device: str = "auto") -> str:
    """``"auto"``: ``"cuda"`` when torch sees a GPU, else ``"cpu"``; any other
    name is checked by torch and returned.

    Raises
    ------
    ValueError
        For a name torch does not know, or a CUDA device without a GPU.

    Examples
    --------
    >>> from skdbal.experiments.runner import resolve_device
    >>> resolve_device("cpu"), resolve_device("auto") in ("cpu", "cuda")
    ('cpu', True)
    >>> resolve_device("gpu")
    Traceback (most recent call last):
        ...
    ValueError: device must be 'auto', 'cpu', 'cuda' or another torch device; got 'gpu'
    """
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or another torch device; got {device!r}") from exc
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for, but torch sees no CUDA GPU")
    return str(device)


def _run_one(spec, out_dir, torch_threads, data_home, verbose, warn, device="cpu"):
    out_dir = Path(out_dir)
    runs = out_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    run_threads = torch_threads or threads
    with _exclusive(runs / f".{spec.run_id}.lock", f"run {spec.run_id} in {out_dir}"):
        config = _check_run_config(spec, runs, warn=warn)  # under the lock: no writer can change it meanwhile
        config_path = runs / f"{spec.run_id}.json"
        if not config_path.exists() or not _has_rows(runs / f"{spec.run_id}.csv"):  # new, or a failed start
            _atomic_write(config_path, json.dumps({**config, "torch_threads": run_threads, "device": device},
                                                  indent=1).encode())
        rows = _stored_rows(spec, runs, warn=warn)
        if _finished(spec, rows):
            return rows
        message = _device_mismatch(spec, runs, device, rows) if warn else None
        if message:
            warnings.warn(message, UserWarning)
        _record_device(config_path, len(rows), device)
        message = _thread_mismatch(spec, runs, run_threads, rows) if warn else None
        if message:
            warnings.warn(message, RuntimeWarning)
        torch.set_num_threads(run_threads)
        try:
            return _run_steps(spec, out_dir, rows, data_home, verbose, device)
        finally:
            torch.set_num_threads(threads)


def _device_steps(stored: dict, first_step: int) -> list:
    """``[first step, device]`` of each device that computed a run's steps before
    ``first_step``, from its stored file: its ``device_steps``, else one entry
    ``[0, device]`` (``"unknown"`` for a file that records none)."""
    return [list(s) for s in stored.get("device_steps") or [[0, stored.get("device", "unknown")]]
            if s[0] < first_step]


def _record_device(config_path: Path, first_step: int, device: str) -> None:
    """Record in a run's file that its steps from ``first_step`` on are computed on ``device``.

    ``device`` names the run's device. When a run is resumed on another
    device, or its file was written before the runner recorded devices (then
    ``"unknown"`` for the steps before), ``device_steps`` lists
    ``[first step, device]`` pairs and ``device`` spells them out, e.g.
    ``"cpu (steps 0-11), cuda (steps 12-)"``; rows of one run then come from
    two devices, which compute different numbers.
    """
    stored = json.loads(config_path.read_text())
    steps = _device_steps(stored, first_step)  # entries past first_step belong to dropped rows
    if not steps or steps[-1][1] != device:
        steps.append([first_step, device])
    record = {"device": steps[0][1]} if len(steps) == 1 else {
        "device": ", ".join(f"{d} (steps {a}-{'' if b is None else b - 1})"
                            for (a, d), b in zip(steps, [s[0] for s in steps[1:]] + [None])),
        "device_steps": steps}
    if any(stored.get(key) != value for key, value in record.items()) or \
            ("device_steps" in stored and "device_steps" not in record):
        stored.pop("device_steps", None)
        _atomic_write(config_path, json.dumps({**stored, **record}, indent=1).encode())


def _stored_rows(spec: RunSpec, runs: Path, warn: bool = False) -> list:
    """The rows ``spec``'s run has written so far in ``runs``, checked (see
    :func:`read_run_file`)."""
    csv_path = runs / f"{spec.run_id}.csv"
    return read_run_file(csv_path, warn) if csv_path.exists() else []


def read_run_file(csv_path: Path, warn: bool = False) -> list:
    """The rows of one run's CSV, checked with :func:`check_run_rows`.

    A damaged last row, which is what a cut write leaves, is dropped (with a
    RuntimeWarning if ``warn``): its step is computed again from the rows
    before it, which check out. A torn last row (no line terminator) is
    damaged even when its fields check out. Damage anywhere else raises
    :class:`DamagedResultsError`, since the run cannot be trusted.
    """
    raw, torn = _read_csv(csv_path)
    try:
        rows = [_parse_row(row, f"{csv_path}, line {i + 2}", i) for i, row in enumerate(raw)]
        if torn:
            raise _torn_row_error(csv_path, rows)
        check_run_rows(rows, csv_path)
        return rows
    except DamagedResultsError as exc:
        if exc.row is None or exc.row != len(raw) - 1:
            stem = csv_path.with_suffix("")
            raise DamagedResultsError(f"{exc}. Only a damaged last row can be recomputed; delete "
                                      f"{stem}.* to run it again from the start", exc.row) from None
        if warn:
            warnings.warn(f"{exc}. It is the last row, as a cut write leaves it: step {exc.row} will be "
                          "computed again", RuntimeWarning)
        rows = [_parse_row(row, f"{csv_path}, line {i + 2}", i) for i, row in enumerate(raw[:-1])]
        check_run_rows(rows, csv_path)
        return rows


def _fit_step_model(spec: RunSpec, step: int, X, y, valid, device: str = "cpu", state=None, start=None):
    """Step ``step``'s model of ``spec``'s run on its labelled set ``(X, y)``:
    the network (rebuilt from the cached ``state`` if given, else trained with
    the step's seed, so that it is the same model every time, on from the
    weights ``start`` with ``warm_epochs``) and, with a Bayesian last layer,
    the pipeline of its features and the layer."""
    if spec.ensemble:
        return _fit_ensemble(spec, step, X, y, state, device, valid, len(X))
    net = make_estimator(spec.preset, mc_dropout=spec.mc_dropout, random_state=step_seed(spec.seed, step),
                         device=device, valid=valid, n_train=len(X))
    if state is not None or start is not None:
        train = {"callbacks": net.callbacks}
        net.set_params(max_epochs=0, callbacks=None)
        net.fit(X[:1], y[:1])  # builds the module (and a fresh optimizer) only
        net.module_.load_state_dict(state if state is not None else start)
        if state is None:  # warm start: train on from the previous step's weights
            net.set_params(warm_start=True, callbacks=train["callbacks"], max_epochs=spec.preset.warm_epochs)
            net.fit(X, y)
    else:
        net.fit(X, y)
    if spec.laplace:   # the trained network's last-layer Laplace posterior (laplace-torch)
        from ..laplace import LaplaceClassifier

        return LaplaceClassifier(net, prefit=True, n_samples=spec.preset.n_samples,
                                 random_state=step_seed(spec.seed, step)).fit(X, y)
    if uses_density(spec.strategy):   # DDU: the trained network and the density of its features
        from ..ddu import DDUClassifier

        return DDUClassifier(net, reg_covar=DDU_REG_COVAR, prefit=True).fit(X, y)
    if spec.last_layer is None:
        return net
    return make_last_layer(spec.preset, net, spec.last_layer).fit(X, _one_hot(y))


#: The jitter of DDU's class covariances in the runner: 128 features and 2 to 30 labels per class.
DDU_REG_COVAR = 1e-2


def uses_density(strategy: str) -> bool:
    """Whether a strategy name reads a feature density (``ddu``, decorated or not): its runs wrap the
    network in :class:`~skdbal.ddu.DDUClassifier`.

    Examples
    --------
    >>> from skdbal.experiments.runner import uses_density
    >>> uses_density("ddu"), uses_density("stochastic(ddu,softmax,1)"), uses_density("bald")
    (True, True, False)
    """
    from ..acquisition import parse_strategy_name

    decorator, inner, _ = parse_strategy_name(strategy)
    return inner == "ddu" if decorator is None else uses_density(inner)


def _labelled_indices(rows: list) -> np.ndarray:
    """The labelled set after ``rows``: the initial set, then each step's queries, in order."""
    return np.concatenate([np.array(r["query_indices"].split(), dtype=np.intp) for r in rows])


def _stored_preset(config: dict) -> Preset:
    """The preset of a run's stored ``config``; fields added since it was
    written hold the values they implicitly had (``_IMPLICIT_BEFORE``)."""
    fields = {k: v for k, v in config["preset"].items() if k not in ("name", "notes")}
    return get_preset(config["preset"]["name"], **{**_IMPLICIT_BEFORE, **fields})


def _fit_ensemble(spec, step, X, y, states, device, valid, n_train):
    """A :class:`~skdbal.DeepEnsembleClassifier` of ``spec.ensemble`` of the
    preset's networks with dropout off at prediction (each member trains with
    dropout as usual), seeded by the step; with ``states`` (one module state
    per member), the members are rebuilt from them instead of trained."""
    from ..ensemble import DeepEnsembleClassifier

    template = make_estimator(spec.preset, mc_dropout=False, device=device, valid=valid, n_train=n_train)
    ens = DeepEnsembleClassifier(template, n_members=spec.ensemble, random_state=step_seed(spec.seed, step))
    if states is None:
        return ens.fit(X, y)
    if not isinstance(states, list) or len(states) != spec.ensemble:
        raise KeyError(f"the cache holds no {spec.ensemble} member states")
    seeds = np.random.RandomState(ens.random_state).randint(np.iinfo(np.int32).max, size=spec.ensemble)
    members = []
    for seed, state in zip(seeds, states):
        member = clone(template).set_params(random_state=int(seed), max_epochs=0, callbacks=None)
        member.fit(X[:1], y[:1])  # builds the module only
        member.module_.load_state_dict(state)
        members.append(member)
    ens.estimators_, ens.classes_, ens.seeds_ = members, members[0].classes_, seeds
    return ens


def _load_weights(path: Path, step: int):
    """The cached model state of ``step`` from ``path``, or None (missing, of
    another step, or unreadable: then the model is refitted from its labels)."""
    if not path.exists():
        return None
    try:
        cache = torch.load(path, weights_only=True)
        if cache["step"] == step:
            return cache["model_state"]
    except Exception as exc:  # a cut file: torch raises RuntimeError, EOFError, pickle errors...
        warnings.warn(f"{path} cannot be read ({type(exc).__name__}: {exc}); the model of step {step} is "
                      "refitted from its labels instead", RuntimeWarning)
    return None


def _finished(spec: RunSpec, rows: list) -> bool:
    """Whether ``rows`` hold every step of ``spec``'s run (step 0 included)."""
    return len(rows) >= spec.preset.n_queries + 1


def _thread_mismatch(spec: RunSpec, runs: Path, run_threads: int, rows: list) -> Optional[str]:
    """A warning if ``spec``'s unfinished run, with ``rows`` written so far,
    started with another thread count."""
    config_path = runs / f"{spec.run_id}.json"
    if not config_path.exists() or _finished(spec, rows):
        return None  # new, or finished: nothing will be recomputed
    stored = json.loads(config_path.read_text()).get("torch_threads")
    if stored is None or stored == run_threads:
        return None
    return (f"{spec.run_id} was started with {stored} torch thread(s) and resumes with {run_threads}; "
            "CPU kernels may round differently, so its remaining rows can differ in the last digits "
            f"from an uninterrupted run (pass torch_threads={stored} to avoid this)")


def _device_mismatch(spec: RunSpec, runs: Path, device: str, rows: list) -> Optional[str]:
    """A warning if ``spec``'s unfinished run, with ``rows`` written so far,
    computed its last rows on another device than ``device``."""
    config_path = runs / f"{spec.run_id}.json"
    if not rows or not config_path.exists() or _finished(spec, rows):
        return None  # new, or finished: nothing will be recomputed
    stored = json.loads(config_path.read_text())
    steps = _device_steps(stored, len(rows))
    before = steps[-1][1] if steps else stored.get("device", "unknown")
    if before == device:
        return None
    return (f"{spec.run_id} computed its steps so far on {before} and resumes on {device}; the two devices "
            "compute different numbers, so its remaining rows differ from an uninterrupted run's (the run file "
            f"records the steps of each device; pass device={before!r} to avoid this)")


#: Sizes of the training and test sets of each data set (load_data's), for the
#: checks made before a run starts.
_DATA_SIZES = {"mnist": (60000, 10000), "repeated_mnist": (180000, 10000), "digits": (1297, 500)}
#: Classes of every data set: the initial set holds n_initial_per_class of each.
_N_CLASSES = 10


def _check_sizes(preset: Preset) -> None:
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


class _RunJournal:
    """The journal of one run on disk (:class:`skdbal.loop.MemoryJournal`'s
    protocol): each step becomes a CSV row, with the test metrics, the noise
    counts and the pool indices in the training set's numbering; the weights
    of the step's model are cached beside it. Files are replaced atomically,
    cache first (a stale cache is detected by its step)."""

    def __init__(self, spec, out_dir, rows, pool, initial, oracle, X_test, y_test, verbose):
        self.spec, self.out_dir, self.csv_rows = spec, out_dir, rows
        self.pool, self.n_initial, self.oracle = pool, len(initial), oracle
        self.X_test, self.y_test, self.verbose = X_test, y_test, verbose
        self.csv_path = out_dir / "runs" / f"{spec.run_id}.csv"
        self.weights_path = out_dir / "runs" / f"{spec.run_id}.pt"
        self.position = np.full(int(pool.max()) + 1, -1, dtype=np.intp)  # training-set index -> pool position
        self.position[pool] = np.arange(len(pool))
        self._rows = []
        for r in rows:  # the loop's rows: the queried pool positions of each step
            labelled = self.position[np.array(r["query_indices"].split(), dtype=np.intp)]
            self._rows.append({"step": r["step"], "query_indices": labelled.tolist()})
        self._times = []

    def rows(self) -> list:
        return self._rows

    def append(self, row: dict, learner) -> None:
        spec, preset = self.spec, self.spec.preset
        est = learner.estimator_
        query = self.pool[np.asarray(row["query_indices"], dtype=np.intp)]
        rejected = (self.pool[np.asarray(row["rejected_indices"], dtype=np.intp)]
                    if "rejected_indices" in row else None)
        t0 = time.perf_counter()
        extra = {}
        for key, column in (("threshold", "threshold"), ("noise_rate", "noise_estimate")):  # a filter's
            if row["step"] and key in row:
                extra[column] = float(row[key])
        if spec.noise_rate or rejected is not None:
            flipped = getattr(self.oracle, "flipped", np.zeros(len(self.pool), dtype=bool))
            extra["noise_rate"] = spec.noise_rate
            extra["n_flipped_acquired"] = int(flipped[row["query_indices"]].sum()) if row["step"] else 0
            if rejected is not None:
                extra["n_rejected"] = len(rejected)
                extra["n_rejected_flipped"] = int(flipped[row["rejected_indices"]].sum())
        X_test, y_test = self.X_test, self.y_test
        if spec.last_layer is None:
            # the test predictions of the preset's eval_method; accuracy, ECE and NLL all from them
            proba = np.asarray(est.predict_proba(X_test), dtype=np.float64)
            accuracy = float(np.mean(est.classes_[proba.argmax(axis=1)] == y_test))
            extra["ece"] = expected_calibration_error(y_test, proba, classes=est.classes_)
            p_true = proba[np.arange(len(y_test)), label_columns(est.classes_, y_test, "y_test")]
            extra["nll"] = float(-np.mean(np.log(np.maximum(p_true, 1e-12))))  # nats; float32 rows
        else:
            F = est[0].transform(X_test)
            mean = est[-1].predict(F)
            accuracy = float(np.mean(mean.argmax(axis=1) == y_test))
            extra.update({"rmse": float(np.sqrt(np.mean((mean - _one_hot(y_test)) ** 2))),
                          "mean_variance": float(np.mean(est[-1].predictive_variance(F)))})
        t_eval = time.perf_counter() - t0
        t_train, t_query = row["fit_time"], row["query_time"]
        n_labels = row["n_labels"]
        self.csv_rows.append({
            "preset": preset.name, "strategy": spec.strategy, "variant": spec.variant, "seed": spec.seed,
            "step": row["step"], "n_labels": n_labels, "n_acquired": n_labels - self.n_initial,
            "accuracy": accuracy, **extra, "train_time": round(t_train, 3), "query_time": round(t_query, 3),
            "eval_time": round(t_eval, 3), "time": round(t_train + t_query + t_eval, 3),
            "query_indices": " ".join(map(str, query))})
        self._rows.append({"step": row["step"], "query_indices": list(row["query_indices"])})
        buf = io.BytesIO()
        state = ([m.module_.state_dict() for m in est.estimators_] if spec.ensemble
                 else _net_of(est).module_.state_dict())
        torch.save({"step": row["step"], "model_state": state}, buf)
        _atomic_write(self.weights_path, buf.getvalue())  # cache first: a stale cache is detected
        _atomic_write(self.csv_path, _csv_bytes(self.csv_rows))
        assemble_results(self.out_dir)
        if self.verbose:
            r = self.csv_rows[-1]
            if not r["step"]:
                print(f"{spec.run_id}: step 0/{preset.n_queries}, {r['n_labels']} labels, "
                      f"accuracy {r['accuracy']:.4f} ({r['time']:.1f} s)", flush=True)
            else:
                self._times.append(r["time"])
                left = (preset.n_queries - r["step"]) * float(np.mean(self._times[-10:]))
                print(f"{spec.run_id}: step {r['step']}/{preset.n_queries}, {r['n_labels']} labels, accuracy "
                      f"{r['accuracy']:.4f} ({r['time']:.1f} s; run done in ~{_duration(left)})", flush=True)


def _learner_template(spec: RunSpec, device: str, valid=None):
    """What a run's model is (for the learner's checks of labels and inputs);
    the models themselves are trained by :func:`_fit_step_model`. ``valid``:
    the run's validation set, which a preset selecting on it needs."""
    net = make_estimator(spec.preset, mc_dropout=spec.mc_dropout and not spec.ensemble, device=device,
                         valid=valid, n_train=spec.preset.batch_size or 1)
    if spec.laplace:
        from ..laplace import LaplaceClassifier

        return LaplaceClassifier(net, n_samples=spec.preset.n_samples)
    if uses_density(spec.strategy):
        from ..ddu import DDUClassifier

        return DDUClassifier(net, reg_covar=DDU_REG_COVAR)
    return net if spec.last_layer is None else make_last_layer(spec.preset, net, spec.last_layer)


def _run_steps(spec, out_dir, rows, data_home, verbose, device="cpu"):
    """Run (or resume) ``spec``'s steps after ``rows`` with the one loop,
    :class:`skdbal.loop.ActiveLearningLoop`: a learner owning the run's pool
    (seeded per step), the run's oracle (known or noisy labels) and its
    journal on disk (:class:`_RunJournal`)."""
    preset = spec.preset
    X_train, y_train, X_test_all, y_test_all = load_data(preset.dataset, data_home)
    val, pool, initial, test = _split(preset, spec.seed, y_train, len(y_test_all), X_train, spec.initial_set)
    valid = (X_train[val], y_train[val])
    # the annotator: a fixed noisy one for a noise run, labelling the initial set correctly
    if spec.noise_rate:
        noisy = NoisyAnnotator.flip(y_train, spec.noise_rate, classes=np.unique(y_train),
                                    random_state=np.random.RandomState([spec.seed, 7907]), clean=initial)
        oracle = NoisyAnnotator(y_train[pool], noisy.y[pool])
    else:
        oracle = KnownLabels(y_train[pool])
    journal = _RunJournal(spec, out_dir, rows, pool, initial, oracle, X_test_all[test], y_test_all[test], verbose)
    csv_path, weights_path = journal.csv_path, journal.weights_path
    if rows:
        labelled = _labelled_indices(rows)
        if not np.array_equal(labelled[:len(initial)], initial):
            raise ValueError(f"{csv_path} does not start from this seed's initial set")
    cache = {"step": rows[-1]["step"] if rows else None}
    # warm_epochs: the network weights of the previous step's model, {"step", "state"}
    previous = {}

    def keep(step, model):
        if preset.warm_epochs is not None:
            previous.update(step=step, state={k: v.detach().clone() if torch.is_tensor(v) else v for k, v in
                                              _net_of(model).module_.state_dict().items()})
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
                keep(j, _fit_step_model(spec, j, X[:n], y[:n], valid, device, start=start_of(j, X, y)))
        return previous["state"]

    def fit_model(step, X, y):
        if step == cache.pop("step", None):  # resuming: the cached weights of the last step, if they fit
            state = _load_weights(weights_path, step)
            if state is not None:
                try:
                    return keep(step, _fit_step_model(spec, step, X, y, valid, device, state=state))
                except (RuntimeError, KeyError) as exc:  # a state of another architecture
                    warnings.warn(f"{weights_path} does not fit the model ({exc}); the model of step {step} is "
                                  "refitted from its labels instead", RuntimeWarning)
        # the same model every time: seeded by the step (and, with warm_epochs, by the earlier steps)
        return keep(step, _fit_step_model(spec, step, X, y, valid, device, start=start_of(step, X, y)))

    learner = ActiveLearner(_learner_template(spec, device, valid), get_strategy(spec.strategy),
                            pool_subsample=preset.pool_subsample, random_state=spec.seed, seeding="step",
                            verbose=False)
    learner.set_pool(X_train[pool], ids=pool)  # subsampled candidates are scored in training-set order
    loop = ActiveLearningLoop(learner, oracle, n_instances=preset.n_instances, journal=journal,
                              fit_model=fit_model, query_kwargs={"random_tie_break": True},
                              pass_pool_labels=True, verbose=False)
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
        ``"diverse(bald,0.1)"``), which names its runs.
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
        step's network (:class:`~skdbal.laplace.LaplaceClassifier`, through
        laplace-torch, prior precision by marginal likelihood; variant
        ``"laplace"``) instead of MC dropout: the network trains as usual,
        then the posterior is fitted on the labelled set, and its
        ``n_samples`` last-layer samples are the strategies' samples.
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
    if isinstance(strategies, str):
        raise TypeError(f"strategies must be a list of names; got the str {strategies!r}")
    # one spelling per strategy (ValueError naming an unknown or malformed one), so that
    # "filter(bald, dynamic)" and "diverse(bald,0.10)" get the files of "filter(bald,dynamic)", "diverse(bald,0.1)"
    strategies = [canonical_name(name) for name in strategies]
    strategies, seeds, last_layer = (list(dict.fromkeys(v)) for v in (strategies, seeds, last_layer))  # no repeats
    if not strategies:
        raise ValueError("give at least one strategy")
    _check_sizes(preset)
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
    if laplace:
        specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i, laplace=True)
                 for i in initial_sets for r in noise_rates for seed in seeds for s in strategies]
    elif ensemble:
        specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i, ensemble=int(ensemble))
                 for i in initial_sets for r in noise_rates for seed in seeds for s in strategies]
    elif last_layer:
        specs = [RunSpec(preset, s, int(seed), last_layer=v, noise_rate=r, initial_set=i)
                 for i in initial_sets for r in noise_rates for v in last_layer for seed in seeds for s in strategies]
    else:
        specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i)
                 for i in initial_sets for r in noise_rates for seed in seeds for s in strategies]
    if "predictive_variance" in strategies and not last_layer:
        raise ValueError("the predictive_variance strategy needs a regressor: pass last_layer")
    if deterministic_baseline:
        without = [s for s in strategies if s not in DETERMINISTIC_BASELINE]
        if len(without) == len(strategies):
            raise ValueError(f"--deterministic-baseline runs for {' and '.join(DETERMINISTIC_BASELINE)} only "
                             f"(Gal et al. 2017, §5.2), and the grid has neither: {', '.join(strategies)}")
        if without:
            warnings.warn(f"the deterministic baseline runs for {' and '.join(DETERMINISTIC_BASELINE)} only "
                          f"(Gal et al. 2017, §5.2); {', '.join(without)} get none", UserWarning, stacklevel=2)
        specs += [RunSpec(preset, s, int(seed), mc_dropout=False, noise_rate=r, initial_set=i)
                  for i in initial_sets for r in noise_rates for seed in seeds for s in strategies
                  if s in DETERMINISTIC_BASELINE]
    if torch_threads is None:
        torch_threads = 1 if scheduler is not None else max(1, (os.cpu_count() or 1) // max(1, n_jobs))
    out_dir = Path(out_dir)
    device = resolve_device(device)
    seen = {}
    for spec in specs:  # two runs of one grid must not share files
        other = seen.setdefault(spec.run_id, spec)
        if other is not spec:
            raise ValueError(f"strategies {other.strategy!r} and {spec.strategy!r} would write the same run files "
                             f"({spec.run_id}); name one of them differently")
    for spec in specs:  # refuse a clashing folder before writing anything: the run's own file first,
        _check_run_config(spec, out_dir / "runs", warn=True)
    folder = _folder_configs(out_dir / "runs")
    for spec in specs:  # then the folder's other runs
        _check_folder_config(spec, folder)
    _check_report_length(out_dir, preset)
    done, resumed, new = [], [], []
    for spec in specs:  # warned here: warnings raised in joblib's worker processes are lost
        rows = _stored_rows(spec, out_dir / "runs", warn=True)  # raises here if a run is damaged beyond repair
        message = _thread_mismatch(spec, out_dir / "runs", torch_threads, rows)
        if message:
            warnings.warn(message, RuntimeWarning)
        message = _device_mismatch(spec, out_dir / "runs", device, rows)
        if message:
            warnings.warn(message, UserWarning)
        (done if _finished(spec, rows) else resumed if rows else new).append((spec, len(rows)))
    if verbose:
        where = f"{n_jobs} at a time" if scheduler is None else "on the Dask cluster"
        print(f"{len(specs)} run(s) into {out_dir}: {len(done)} finished, {len(resumed)} to resume, {len(new)} new; "
              f"{where}, {torch_threads} torch thread(s) each", flush=True)
        for spec, n in resumed:
            print(f"  {spec.run_id}: resumes at step {n} of {spec.preset.n_queries}", flush=True)
        if new or resumed:
            print("  (each run loads its data and fits its current step before its first line)", flush=True)
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    with _exclusive(out_dir / ".lock", f"the grid in {out_dir}"):
        for stale in list(out_dir.glob(".*.tmp")) + list((out_dir / "runs").glob(".*.tmp")):
            stale.unlink()  # left by a killed write; the file it was replacing is intact
        _record_invocation(out_dir, preset, {
            "strategies": list(strategies), "seeds": [int(s) for s in seeds],
            "deterministic_baseline": deterministic_baseline, "last_layer": list(last_layer),
            "noise_rates": noise_rates, "initial_sets": initial_sets, "ensemble": int(ensemble),
            **({"laplace": True} if laplace else {}),
            "n_jobs": n_jobs, "torch_threads": torch_threads, "device": device, "overrides": overrides,
            **({} if scheduler is None else {"scheduler": scheduler if isinstance(scheduler, str)
                                              else scheduler.scheduler_info()["address"]})})
        if scheduler is None:
            Parallel(n_jobs=n_jobs)(delayed(_run_one)(spec, out_dir, torch_threads, data_home, verbose, warn=False,
                                                      device=device) for spec in specs)
        else:
            from ..dask.grid import map_runs

            map_runs(scheduler, _run_one, [((spec, out_dir.resolve(), torch_threads, data_home, verbose),
                                            {"warn": False, "device": device}) for spec in specs],
                     [spec.run_id for spec in specs])
        return assemble_results(out_dir)


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
    """Append this call (its arguments and preset, the machine, the time) to ``grid.json``,
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
                          f"to {aside} and a new one is started", RuntimeWarning)
    invocations = meta.get("invocations", [])
    if not invocations and "strategies" in meta:  # written before invocations were recorded
        invocations = [{k: meta[k] for k in ("strategies", "seeds", "deterministic_baseline", "last_layer",
                                             "n_jobs", "torch_threads", "machine") if k in meta}]
    machine = {"platform": platform.platform(), "processor": platform.processor(),
               "cpu_count": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}
    invocation = {**invocation, "preset": preset.as_dict(), "machine": machine,
                  "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    invocations = invocations + [invocation]
    machines = []
    for entry in invocations:  # not only the latest: a folder's runs may come from several machines
        if entry.get("machine") is not None and entry["machine"] not in machines:
            machines.append(entry["machine"])
    meta = {"preset": preset.as_dict(), "machines": machines, "invocations": invocations}
    _atomic_write(path, json.dumps(meta, indent=2, default=str).encode())
