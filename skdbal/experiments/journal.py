"""A run in progress on disk: the rows it has written, its records, its weights cache, and its journal.

:class:`RunJournal` is the journal of :class:`skdbal.loop.ActiveLearningLoop`
for one run of a grid: each step becomes a row of ``runs/<run_id>.csv``
(with the test metrics, the noise counts and the queried indices in the
training set's numbering), and the weights of the step's model are cached
in ``runs/<run_id>.pt``. The rest says what a run has done so far
(:func:`stored_rows`, :func:`finished`) and records, or warns about, the
torch threads and devices that computed its steps.
"""
from __future__ import annotations

import io
import json
import time
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..accuracy_monitor import journal_fields
from ..metrics import expected_calibration_error, label_columns
from .factories import network_of, one_hot
from .results import assemble_results, atomic_write, csv_bytes, read_run_file
from .specs import RunSpec

__all__ = []

#: The loop's columns of the accuracy estimate (a strategy's own ``estimate_*`` keys are not written).
_ESTIMATE = tuple(journal_fields(None))


def stored_rows(spec: RunSpec, runs: Path, warn: bool = False) -> list:
    """The rows ``spec``'s run has written so far in ``runs``, checked (see
    :func:`~skdbal.experiments.results.read_run_file`)."""
    csv_path = runs / f"{spec.run_id}.csv"
    return read_run_file(csv_path, warn) if csv_path.exists() else []


def finished(spec: RunSpec, rows: list) -> bool:
    """Whether ``rows`` hold every step of ``spec``'s run (step 0 included)."""
    return len(rows) >= spec.preset.n_queries + 1


def labelled_indices(rows: list) -> np.ndarray:
    """The labelled set after ``rows``: the initial set, then each step's queries, in order."""
    return np.concatenate([np.array(r["query_indices"].split(), dtype=np.intp) for r in rows])


def thread_mismatch(spec: RunSpec, runs: Path, run_threads: int, rows: list) -> Optional[str]:
    """A warning if ``spec``'s unfinished run, with ``rows`` written so far,
    started with another thread count."""
    config_path = runs / f"{spec.run_id}.json"
    if not config_path.exists() or finished(spec, rows):
        return None  # new, or finished: nothing will be recomputed
    stored = json.loads(config_path.read_text()).get("torch_threads")
    if stored is None or stored == run_threads:
        return None
    return (f"{spec.run_id} was started with {stored} torch thread(s) and resumes with {run_threads}; "
            "CPU kernels may round differently, so its remaining rows can differ in the last digits "
            f"from an uninterrupted run (pass torch_threads={stored} to avoid this)")


def device_mismatch(spec: RunSpec, runs: Path, device: str, rows: list) -> Optional[str]:
    """A warning if ``spec``'s unfinished run, with ``rows`` written so far,
    computed its last rows on another device than ``device``."""
    config_path = runs / f"{spec.run_id}.json"
    if not rows or not config_path.exists() or finished(spec, rows):
        return None  # new, or finished: nothing will be recomputed
    stored = json.loads(config_path.read_text())
    steps = _device_steps(stored, len(rows))
    before = steps[-1][1] if steps else stored.get("device", "unknown")
    if before == device:
        return None
    return (f"{spec.run_id} computed its steps so far on {before} and resumes on {device}; the two devices "
            "compute different numbers, so its remaining rows differ from an uninterrupted run's (the run file "
            f"records the steps of each device; pass device={before!r} to avoid this)")


def _device_steps(stored: dict, first_step: int) -> list:
    """``[first step, device]`` of each device that computed a run's steps before
    ``first_step``, from its stored file: its ``device_steps``, else one entry
    ``[0, device]`` (``"unknown"`` for a file that records none)."""
    return [list(s) for s in stored.get("device_steps") or [[0, stored.get("device", "unknown")]]
            if s[0] < first_step]


def record_device(config_path: Path, first_step: int, device: str) -> None:
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
        atomic_write(config_path, json.dumps({**stored, **record}, indent=1).encode())


def load_weights(path: Path, step: int):
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
                      "refitted from its labels instead", RuntimeWarning, stacklevel=2)
    return None


def _duration(seconds: float) -> str:
    """``"42 s"``, ``"7 min"`` or ``"2.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class RunJournal:
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
        for r in rows:  # the loop's rows: the queried pool positions of each step (and step 0's stop set)
            labelled = self.position[np.array(r["query_indices"].split(), dtype=np.intp)]
            self._rows.append({"step": r["step"], "query_indices": labelled.tolist()})
            if r.get("stop_set"):
                self._rows[-1]["stop_set"] = self.position[np.array(r["stop_set"].split(), dtype=np.intp)].tolist()
        self._times = []

    def rows(self) -> list:
        return self._rows

    def _watched(self, row: dict) -> dict:
        """The loop's columns of the preset's stopping rules and accuracy estimate (none without them):
        ``stop_*`` and ``estimate_*`` as the loop wrote them, and step 0's ``stop_set`` in the training set's
        numbering, as the query indices."""
        out = {k: v for k, v in row.items() if (k.startswith("stop_") and k != "stop_set") or k in _ESTIMATE}
        if "stop_set" in row:
            out["stop_set"] = " ".join(map(str, self.pool[np.asarray(row["stop_set"], dtype=np.intp)]))
        return out

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
            extra.update({"rmse": float(np.sqrt(np.mean((mean - one_hot(y_test)) ** 2))),
                          "mean_variance": float(np.mean(est[-1].predictive_variance(F)))})
        t_eval = time.perf_counter() - t0
        t_train, t_query = row["fit_time"], row["query_time"]
        n_labels = row["n_labels"]
        self.csv_rows.append({
            "preset": preset.name, "strategy": spec.strategy, "variant": spec.variant, "seed": spec.seed,
            "step": row["step"], "n_labels": n_labels, "n_acquired": n_labels - self.n_initial,
            "accuracy": accuracy, **extra, "train_time": round(t_train, 3), "query_time": round(t_query, 3),
            "eval_time": round(t_eval, 3), "time": round(t_train + t_query + t_eval, 3),
            "query_indices": " ".join(map(str, query)), **self._watched(row)})
        self._rows.append({"step": row["step"], "query_indices": list(row["query_indices"])})
        if spec.representation == "none":  # a head on embeddings refits in a moment: no weights cache
            buf = io.BytesIO()
            state = ([m.module_.state_dict() for m in est.estimators_] if spec.ensemble
                     else network_of(est).module_.state_dict())
            torch.save({"step": row["step"], "model_state": state}, buf)
            atomic_write(self.weights_path, buf.getvalue())  # cache first: a stale cache is detected
        atomic_write(self.csv_path, csv_bytes(self.csv_rows))
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

