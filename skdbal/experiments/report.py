"""Tables and figures from a grid's ``results.csv``.

Those of Gal et al. (2017, Table 1, Figs 1-2) [1]_ and Anonymous (n.d.,
Fig. 3, Tables 2-3, Figs 4-6) [2]_, with the labels-to-accuracy measures of
Pilz (2025, Appendix A) [3]_.

:func:`write_report` writes the files of a grid's folder, and
:func:`write_cost` its ``cost.md``; each section has a module of its own,
whose names are importable from here too: accuracy against labels in
:mod:`~skdbal.experiments.curves`, diversity weights in
:mod:`~skdbal.experiments.diversity_weights`, the Bayesian last layer in
:mod:`~skdbal.experiments.last_layer`, calibration in
:mod:`~skdbal.experiments.calibration` and label noise in
:mod:`~skdbal.experiments.label_noise`, on the runs as
:mod:`~skdbal.experiments.grid_reading` reads them and
:mod:`~skdbal.experiments.grouping` groups them. None of them imports torch.

References
----------
.. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
   with image data", ICML 2017, arXiv:1703.02910.
.. [2] Anonymous (candidate number 1091797), "Uncertainty in deep learning",
   anonymised report, undated. Code:
   https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.
.. [3] P. Pilz, "Deep active learning for image data", preprint (Practical
   Work in AI, Institute for Machine Learning, Johannes Kepler University
   Linz), 2025.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Union

from .calibration import calibration_markdown, plot_calibration
from .curves import cost_markdown, deterministic_markdown, plot_curves, table_markdown
from .diversity_weights import diversity_markdown, plot_diversity_weights
from .grid_reading import (
    DATASET_LABELS,
    anchors_apply,
    check_comparable,
    grid_rows,
    network_label,
    read_grid_rows,
    run_files,
    with_devices,
)
from .grouping import noise_rate_of
from .label_noise import noise_markdown, plot_flipped, plot_noise_levels
from .last_layer import last_layer_markdown, plot_last_layer
from .seed_variance import median_rule

__all__ = ["write_cost", "write_report"]

#: The noise filter of BALD with a threshold that adapts (see skdbal.acquisition.NoiseFilter).
_ADAPTIVE_FILTERS = ("filter(bald,dynamic)", "filter(bald,batch)", "filter(bald,quantile)")


def write_cost(out_dir: Union[str, os.PathLike]) -> Path:
    """Write ``cost.md`` in a grid's folder: :func:`cost_markdown` of its runs.

    Parameters
    ----------
    out_dir : path
        A folder written by :func:`skdbal.experiments.run_grid`.

    Returns
    -------
    path : Path
        The file written.

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> from skdbal.experiments.report import write_cost
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=1, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_grid(tiny, ["random"], seeds=[1, 2], out_dir=out, torch_threads=1, verbose=False)
    >>> lines = write_cost(out).read_text().splitlines()
    >>> lines[4].split(" | ")[:4]
    ['| strategy', 'variant', 'runs', '90%: median']
    >>> lines[6].split(" | ")[:3]
    ['| Random', 'bayesian', '2']
    """
    out_dir = Path(out_dir)
    rows, _, _, n_initial, _ = grid_rows(out_dir)  # as write_report reads them: the same runs and steps
    devices = sorted({str(r.get("device") or "unrecorded") for r in rows})
    path = out_dir / "cost.md"
    path.write_text(
        f"# {out_dir.name}: labels to accuracy and the cost of a step\n\n"
        "Labels to 90% and 95% test accuracy (the initial points included, the acquired ones in parentheses) by "
        "the median over seeds, the step-average (± population std) and the average-step ("
        + median_rule("`> N`") + "; the step-average then says how many runs reached it); "
        "then the median over "
        "the acquisition steps of every run of the seconds spent scoring and picking, training, and on the "
        f"whole step (device: {', '.join(devices) or 'unrecorded'}; runs side by side share the machine, so "
        "compare costs within one grid).\n\n"
        + cost_markdown(rows, n_initial) + "\n")
    return path


def write_report(out_dir: Union[str, os.PathLike], clean_dir: Union[str, os.PathLike, None] = None) -> List[Path]:
    """Write the tables and figures of a grid's ``results.csv``.

    Steps beyond the latest ``n_queries`` of the grid (``grid.json``) are
    left out, so that runs of one protocol are compared at the same length.

    Into ``out_dir``: ``table.md``, ``learning_curves.png`` and, when the
    deterministic baseline ran, ``deterministic.png``. For label-noise runs,
    also ``noise<rate>.md`` (:func:`noise_markdown` and the labels-to-accuracy
    table) and ``noise<rate>_curves.png`` for each noise rate,
    ``noise_flipped.png`` (:func:`plot_flipped`) and, across the noise rates
    (clean included), ``noise_levels.md`` and ``noise_levels.png``
    (:func:`plot_noise_levels`).

    Parameters
    ----------
    out_dir : path
        A folder written by :func:`~skdbal.experiments.run_grid`.
    clean_dir : path, optional
        A grid without label noise (such as the ``gal2017`` grid) whose runs of
        the strategies in ``out_dir`` stand for 0% noise in the cross-rate
        table and figure, cut at the labels the noisy runs reached, where
        ``out_dir`` has no clean runs of its own of them. Its own report is
        left alone.

    Returns
    -------
    paths : list of Path

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> from skdbal.experiments.report import write_report
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=1, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_grid(tiny, ["bald", "random"], seeds=[1], out_dir=out, torch_threads=1, verbose=False)
    >>> sorted(path.name for path in write_report(out))
    ['learning_curves.png', 'table.md']
    """
    out_dir = Path(out_dir)
    rows, files, preset, n_initial, end_labels = grid_rows(out_dir)
    n_instances = preset["n_instances"]
    noisy = sorted({r["noise_rate"] for r in rows if r["noise_rate"]})
    if not noisy:
        return _write_report_rows(out_dir, rows, n_initial, DATASET_LABELS.get(preset.get("dataset"), "MNIST"),
                                  end_labels, anchors_apply(rows, files, preset), network_label(preset))
    paths = []
    for rate in noisy:  # one table and figure per noise rate; the clean rows go on as usual
        part = [r for r in rows if r["noise_rate"] == rate]
        name = f"noise{rate:g}"
        table = out_dir / f"{name}.md"
        table.write_text(
            f"# {out_dir.name}: label noise {100 * rate:g}%\n\n"
            f"Label noise {100 * rate:g}% (symmetric, the pool's labels flipped once; initial, validation "
            "and test sets clean).\n\nWhat the filters reject (mean over the acquisition steps of the runs "
            "that got furthest):\n\n" + noise_markdown(part, n_instances) + "\n\nLabels to 90% / 95% "
            "test accuracy:\n\n" + table_markdown(part, n_initial, anchors=False, end_labels=end_labels,
                                                   devices=False) + "\n")  # the table above names them
        figure = out_dir / f"{name}_curves.png"
        plot_curves(part, figure, title=f"MNIST, {100 * rate:g}% label noise: test accuracy "
                                        "(mean ± std over seeds)",
                    color_strategies={r["strategy"] for r in rows if r["noise_rate"]})
        paths += [table, figure]
    flipped = out_dir / "noise_flipped.png"
    plot_flipped(rows, flipped, title="MNIST: flipped labels in the training set")
    paths.append(flipped)
    levels = list(rows)
    level_files = dict(files)
    if clean_dir is not None:
        noisy_rows = [r for r in rows if r["noise_rate"]]
        reached = max(r["n_labels"] for r in noisy_rows)
        wanted = {(r["preset"], r["strategy"], r["variant"]) for r in noisy_rows} \
            - {(r["preset"], r["strategy"], r["variant"]) for r in rows if not r["noise_rate"]}
        clean_files = run_files(Path(clean_dir))
        levels += [r for r in with_devices(read_grid_rows(Path(clean_dir)), clean_files)
                   if not r.get("noise_rate") and (r["preset"], r["strategy"], r["variant"]) in wanted
                   and r["n_labels"] <= reached]
        level_files.update({k: v for k, v in clean_files.items() if not k[4]})
    # the runs of a strategy side by side across noise rates (those of clean_dir included) ran one configuration
    check_comparable(levels, level_files, ignore=("seed", "noise_rate"), across_rates=True)
    if len({noise_rate_of(r) for r in levels}) > 1:
        table = out_dir / "noise_levels.md"
        source = f" (clean runs of the strategies also from {Path(clean_dir).name}/)" if clean_dir else ""
        table.write_text(
            f"# {out_dir.name}: across noise rates\n\n"
            f"Across noise rates{source}: what the filters reject and test accuracy (mean ± population std "
            "over the runs that got furthest).\n\n" + noise_markdown(levels, n_instances,
                                                                     at_labels=(100, 250, 500, 1000)) + "\n")
        figure = out_dir / "noise_levels.png"
        # BALD, random and the adaptive filters of BALD that the grid ran (the fixed ones are in Fig 6)
        adaptive = sorted({r["strategy"] for r in levels if r["strategy"] in _ADAPTIVE_FILTERS})
        plot_noise_levels(levels, figure, strategies=("bald", *adaptive, "random"),
                          title="MNIST: BALD, filtered BALD and random under label noise",
                          color_strategies={r["strategy"] for r in rows if r["noise_rate"]})
        paths += [table, figure]
    rows = [r for r in rows if not r["noise_rate"]]
    if not rows:
        return paths
    return paths + _write_report_rows(out_dir, rows, n_initial, DATASET_LABELS.get(preset.get("dataset"), "MNIST"),
                                      end_labels, anchors_apply(rows, files, preset), network_label(preset))


def _write_report_rows(out_dir: Path, rows: List[dict], n_initial: int, dataset: str = "MNIST",
                       end_labels: Optional[int] = None, anchors: bool = True,
                       network: str = "Bayesian CNN") -> List[Path]:
    """The report of rows without label noise (see :func:`write_report`)."""
    if any(r["variant"].startswith("blr_") for r in rows):
        table = out_dir / "last_layer.md"
        table.write_text(
            f"# {out_dir.name}: Bayesian last layer\n\n"
            "Bayesian last layer on the CNN's penultimate features (Anonymous, n.d., §4): test RMSE against one-hot "
            "targets, mean predictive variance (trace of the predictive covariance) and argmax accuracy, "
            "mean ± population std over seeds.\n\n" + last_layer_markdown(rows) + "\n")
        figure = out_dir / "last_layer.png"
        plot_last_layer(rows, figure, title="MNIST, Bayesian last layer: analytic vs mean-field VI")
        paths = [table, figure]
        rows = [r for r in rows if not r["variant"].startswith("blr_")]
        if not rows:
            return paths
    else:
        paths = []
    table = out_dir / "table.md"
    table.write_text(
        f"# {out_dir.name}: labels to 90% and 95% test accuracy\n\n"
        "Labels needed to reach 90% and 95% test accuracy. A cell such as `270 (250)` reads: 270 labelled "
        f"images, of which {270 - n_initial} were acquired (the {n_initial} initial ones are not counted in the "
        "papers). "
        "*Average-step* is where the learning curve averaged over seeds first reaches the accuracy; "
        "*step-average* is the mean over seeds of where each seed's curve first reaches it, ± the population "
        "standard deviation (Pilz, 2025, Appendix A, defines both). The column *accuracy at 1000 labels* is test "
        "accuracy there" + ("; the published columns give acquired images, as the papers report them" if anchors else
                    " (the published numbers of Gal et al., 2017, and Anonymous, n.d., are left out: these runs do "
                    "not follow their MNIST protocol)") + ".\n\n"
        + table_markdown(rows, n_initial, anchors=anchors, end_labels=end_labels) + "\n"
    )
    paths.append(table)
    curves = out_dir / "learning_curves.png"
    # the MC-dropout network's runs, from every initial set in the folder ("bayesian-init-kmeans_per_class"), and
    # those scored with a Laplace posterior; a grid of neither plots what it has (never an empty figure)
    present = {r["variant"] for r in rows}
    variants = tuple(sorted(v for v in present if v.startswith("bayesian"))) + (("laplace",) if "laplace" in present
                                                                                else ())
    variants = variants or tuple(sorted(present))
    plot_curves(rows, curves, variants=variants,
                title=f"{dataset}, {network}: test accuracy (mean ± std over seeds)")
    paths.append(curves)
    sweep = diversity_markdown(rows)
    if sweep:
        div_table = out_dir / "diversity_weights.md"
        div_table.write_text(
            f"# {out_dir.name}: diversity weights\n\n"
            "What a diversity weight adds to its base strategy (Anonymous, n.d., Fig 7): test accuracy minus the "
            "base's at the same seed and step, in percentage points, averaged over the steps of each window, "
            "mean ± population std over seeds.\n\n" + sweep + "\n")
        div_figure = out_dir / "diversity_weights.png"
        plot_diversity_weights(rows, div_figure, title=f"{dataset}: accuracy gain of the diversity penalty "
                                                       "over its base strategy")
        paths += [div_table, div_figure]
    if any(r["variant"] == "deterministic" for r in rows):
        det_table = out_dir / "deterministic.md"
        det_table.write_text(
            f"# {out_dir.name}: Bayesian against deterministic scoring\n\n"
            "Bayesian (MC dropout) against deterministic scoring (Gal et al. 2017, §5.2): acquired images to 90% / "
            "95% test accuracy (Average-Step over the finished runs), test accuracy (mean ± population std "
            "over seeds, %) and the paired difference seed by seed.\n\n"
            + deterministic_markdown(rows, n_initial, end_labels=end_labels) + "\n")
        paths.append(det_table)
        det = out_dir / "deterministic.png"
        plot_curves(rows, det, variants=("bayesian", "deterministic"),
                    strategies=("max_entropy", "variation_ratios"),
                    title="Bayesian (solid) vs deterministic (dashed) CNN")
        paths.append(det)
    if any(r["variant"].startswith("ensemble") for r in rows):
        cal = out_dir / "calibration.md"
        cal.write_text(
            f"# {out_dir.name}: calibration during active learning\n\n"
            "Test accuracy, top-label expected calibration error (15 equal-width bins) and negative log "
            "likelihood of the test predictions at a few label counts, mean ± population std over seeds. "
            "The MC-dropout network (`bayesian`) predicts as the preset's eval_method says (`mc`: the mean "
            "of its T passes; `deterministic`: dropout off), the deterministic baseline with dropout off, "
            "and a deep ensemble (`ensembleM`) with the mean of its members.\n\n"
            + calibration_markdown(rows) + "\n")
        cal_figure = out_dir / "calibration.png"
        plot_calibration(rows, cal_figure, title=f"{dataset}: accuracy and calibration during active learning "
                                                 "(mean ± std over seeds)")
        paths += [cal, cal_figure]
        ens = out_dir / "ensemble.png"
        variants = tuple(sorted({r["variant"] for r in rows if r["variant"].startswith(("bayesian", "ensemble"))}))
        plot_curves(rows, ens, variants=variants, title=f"{dataset}: MC dropout against a deep ensemble")
        paths.append(ens)
    return paths
