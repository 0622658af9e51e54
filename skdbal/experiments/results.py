"""A grid's result files: the rows of each run, ``results.csv``, and the locks of their writers.

Each run keeps its finished rows in ``runs/<run_id>.csv`` (one row per step,
with the pool indices it queried), and the tidy ``results.csv`` (one row per
run and step) is assembled from them. Files are replaced atomically
(temporary file, fsync, :func:`os.replace`), so a reader never sees half a
file. Since every row is written with its line terminator, a last row
without one is torn (a cut copy) even when its fields still parse: a resume
drops and recomputes it, with a warning, and :func:`read_results` refuses
it. Every run read is checked to form a consistent history
(:func:`check_run_rows`).

Nothing here imports torch: the report reads results through this module.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
import warnings
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

import numpy as np

__all__ = ["COLUMNS", "read_results", "check_run_rows", "assemble_results", "DamagedResultsError",
           "FolderLockedError"]

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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes) -> None:
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
    skdbal.experiments.results.FolderLockedError: another process is writing the grid in ...
    >>> issubclass(FolderLockedError, RuntimeError)
    True
    """


@contextmanager
def exclusive_lock(lock_path: Path, what: str):
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


#: How the columns of a preset's stopping rules and accuracy estimate start
#: (:data:`~skdbal.experiments.presets.WATCH_FIELDS`): written after :data:`COLUMNS` by the runs that have
#: them, in the order first met; a file with none of them has :data:`COLUMNS` only.
WATCH_PREFIXES = ("stop_", "estimate_")


def watch_columns(rows: Iterable[dict]) -> List[str]:
    """The ``stop_*`` and ``estimate_*`` columns that ``rows`` hold, in the order first met.

    Examples
    --------
    >>> from skdbal.experiments.results import watch_columns
    >>> watch_columns([{"step": 0, "stop_cost": False, "stop_set": "4 9"}, {"estimate_acc": 0.5, "stop_cost": True}])
    ['stop_cost', 'stop_set', 'estimate_acc']
    """
    seen: dict = {}
    for row in rows:
        for k in row:
            if isinstance(k, str) and k.startswith(WATCH_PREFIXES) and k not in COLUMNS:
                seen.setdefault(k, None)
    return list(seen)


def csv_bytes(rows: Iterable[dict]) -> bytes:
    rows = list(rows)
    extra = watch_columns(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + extra, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**{k: row.get(k, "") if k in OPTIONAL_COLUMNS else row[k] for k in COLUMNS},
                         **{k: "" if row.get(k) is None else row[k] for k in extra}})
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
        for k in watch_columns([row]):
            row[k] = _watched_value(k, row[k])
    except (TypeError, ValueError) as exc:
        raise DamagedResultsError(f"{where}: {exc}; the file looks cut or damaged", index) from None
    if row["n_labels"] < 0 or row["step"] < 0 or not np.isfinite(row["accuracy"]):
        raise DamagedResultsError(f"{where}: impossible values (step {row['step']}, n_labels {row['n_labels']}, "
                                  f"accuracy {row['accuracy']})", index)
    return row


def _watched_value(column: str, text):
    """A ``stop_*`` or ``estimate_*`` cell as the loop wrote it: None when empty; a verdict (``stop_<name>``) or
    ``estimate_biased`` a bool, a ``_value``, ``estimate_acc``, ``_lo`` or ``_hi`` a float, ``estimate_n`` an int;
    the reason, the kind and the stop set stay text."""
    if text in (None, ""):
        return None
    if column in ("stop_reason", "stop_set", "estimate_kind"):
        return text
    if column == "estimate_n":
        return int(text)
    if column.endswith("_value") or column in ("estimate_acc", "estimate_lo", "estimate_hi"):
        return float(text)
    if text in ("True", "False"):
        return text == "True"
    raise ValueError(f"column {column!r} holds {text!r}, not True or False")


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
    skdbal.experiments.results.DamagedResultsError: ...line 3 (step 1): n_labels is 4 and n_acquired 1, but the query indices so far add up to 3 labels, 1 acquired; the row is cut or damaged
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
    skdbal.experiments.results.DamagedResultsError: run.csv, line 3 (step 1): an index is labelled twice; the row is damaged
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
                          "computed again", RuntimeWarning, stacklevel=2)
        rows = [_parse_row(row, f"{csv_path}, line {i + 2}", i) for i, row in enumerate(raw[:-1])]
        check_run_rows(rows, csv_path)
        return rows


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
    atomic_write(out_dir / "results.csv", csv_bytes(rows))
    return rows


def has_rows(csv_path: Path) -> bool:
    """Whether the run CSV ``csv_path`` exists with at least one row after its header."""
    try:
        with open(csv_path, "rb") as f:
            return len([line for line in f.read().splitlines() if line.strip()]) > 1
    except FileNotFoundError:
        return False

