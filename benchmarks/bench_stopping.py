"""How good is the model, and when to stop: accuracy estimates and stopping rules against the truth.

Simulated active learning runs (10 balanced initial labels, batches of 10) on

- digits (1,000 pool rows, 797 test rows), with two learners on the pixels:
  ``scratch`` (:class:`~skdbal.models.MCDropoutHead`, a dropout network
  trained from scratch on the labels) and ``bll`` (the Bayesian last layer);
- MNIST and Fashion-MNIST, with ``bll`` on the embeddings of the pool encoder
  learnt from the 60,000 training images without labels (read from
  ``--cache``, as ``bench_representation.py`` writes them), and ``scratch``
  on the pixels;

with top-k BALD (``bald``) and the stochastic power BALD
(``stochastic(bald)``, draws with known probabilities), labels from a
perfect annotator (noise 0) or one wrong 10% of the time (noise 0.1, a wrong
label uniform over the other classes, fixed per image), over seeds 1-5.

A fifth of the pool is set aside at the start as the audit reservoir:
acquisition never draws from it. At every step the model is scored on the
10,000 test images (the truth) and these estimates are made, each with its
nominal 95% interval:

- ``audit-uniform-a``: a uniform audit that buys a share ``a`` of the labels
  paid from the reservoir (``a/(1-a)`` audit labels per training label),
  never trained on: Wilson's interval;
- ``audit-active-a``: the same share drawn by active testing (Kossen et al.
  2021): least confidence of the current model, mixed with 10% uniform, one
  Plackett-Luce sequence over the reservoir, LURE, Kish-Wilson;
- ``audit-active-var-a``: the same draws with Wilson's interval at the size
  whose binomial variance matches the weighted losses' (the variance that
  active testing saves, at most 10 times the labels), an alternative to
  Kish's size, which only penalises unequal weights;
- ``lure-previous``: free, for ``stochastic(bald)``: the model that chose the
  last batch, by :class:`~skdbal.accuracy_monitor.AccuracyMonitor` over the
  batches it judged (truth: that model's test accuracy), and
  ``bridge-current``: bridged to the current model through their
  disagreement on the stop set;
- ``prequential``: top-k's biased share of the last 3 batches guessed right.

The audits are simulated ``--reps`` times per step from the run's models
(held-out labels do not change the run), so coverage is measured per step
over the reps. Under label noise every estimate sees the annotator's labels:
the truth it is scored against is the test accuracy on test labels noised the
same way (``truth="annotator"``), and also the clean test accuracy after the
correction for a known noise rate (``truth="clean, corrected"``).

At every step every stopping rule gives its verdict (none ends the run); a
rule's stop is its first ``stop``. The best stop is the first step whose test
accuracy is within 0.5 points of the run's plateau (the mean of its last 5
steps); a run whose best stop is past 70% of its labels has not plateaued and
is left out of the stopping table.

    python benchmarks/bench_stopping.py                      # the grid, resumed from runs/ (one CSV per run)
    python benchmarks/bench_stopping.py --quick              # digits, 2 seeds, 8 steps, into a scratch folder
    python benchmarks/bench_stopping.py --phase evaluate     # tables, facts and JSON from the runs written

Raw output, ``runs/*.csv``, ``coverage.csv``, ``stopping.csv``, ``README.md`` and ``results.json`` go under
``docs/results/bench_stopping/``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import ROOT, load_split, markdown_table, recorded  # noqa: E402

from skdbal.audit import audit_proposal  # noqa: E402
from skdbal.datasets import make_noisy_labels  # noqa: E402
from skdbal.estimates import lure_weights, wilson_interval  # noqa: E402

N_CLASSES = 10
RESERVOIR_SHARE = 0.2
STOP_SET = 2000
SHARES = (0.1, 0.2)
EPSILON = 0.1
TRUTH_WINDOW = 5
WITHIN = 0.005
ARMS = {  # (dataset, learner): (steps of 10 labels after the first 10, seeds)
    ("digits", "bll"): 29, ("digits", "scratch"): 29,
    ("mnist", "bll"): 49, ("fashion_mnist", "bll"): 49,
    ("mnist", "scratch"): 39, ("fashion_mnist", "scratch"): 39,
}
STRATEGIES = ("bald", "stochastic(bald)")
NOISES = (0.0, 0.1)


def rules() -> dict:
    """Every rule measured, by a name that gives its settings."""
    from skdbal.stopping import (
        ClassificationChange,
        CostRule,
        ExpectedGain,
        LabelBudget,
        MaxConfidence,
        OverallUncertainty,
        StabilizingPredictions,
    )
    return {
        "kappa(w3,0.99)": StabilizingPredictions(window=3, kappa=0.99),
        "kappa(w3,0.95)": StabilizingPredictions(window=3, kappa=0.95),
        "kappa(w5,0.99)": StabilizingPredictions(window=5, kappa=0.99),
        "kappa(all3,0.99)": StabilizingPredictions(window=3, kappa=0.99, pairs="all"),
        "change(0)": ClassificationChange(threshold=0.0),
        "change(0.005)": ClassificationChange(threshold=0.005),
        "uncertainty(entropy,0.05)": OverallUncertainty(threshold=0.05),
        "uncertainty(lc,0.01)": OverallUncertainty(threshold=0.01, measure="least_confidence"),
        "max_confidence(0.001)": MaxConfidence(threshold=0.001),
        "gain(0.001)": ExpectedGain(min_gain=0.001),
        "gain(0.002)": ExpectedGain(min_gain=0.002),
        "gain(0.005)": ExpectedGain(min_gain=0.005),
        "budget(200)": LabelBudget(max_labels=200),
        "budget(300)": LabelBudget(max_labels=300),
        "cost(1e4)": CostRule(label_cost=1.0, error_cost=1.0, n_predictions=10_000),
        "cost(1e5)": CostRule(label_cost=1.0, error_cost=1.0, n_predictions=100_000),
    }


# ---------------------------------------------------------------------------------------------------------------
# data and learners

def data(dataset: str, learner: str, cache: Path):
    """Pool features and labels, test features and labels."""
    if dataset == "digits":
        from sklearn.datasets import load_digits
        X, y = load_digits(return_X_y=True)
        order = np.random.RandomState(0).permutation(len(y))
        X = (X / 16.0).astype(np.float32)
        return X[order[:1000]], y[order[:1000]], X[order[1000:]], y[order[1000:]]
    y, yt = load_split(dataset)[1].astype(int), load_split(dataset, "test")[1].astype(int)
    if learner == "bll":
        Z = np.load(cache / f"{dataset}_embeddings.npy").astype(np.float32)
        return Z[:len(y)], y, Z[len(y):], yt
    X = load_split(dataset)[0].reshape(len(y), -1).astype(np.float32) / 255
    Xt = load_split(dataset, "test")[0].reshape(len(yt), -1).astype(np.float32) / 255
    return X, y, Xt, yt


def head(learner: str, seed: int):
    from skdbal.models import BayesianLastLayerHead, MCDropoutHead
    classes = np.arange(N_CLASSES)
    if learner == "bll":
        return BayesianLastLayerHead(n_samples=100, classes=classes, random_state=seed)
    return MCDropoutHead(hidden_layer_sizes=(128,), n_samples=20, n_steps=300, classes=classes, random_state=seed)


def strategy(name: str):
    from skdbal.acquisition import BALD, StochasticBatch
    return BALD() if name == "bald" else StochasticBatch(BALD(), "power", 1.0)


def corrected(acc, rate: float):
    """Clean accuracy from agreement with labels noised symmetrically at ``rate``."""
    return (np.asarray(acc) - rate / (N_CLASSES - 1)) / (1 - rate * N_CLASSES / (N_CLASSES - 1))


# ---------------------------------------------------------------------------------------------------------------
# the audits, simulated over reps (skdbal.estimates' functions over stacked reps, checked against
# estimate_accuracy on one rep each step)

class Audits:
    """``reps`` uniform and active audits of one run, each a sequence over the reservoir that grows by step."""

    def __init__(self, n_reservoir: int, reps: int, rng: np.random.RandomState):
        self.N, self.reps, self.rng = n_reservoir, reps, rng
        self.perm = np.argsort(rng.random_sample((reps, n_reservoir)), axis=1)
        self.active = {a: {"items": np.zeros((reps, 0), int), "q": np.zeros((reps, 0)),
                           "free": np.ones((reps, n_reservoir), bool)} for a in SHARES}

    def step(self, n_train: int, proba_res: np.ndarray, correct_res: np.ndarray) -> dict:
        out = {}
        for a in SHARES:
            n = int(round(a / (1 - a) * n_train))
            if n < 1:
                continue
            c = correct_res[self.perm[:, :n]]
            p = c.mean(1)
            lo, hi = wilson_interval(p, n)
            if self.reps and a == SHARES[0]:
                self._check_uniform(c[0], p[0], lo[0], hi[0])
            out[f"audit-uniform-{a}"] = (p, lo, hi, np.full(self.reps, float(n)), n)
            acc, lo, hi, n_eff, var_lo, var_hi, n_var = self._active(a, n, proba_res, correct_res)
            out[f"audit-active-{a}"] = (acc, lo, hi, n_eff, n)
            out[f"audit-active-var-{a}"] = (acc, var_lo, var_hi, n_var, n)
        return out

    def _check_uniform(self, c, p, lo, hi):
        from skdbal.estimates import estimate_accuracy
        e = estimate_accuracy(c)
        assert np.allclose([e.accuracy, e.low, e.high], [p, lo, hi]), "vectorised Wilson differs from skdbal's"

    def _active(self, a, n, proba_res, correct_res):
        s = self.active[a]
        new = n - s["items"].shape[1]
        if new > 0:
            w = audit_proposal(proba_res, EPSILON)
            keys = np.log(w)[None, :] - np.log(-np.log(self.rng.random_sample((self.reps, self.N))))
            keys[~s["free"]] = -np.inf
            top = np.argsort(-keys, axis=1)[:, :new]                      # a Plackett-Luce draw, in order
            wt = w[top]
            left = (w[None, :] * s["free"]).sum(1, keepdims=True) - (np.cumsum(wt, 1) - wt)
            s["q"] = np.concatenate([s["q"], wt / left], 1)
            s["items"] = np.concatenate([s["items"], top], 1)
            np.put_along_axis(s["free"], top, False, axis=1)
        q, M = s["q"], s["q"].shape[1]
        coef = lure_weights(q, self.N) / M
        loss = 1.0 - correct_res[s["items"]]
        acc = np.clip(1 - (coef * loss).sum(1), 0, 1)
        n_eff = np.maximum(1.0, coef.sum(1) ** 2 / (coef ** 2).sum(1))
        lo, hi = wilson_interval(acc, n_eff)
        if a == SHARES[0]:
            from skdbal.estimates import estimate_accuracy
            e = estimate_accuracy(correct_res[s["items"][0]], q=q[0], N=self.N)
            assert np.allclose([e.accuracy, e.low, e.high], [acc[0], lo[0], hi[0]]), "active audit differs"
        # Wilson at the size whose binomial variance matches the weighted losses' (no Kish penalty, at most 10 M)
        se2 = np.var(coef * M * loss, axis=1, ddof=1) / M if M > 1 else np.full(len(acc), np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            n_var = np.clip(np.where(se2 > 0, acc * (1 - acc) / se2, 10.0 * M), 1.0, 10.0 * M)
        var_lo, var_hi = wilson_interval(acc, n_var)
        return acc, lo, hi, n_eff, var_lo, var_hi, n_var


# ---------------------------------------------------------------------------------------------------------------
# one run

def run(dataset, learner, strat, noise, seed, n_steps, reps, arrays) -> list:
    from skdbal.accuracy_monitor import AccuracyMonitor
    from skdbal.stopping import StepView
    X, y, Xt, yt = arrays
    rng = np.random.RandomState(1000 * seed + int(100 * noise) + (7 if learner == "scratch" else 0))
    # a fixed annotator, wrong with probability ``noise``, then uniform over the other classes; the test labels
    # noised the same way (the truth the annotator's labels can measure)
    classes = np.arange(N_CLASSES)
    y_seen = make_noisy_labels(y, noise, classes=classes, random_state=seed)[0] if noise else y
    yt_seen = make_noisy_labels(yt, noise, classes=classes, random_state=seed + 100)[0] if noise else yt
    order = rng.permutation(len(y))
    res = np.sort(order[:int(RESERVOIR_SHARE * len(y))])
    outside = order[len(res):]
    stop = outside[:min(STOP_SET, len(outside) // 2)]
    labelled = [int(outside[np.flatnonzero(y_seen[outside] == c)[0]]) for c in range(N_CLASSES)]
    in_res = np.zeros(len(y), bool)
    in_res[res] = True
    audits = Audits(len(res), reps, rng)
    monitor = AccuracyMonitor(window=3)
    the_rules = rules()
    sampler = strategy(strat)
    rows, prev = [], None
    for step in range(n_steps + 1):
        start = time.perf_counter()
        model = head(learner, seed).fit(X[labelled], y_seen[labelled])
        fit_s = time.perf_counter() - start
        samples_stop = model.predict_proba_samples(X[stop])
        pred_stop = samples_stop.mean(0).argmax(1)
        pred_test = model.predict_proba(Xt).argmax(1)
        proba_res = model.predict_proba(X[res])
        correct_res = (proba_res.argmax(1) == y_seen[res]).astype(float)
        unlabelled = np.setdiff1d(outside, labelled)
        row = {"dataset": dataset, "learner": learner, "strategy": strat, "noise": noise, "seed": seed,
               "step": step, "n_labels": len(labelled), "test_acc": float(np.mean(pred_test == yt)),
               "test_acc_seen": float(np.mean(pred_test == yt_seen)),
               "reservoir_acc_seen": float(correct_res.mean()), "fit_s": round(fit_s, 3)}
        view = {"step": step, "n_labels": len(labelled), "stop_samples": samples_stop, "batch_size": 10,
                "n_unlabelled": len(unlabelled)}
        if prev is not None:
            correct_batch = (prev["pred_batch"] == y_seen[prev["batch"]]).astype(float)
            monitor.observe(correct_batch, log_q=prev["log_q"], n_candidates=prev["n_candidates"])
            view["batch_proba"] = prev["proba_batch"]
            e = monitor.previous_model()
            row.update({"prev_test_acc": prev["test_acc"], "prev_test_acc_seen": prev["test_acc_seen"],
                        f"{'lure-previous' if prev['log_q'] is not None else 'prequential'}":
                            json.dumps([e.accuracy, e.low, e.high, e.n_effective])})
            if prev["log_q"] is not None:
                b = monitor.current_model(prev["pred_stop"], pred_stop)
                row["bridge-current"] = json.dumps([b.accuracy, b.low, b.high, b.n_effective])
        for name, rule in the_rules.items():
            verdict = rule.update(StepView(**view))
            row[f"stop:{name}"] = int(verdict.stop)
            row[f"value:{name}"] = None if verdict.value is None else float(verdict.value)
        for name, (acc, lo, hi, n_eff, n) in audits.step(len(labelled), proba_res, correct_res).items():
            truth = row["test_acc_seen"]
            covered = (lo <= truth) & (truth <= hi)
            row[name] = json.dumps({"n_audit": n, "covered": round(float(covered.mean()), 4),
                                    "width": round(float(np.median(hi - lo)), 5),
                                    "point": round(float(np.median(acc)), 5),
                                    "n_eff": round(float(np.median(n_eff)), 2),
                                    **({"covered_clean": round(float(((corrected(lo, noise) <= row["test_acc"])
                                                                      & (row["test_acc"] <= corrected(hi, noise))
                                                                      ).mean()), 4)} if noise else {})})
        rows.append(row)
        if step == n_steps:
            break
        candidates = unlabelled
        if learner == "scratch" and len(candidates) > 2000:
            candidates = np.sort(rng.choice(candidates, 2000, replace=False))
        acq = sampler.acquire(model, X[candidates], 10, random_state=rng.randint(2 ** 31))
        batch = candidates[np.asarray(acq.indices)]
        assert not in_res[batch].any()
        log_q = acq.info.get("draw_log_q")
        proba_batch = model.predict_proba(X[batch])
        prev = {"batch": batch, "pred_batch": proba_batch.argmax(1), "proba_batch": proba_batch,
                "log_q": None if log_q is None else np.asarray(log_q, float), "n_candidates": len(candidates),
                "pred_stop": pred_stop, "test_acc": row["test_acc"], "test_acc_seen": row["test_acc_seen"]}
        labelled = labelled + [int(i) for i in batch]
    return rows


def run_name(dataset, learner, strat, noise, seed) -> str:
    return f"{dataset}_{learner}_{strat.replace('(', '-').replace(')', '')}_noise{noise:g}_seed{seed}"


def write_rows(rows: list, path: Path) -> None:
    import csv
    keys = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def read_rows(path: Path) -> list:
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------------------------------------------------
# evaluation

def coverage(runs: dict) -> list:
    """One row per (run, step, estimator): covered share, width, labels paid."""
    out = []
    for rows in runs.values():
        for r in rows:
            base = {k: r[k] for k in ("dataset", "learner", "strategy", "noise", "seed", "step", "n_labels")}
            for est in [k for k in r if k.startswith("audit-")]:
                if not r[est]:
                    continue
                d = json.loads(r[est])
                out.append({**base, "estimator": est, "n_audit": d["n_audit"],
                            "n_paid": int(r["n_labels"]) + d["n_audit"], "covered": d["covered"],
                            "covered_clean": d.get("covered_clean", ""), "width": d["width"], "point": d["point"],
                            "truth": r["test_acc_seen"], "biased": 0})
            for est, truth in (("lure-previous", "prev_test_acc_seen"), ("bridge-current", "test_acc_seen"),
                               ("prequential", "prev_test_acc_seen")):
                if not r.get(est):
                    continue
                acc, lo, hi, _ = json.loads(r[est])
                t = float(r[truth])
                clean = "" if float(r["noise"]) == 0 else int(
                    corrected(lo, float(r["noise"])) <= float(r[truth.replace("_seen", "")])
                    <= corrected(hi, float(r["noise"])))
                out.append({**base, "estimator": est, "n_audit": 0, "n_paid": int(r["n_labels"]),
                            "covered": int(lo <= t <= hi), "covered_clean": clean, "width": round(hi - lo, 5),
                            "point": round(acc, 5), "truth": t, "biased": int(est == "prequential")})
    return out


def stopping(runs: dict) -> list:
    """One row per (run, rule): where it stopped against the best stop."""
    out = []
    for rows in runs.values():
        acc = np.array([float(r["test_acc"]) for r in rows])
        n = np.array([int(r["n_labels"]) for r in rows])
        plateau = float(acc[-TRUTH_WINDOW:].mean())
        best = int(np.flatnonzero(acc >= plateau - WITHIN)[0])
        censored = n[best] > 0.7 * n[-1]
        r0 = rows[0]
        for rule in [k[5:] for k in r0 if k.startswith("stop:")]:
            stops = np.flatnonzero([int(r[f"stop:{rule}"]) for r in rows])
            at = int(stops[0]) if len(stops) else len(rows) - 1
            excess = (n[at] - n[best]) / n[best]
            given_up = plateau - acc[at]
            out.append({k: r0[k] for k in ("dataset", "learner", "strategy", "noise", "seed")} | {
                "rule": rule, "n_stop": int(n[at]), "never_stopped": int(not len(stops)), "acc_stop": acc[at],
                "n_best": int(n[best]), "plateau": round(plateau, 5), "censored": int(censored),
                "excess": round(float(excess), 4), "given_up": round(float(given_up), 5),
                "good": int(abs(excess) <= 0.1 and given_up <= WITHIN and len(stops) > 0)})
    return out


#: Rule families swept over their threshold offline, from the values a run recorded at every step:
#: (column recorded, how the value is compared, thresholds).
SWEEP = {
    "kappa(window 3)": ("value:kappa(w3,0.99)", "at_least", (0.95, 0.97, 0.98, 0.99, 0.995, 0.997, 0.998, 0.999)),
    "kappa(window 5)": ("value:kappa(w5,0.99)", "at_least", (0.98, 0.99, 0.995, 0.997, 0.998, 0.999)),
    "classification change": ("value:change(0)", "at_most", (0.02, 0.01, 0.005, 0.0025, 0.001, 0.0)),
    "expected gain (2 steps)": ("value:gain(0.001)", "below_twice", (0.005, 0.003, 0.002, 0.001, 0.0005, 0.0002)),
    "overall uncertainty": ("value:uncertainty(entropy,0.05)", "below", (0.3, 0.25, 0.2, 0.15, 0.1, 0.05)),
    "label budget": ("n_labels", "at_least", (100, 150, 200, 250, 300, 350, 400, 450)),
}


def swept_stop(values: np.ndarray, how: str, threshold: float):
    """The first step whose recorded value says stop at ``threshold`` (None: never)."""
    with np.errstate(invalid="ignore"):
        if how == "at_least":
            hit = values >= threshold
        elif how == "at_most":
            hit = values <= threshold
        else:
            hit = values < threshold
    hit &= ~np.isnan(values)
    if how == "below_twice":
        hit = hit & np.concatenate([[False], hit[:-1]])
    idx = np.flatnonzero(hit)
    return int(idx[0]) if len(idx) else None


def sweep(runs: dict) -> list:
    """One row per (family, threshold, data set): the good stops among the runs that plateaued."""
    counts: dict = {}
    for rows in runs.values():
        acc = np.array([float(r["test_acc"]) for r in rows])
        n = np.array([int(r["n_labels"]) for r in rows])
        plateau = float(acc[-TRUTH_WINDOW:].mean())
        best = int(np.flatnonzero(acc >= plateau - WITHIN)[0])
        if n[best] > 0.7 * n[-1]:
            continue
        for family, (column, how, thresholds) in SWEEP.items():
            values = np.array([float(r[column]) if r[column] not in ("", "None") else np.nan for r in rows])
            for t in thresholds:
                at = swept_stop(values, how, t)
                good = at is not None and abs(n[at] - n[best]) <= 0.1 * n[best] and plateau - acc[at] <= WITHIN
                c = counts.setdefault((family, t, rows[0]["dataset"]), [0, 0, []])
                c[0] += int(good)
                c[1] += 1
                c[2].append((n[at if at is not None else -1] - n[best]) / n[best])
    return [{"family": f, "threshold": t, "dataset": d, "good": c[0], "runs": c[1],
             "median_excess": round(float(np.median(c[2])), 3)} for (f, t, d), c in sorted(counts.items())]


DEFAULT_ESTIMATOR = "audit-uniform-0.2"
DEFAULT_RULE = ("kappa(window 3)", 0.99)


def headline(summary: dict) -> dict:
    """The figures the guide quotes, formatted as it quotes them."""
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    half = lambda w: f"±{50 * w:.1f}"  # noqa: E731
    cov, wid = summary["coverage"], summary["width_at"]
    out: dict = {}
    for est in sorted(summary["worst_coverage"]):
        slug = est.replace("-", "_").replace(".", "_")
        out[f"{slug}__worst"] = pct(summary["worst_coverage"][est])
        out[f"{slug}__best"] = pct(max(v["covered"] for k, v in cov.items() if k.split("|")[0] == est))
        for ds in ("mnist", "fashion_mnist", "digits"):
            w = wid.get(f"{est}|{ds}|bll|0", {}).get(200)
            if w is not None:
                out[f"{slug}__{ds}_half200"] = half(w)
    mn = summary["paid_for_pm3"].get(f"{DEFAULT_ESTIMATOR}|mnist|bll|0")
    out["default_paid_for_pm3_mnist"] = "more than the runs bought" if mn is None else str(mn)
    for ds in ("mnist", "fashion_mnist", "digits"):
        for a in SHARES:
            c = summary["audit_cost_points"].get(f"{ds}|{a:g}|200")
            if c is not None:
                out[f"audit_cost_{ds}_{str(a).replace('.', '_')}_at200"] = f"{c:.2f}"
    family, t = DEFAULT_RULE
    by = summary["sweep"].get(f"{family}|{t:g}", {})
    out["default_rule_good"] = f"{sum(v['good'] for v in by.values())} of {sum(v['runs'] for v in by.values())}"
    best = max(summary["sweep"].items(), key=lambda kv: sum(v["good"] for v in kv[1].values()))
    family_best, t_best = best[0].split("|")
    out["best_swept_rule"] = f"{family_best} at {t_best}"
    out["best_swept_good"] = (f"{sum(v['good'] for v in best[1].values())} of "
                              f"{sum(v['runs'] for v in best[1].values())}")
    out["plateaued_runs"] = str(sum(v["runs"] for v in by.values()))
    out["runs"] = str(summary["runs"])
    return out


def evaluate(folder: Path) -> dict:
    import csv
    runs = {p.stem: read_rows(p) for p in sorted((folder / "runs").glob("*.csv"))}
    cov, stops = coverage(runs), stopping(runs)
    for rows, file in ((cov, "coverage.csv"), (stops, "stopping.csv")):
        with open(folder / file, "w", newline="") as f:
            w = csv.DictWriter(f, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    summary: dict = {"coverage": {}, "width_at": {}, "stopping": {}, "runs": len(runs)}
    groups: dict = {}
    for r in cov:
        groups.setdefault((r["estimator"], r["dataset"], r["learner"], float(r["noise"])), []).append(r)
    lines = []
    for (est, ds, ln, noise), rs in sorted(groups.items()):
        c = np.array([float(r["covered"]) for r in rs])
        cc = [float(r["covered_clean"]) for r in rs if r["covered_clean"] != ""]
        widths = {}
        for paid in (100, 200, 300):
            near = [float(r["width"]) for r in rs if abs(r["n_paid"] - paid) <= 5]
            widths[paid] = round(float(np.median(near)), 4) if near else None
        key = f"{est}|{ds}|{ln}|{noise:g}"
        summary["coverage"][key] = {"covered": round(float(c.mean()), 4), "steps": len(c),
                                    "covered_clean": round(float(np.mean(cc)), 4) if cc else None,
                                    "worst_run": round(float(min(np.mean([float(r["covered"]) for r in rs
                                                                          if r["seed"] == s and
                                                                          r["strategy"] == st])
                                                                 for s, st in {(r["seed"], r["strategy"])
                                                                               for r in rs})), 4)}
        summary["width_at"][key] = widths
        # the labels paid from which the median width is at most 6 points (±3): medians by labels paid
        by_paid: dict = {}
        for r in rs:
            by_paid.setdefault(int(r["n_paid"]), []).append(float(r["width"]))
        narrow = [p for p, w in sorted(by_paid.items()) if np.median(w) <= 0.06 and len(w) >= 3]
        summary.setdefault("paid_for_pm3", {})[key] = narrow[0] if narrow else None
        lines.append([est, ds, ln, f"{noise:g}", f"{c.mean():.1%}", "-" if not cc else f"{np.mean(cc):.1%}",
                      *["-" if widths[p] is None else f"±{50 * widths[p]:.1f}" for p in (100, 200, 300)]])
    cov_table = markdown_table(["estimator", "data", "learner", "noise", "covered (annotator)",
                                "covered (clean, corrected)", "half-width at 100 paid", "at 200", "at 300"], lines)
    sgroups: dict = {}
    for r in stops:
        if r["censored"]:
            continue
        sgroups.setdefault((r["rule"], r["dataset"], r["learner"]), []).append(r)
    slines = []
    for (rule, ds, ln), rs in sorted(sgroups.items()):
        good = sum(r["good"] for r in rs)
        ex = float(np.median([r["excess"] for r in rs]))
        gu = float(np.median([r["given_up"] for r in rs]))
        summary["stopping"][f"{rule}|{ds}|{ln}"] = {"good": good, "runs": len(rs), "median_excess": round(ex, 3),
                                                     "median_given_up": round(100 * gu, 2),
                                                     "never": sum(r["never_stopped"] for r in rs)}
        slines.append([rule, ds, ln, f"{good} / {len(rs)}", f"{ex:+.0%}", f"{100 * gu:.2f}",
                       str(sum(r["never_stopped"] for r in rs))])
    stop_table = markdown_table(["rule", "data", "learner", "good stops / runs", "median excess labels",
                                 "median points given up", "never stopped"], slines)
    censored = sum(1 for r in stops if r["censored"]) // max(1, len(rules()))
    # what an audit share costs: the accuracy at P labels paid, trained on (1 - a) P of them instead of P
    costs: dict = {}
    for rows in runs.values():
        n = np.array([int(r["n_labels"]) for r in rows], float)
        acc = np.array([float(r["test_acc"]) for r in rows])
        for a in SHARES:
            for paid in (100, 200, 300):
                if paid <= n[-1]:
                    costs.setdefault((rows[0]["dataset"], a, paid), []).append(
                        100 * (np.interp(paid, n, acc) - np.interp((1 - a) * paid, n, acc)))
    summary["audit_cost_points"] = {f"{ds}|{a:g}|{paid}": round(float(np.median(v)), 2)
                                    for (ds, a, paid), v in sorted(costs.items())}
    cost_table = markdown_table(["data", "audit share", "points lost at 100 paid", "at 200", "at 300"],
                                [[ds, f"{a:g}"] + [f"{summary['audit_cost_points'].get(f'{ds}|{a:g}|{p}', '-')}"
                                                   for p in (100, 200, 300)]
                                 for ds, a in sorted({(k[0], k[1]) for k in costs})])
    swept = sweep(runs)
    datasets = sorted({r["dataset"] for r in swept})
    table: dict = {}
    for r in swept:
        table.setdefault((r["family"], r["threshold"]), {})[r["dataset"]] = r
    summary["sweep"] = {f"{f}|{t:g}": {d: {"good": v["good"], "runs": v["runs"]} for d, v in by.items()}
                        for (f, t), by in table.items()}
    sweep_table = markdown_table(
        ["rule", "threshold"] + [f"{d}: good / runs (median excess)" for d in datasets] + ["good, all"],
        [[f, f"{t:g}"] + [f"{by[d]['good']} / {by[d]['runs']} ({by[d]['median_excess']:+.0%})" if d in by else "-"
                          for d in datasets] + [f"{sum(v['good'] for v in by.values())} / "
                                                f"{sum(v['runs'] for v in by.values())}"]
         for (f, t), by in sorted(table.items(), key=lambda kv: (list(SWEEP).index(kv[0][0]), kv[0][1]))])
    # the goal's view: each estimator's worst condition (data set, learner, noise)
    worst: dict = {}
    for key, v in summary["coverage"].items():
        est = key.split("|")[0]
        worst[est] = min(worst.get(est, 1.0), v["covered"])
    summary["worst_coverage"] = worst
    summary["headline"] = headline(summary)
    summary["censored_runs"] = censored
    (folder / "README.md").write_text(
        "# When to stop, and how good the model is\n\nWritten by `benchmarks/bench_stopping.py` "
        "(see its docstring for the protocol).\n\n## Coverage of the nominal 95% intervals\n\n"
        "Share of (run, step, audit rep) whose interval held the truth, and the median half-width in points at "
        "100, 200 and 300 labels paid (training plus audit).\n\n" + cov_table +
        f"\n\n## Stopping\n\nA good stop is within 10% of the labels of the best stop, giving up at most 0.5 "
        f"points of the plateau. Runs without a plateau by 70% of their labels are left out ({censored}).\n\n"
        + stop_table + "\n\n## What an audit costs\n\nMedian over runs of the test accuracy at P labels paid "
        "minus that at the (1 - share) P labels left to train on, in points.\n\n" + cost_table +
        "\n\n## Each rule over its threshold\n\nThe same runs, each rule's recorded value compared with "
        "other thresholds after the fact (in-sample: a threshold chosen here is fitted to these runs). Median "
        "excess: labels at the stop over the best stop's, less one (a never-stopping rule counts its last "
        "step).\n\n" + sweep_table + "\n")
    print(cov_table)
    print()
    print(stop_table)
    print()
    print(cost_table)
    print()
    print(sweep_table)
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", choices=["runs", "evaluate", "all"], default="all")
    p.add_argument("--arms", nargs="+", default=[f"{d}:{ln}" for d, ln in ARMS],
                   help="dataset:learner pairs, in the order run")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--noises", nargs="+", type=float, default=list(NOISES))
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    p.add_argument("--reps", type=int, default=100, help="audits simulated per step")
    p.add_argument("--quick", action="store_true", help="digits, seeds 1 2, 8 steps, into a scratch folder")
    p.add_argument("--cache", default=os.environ.get("SKDBAL_BENCH_CACHE", str(Path.home() / ".cache" / "skdbal"
                                                                            / "bench_representation")))
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    folder = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / "bench_stopping")
    arms = [tuple(a.split(":")) for a in args.arms]
    steps = dict(ARMS)
    if args.quick:
        import tempfile
        folder = Path(tempfile.mkdtemp(prefix="bench_stopping_"))
        arms, args.seeds, args.reps = [("digits", "bll"), ("digits", "scratch")], [1, 2], 20
        steps = {a: 8 for a in arms}
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    timings = {}
    if args.phase in ("runs", "all"):
        for arm in arms:
            arrays = data(*arm, Path(args.cache))
            for noise in args.noises:
                for strat in args.strategies:
                    for seed in args.seeds:
                        path = folder / "runs" / f"{run_name(*arm, strat, noise, seed)}.csv"
                        if path.exists():
                            continue
                        start = time.perf_counter()
                        rows = run(*arm, strat, noise, seed, steps[arm], args.reps, arrays)
                        write_rows(rows, path)
                        timings[path.stem] = round(time.perf_counter() - start, 1)
                        print(f"{path.stem}: {timings[path.stem]:.0f} s, test accuracy "
                              f"{float(rows[0]['test_acc']):.3f} -> {float(rows[-1]['test_acc']):.3f}", flush=True)
    if args.phase in ("evaluate", "all"):
        summary = evaluate(folder)
        summary.update({"reps": args.reps, "reservoir_share": RESERVOIR_SHARE, "shares": SHARES,
                        "epsilon": EPSILON, "stop_set": STOP_SET, "seeds": args.seeds})
        old = folder / "results.json"          # the runs timed before, and those run now
        summary["run_seconds"] = {**(json.loads(old.read_text()).get("run_seconds", {}) if old.exists() else {}),
                                  **timings}
        old.write_text(json.dumps(summary, indent=1))
    print(f"written under {folder}")


if __name__ == "__main__":
    with recorded(__file__):
        main()
