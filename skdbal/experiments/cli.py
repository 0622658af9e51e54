"""The experiment commands of ``skdbal`` (:mod:`skdbal.cli`): ``quickstart`` (the default),
``experiment`` and ``report``."""
from __future__ import annotations

import argparse
import time

from .._validation import number_in, positive_number, whole_number

__all__ = ["add_parsers", "split_names"]

#: ``--noise-rates``: a share of wrong labels, in [0, 1).
_NOISE_RATE = number_in("[0, 1)", "a noise rate")


def _quickstart(args) -> int:
    from ..acquisition import STRATEGIES
    from .factories import resolve_device
    from .quickstart import format_table, plot_learning_curves, run_quickstart

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    # refused before the run's header: a strategy name, a repeat, a device
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        raise ValueError(f"--strategies: unknown {', '.join(map(repr, unknown))}; choose from "
                         f"{', '.join(sorted(STRATEGIES))}" if unknown else "--strategies names no strategy")
    for flag, values in (("--strategies", strategies), ("--seeds", list(args.seeds))):
        repeated = sorted({v for v in values if values.count(v) > 1}, key=str)
        if repeated:
            raise ValueError(f"{flag} repeats {', '.join(map(str, repeated))}: each run would be counted more "
                             "than once")
    resolve_device(args.device)
    print(f"skdbal quickstart: {', '.join(strategies)} on digits, seeds {args.seeds}, "
          f"{args.n_queries} queries of {args.n_instances}", flush=True)
    t0 = time.perf_counter()
    results = run_quickstart(strategies, args.seeds, args.n_queries, args.n_instances, verbose=not args.quiet,
                             n_jobs=args.n_jobs, device=args.device)
    print()
    print(format_table(results))
    plot_learning_curves(results, args.out, title="skdbal quickstart: digits, Bayesian CNN")
    print(f"\nlearning curves written to {args.out} ({time.perf_counter() - t0:.0f} s in all)")
    return 0


def _parse_overrides(items) -> dict:
    """``key=value`` pairs; values parsed as Python literals when possible.

    A bool field (:data:`~skdbal.experiments.presets.BOOL_FIELDS`) also takes
    ``true``/``false`` (any case), converted to True/False; any other string
    stays a string, which the preset refuses for a bool field. A key given
    twice with different values, and ``name`` (the preset is named by
    ``--preset``), are refused (ValueError)."""
    import ast

    from .presets import BOOL_FIELDS

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set expects key=value; got {item!r}")
        if key == "name":
            raise ValueError("--set name=... is not accepted: the preset is chosen with --preset, and its runs are "
                             "named after it")
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = value
        if key in BOOL_FIELDS and isinstance(parsed, str) and parsed.strip().lower() in ("true", "false"):
            parsed = parsed.strip().lower() == "true"
        if key in out and (out[key] != parsed or type(out[key]) is not type(parsed)):
            raise ValueError(f"--set {key} is given twice with different values ({out[key]!r} and {parsed!r})")
        out[key] = parsed
    return out


def split_names(text: str) -> list:
    """Comma-separated names, commas inside parentheses kept: ``"bald,filter(bald,0.1)"``.

    Examples
    --------
    >>> from skdbal.experiments.cli import split_names
    >>> split_names("bald, filter(bald,0.1),random")
    ['bald', 'filter(bald,0.1)', 'random']
    """
    names, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            names.append(current.strip())
            current = ""
        else:
            current += ch
    names.append(current.strip())
    return [n for n in names if n]


def _experiment(args) -> int:
    from .presets import get_preset
    from .runner import run_grid

    strategies = split_names(args.strategies)
    if not strategies:
        raise ValueError(f"--strategies names no strategy: {args.strategies!r}")
    try:
        overrides = _parse_overrides(args.set)
        if args.dataset is not None:
            if overrides.get("dataset", args.dataset) != args.dataset:
                raise ValueError(f"--dataset {args.dataset} and --set dataset={overrides['dataset']!r} disagree; "
                                 "give one of them")
            overrides["dataset"] = args.dataset
        preset = get_preset(args.preset, **overrides)  # a bad --set value is a usage error before anything runs
    except TypeError as exc:  # a --set value of the wrong type: a usage error like a bad choice
        raise ValueError(f"--set: {exc}") from None
    except ValueError as exc:
        if "preset field" in str(exc):   # a --set key the preset does not have
            raise ValueError(f"--set: {exc}") from None
        raise
    t0 = time.perf_counter()
    last_layer = [s.strip() for s in (args.last_layer or "").split(",") if s.strip()]
    from .factories import resolve_device
    from .specs import grid_specs

    try:   # the grid's arguments and device checked before its folder is made
        grid_specs(preset, strategies, args.seeds, deterministic_baseline=args.deterministic_baseline,
                   last_layer=last_layer, noise_rates=args.noise_rates, initial_sets=args.initial_sets,
                   ensemble=args.ensemble, laplace=args.laplace, representations=args.representation,
                   head=args.head, encoder_epochs=args.encoder_epochs)
    except ValueError as exc:   # a strategy name refused: said as --strategies'
        if str(exc).startswith(("unknown strategy", "unknown decorator", "cannot read strategy name")):
            raise ValueError(f"--strategies: {exc}") from None
        if str(exc).startswith("head="):
            raise ValueError(f"--head {args.head} is the model over a representation's embeddings; give "
                             "--representation too, e.g. --representation pool") from None
        if str(exc).startswith("unknown representation") or str(exc).startswith("representation '"):
            raise ValueError(f"--representation: {exc}") from None
        raise
    resolve_device(args.device)
    # the preset by name and the --set values as overrides, so that grid.json records them as given
    run_grid(args.preset, strategies, args.seeds, args.out, deterministic_baseline=args.deterministic_baseline,
             last_layer=last_layer, noise_rates=args.noise_rates, initial_sets=args.initial_sets,
             ensemble=args.ensemble, laplace=args.laplace, representations=args.representation,
             head=args.head, encoder_epochs=args.encoder_epochs, n_jobs=args.n_jobs,
             torch_threads=args.torch_threads, verbose=not args.quiet, device=args.device,
             scheduler=args.scheduler, **overrides)
    from .report import write_report

    paths = write_report(args.out)
    print(f"grid done in {time.perf_counter() - t0:.0f} s; wrote " + ", ".join(map(str, paths)))
    return 0


def _report(args) -> int:
    from pathlib import Path

    from .report import write_report

    if not (Path(args.out) / "results.csv").is_file():  # a usage error naming the folder, not a traceback
        raise ValueError(f"{args.out} holds no grid ({Path(args.out) / 'results.csv'} is missing): give a folder "
                         "written by skdbal experiment")
    if args.clean is not None:  # checked here: otherwise a --clean that cannot apply would be ignored
        from .results import read_results

        clean = Path(args.clean) / "results.csv"
        if not clean.is_file():
            raise ValueError(f"--clean {args.clean}: no grid there ({clean} is missing)")
        results = Path(args.out) / "results.csv"
        if results.is_file() and not any(r["noise_rate"] for r in read_results(results)):
            raise ValueError(f"--clean is for a grid with label noise (its runs stand for 0% noise beside the noisy "
                             f"ones), and {args.out} has no noisy runs")
    paths = write_report(args.out, clean_dir=args.clean)
    if args.cost:
        from .report import write_cost

        paths.append(write_cost(args.out))
    from .facts import write_facts

    paths.append(write_facts(args.out, reruns=args.rerun, rerun_floor=args.rerun_floor))
    print("wrote " + ", ".join(map(str, paths)))
    return 0


_DATA_HELP = (
    "MNIST (the gal2017, pilz2025 and kirsch2019 presets) is read from $SKDBAL_DATA/mnist when SKDBAL_DATA is set, "
    "else from ~/skdbal_data/mnist, where it is downloaded on first use (the four IDX .gz files, from "
    "mirrors of Yann LeCun's site, SHA-256 checked). --set dataset='digits' uses scikit-learn's "
    "bundled digits instead (no download).")


def _experiment_epilog() -> str:
    """The preset fields ``--set`` takes and the strategy names, for ``experiment --help``."""
    import dataclasses
    import textwrap

    from ..acquisition import DECORATORS, STRATEGIES
    from .presets import PRESETS, Preset

    gal = PRESETS["gal2017"]
    fields = ", ".join(f"{f.name}={getattr(gal, f.name)!r}" for f in dataclasses.fields(Preset)
                       if f.name not in ("name", "notes"))
    decorators = ", ".join(f"{name}(<strategy>, {', '.join(params)})" for name, (_, params) in DECORATORS.items())
    wrap = lambda text: textwrap.fill(text, 100, subsequent_indent="  ")  # noqa: E731
    return "\n\n".join([
        wrap("strategies: " + ", ".join(STRATEGIES) + "; decorators: " + decorators
             + ", e.g. filter(bald,dynamic), filter(bald,batch), filter(bald,0.1), diverse(bald,0.1),"
             " diverse(filter(bald,batch),0.1,embedding)."),
        wrap("preset fields for --set (with gal2017's values): " + fields + "."),
        wrap(_DATA_HELP),
        wrap("An interrupted grid resumes where it stopped: rerun the same command (Ctrl-C is safe)."),
    ])


_LAZY_EPILOG = "(the strategies and preset fields)"


class _ExperimentHelp(argparse.RawDescriptionHelpFormatter):
    """Writes the epilog (which imports the strategies) only when the help is shown."""

    def _format_text(self, text):
        return super()._format_text(_experiment_epilog() if text == _LAZY_EPILOG else text)


def _jobs(text: str) -> int:
    """``--n-jobs``: a whole number other than 0 (-1: one per CPU core, as joblib's)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value == 0:
        raise argparse.ArgumentTypeError("0 runs nothing: give 1 or more (or -1 for one per CPU core)")
    return value


def add_parsers(sub) -> None:
    """Add ``quickstart``, ``experiment`` and ``report`` to the subcommands ``sub`` of the
    ``skdbal`` command (:func:`skdbal.cli.build_parser`), each with its ``func``.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.experiments.cli import add_parsers
    >>> sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    >>> add_parsers(sub)
    >>> sorted(sub.choices)
    ['experiment', 'quickstart', 'report']
    """
    qs = sub.add_parser("quickstart", help="BALD against random on scikit-learn's digits (default)")
    qs.add_argument("--strategies", default="bald,random",
                    help="comma-separated: bald, max_entropy, variation_ratios, mean_std, random")
    qs.add_argument("--n-queries", type=whole_number(0), default=12, help="acquisition rounds (default 12)")
    qs.add_argument("--n-instances", type=whole_number(1), default=10, help="points per round (default 10)")
    qs.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    qs.add_argument("--out", default="quickstart.png", help="learning-curve PNG (default quickstart.png)")
    qs.add_argument("--n-jobs", type=_jobs, default=None,
                    help="runs in parallel, each on one torch thread (default: one per CPU core)")
    qs.add_argument("--quiet", action="store_true", help="no progress bar")
    qs.add_argument("--device", default="auto",
                    help="torch device: auto (default: cuda when torch sees a GPU, else cpu), cpu or cuda")
    qs.set_defaults(func=_quickstart)

    ex = sub.add_parser("experiment", help="run a resumable grid of strategies x seeds of a preset",
                        epilog=_LAZY_EPILOG, formatter_class=_ExperimentHelp)
    ex.add_argument("--preset", default="gal2017",
                    help="gal2017 (default), pilz2025, kirsch2019 or fewlabels (10 initial labels, 300 in all, "
                         "for comparing --representation none pool pca)")
    ex.add_argument("--strategies", default="bald,variation_ratios,max_entropy,mean_std,random",
                    help="comma-separated strategy names; decorators wrap a name with their parameters, "
                         "e.g. bald,batch_bald,filter(bald,0.1),filter(bald,dynamic),diverse(bald,0.1)")
    ex.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds (default 1 2 3)")
    ex.add_argument("--noise-rates", type=_NOISE_RATE, nargs="+", default=[0.0], metavar="RATE",
                    help="label noise of the annotator, each in [0, 1) (default 0): the pool's labels are "
                         "flipped symmetrically, once per point")
    ex.add_argument("--initial-sets", nargs="+", default=["balanced_random"], metavar="NAME",
                    choices=["balanced_random", "kmeans_per_class", "kmeans"],
                    help="initial labelled sets, each a run of its own: balanced_random (default; Gal et al.), "
                         "kmeans_per_class (the points nearest k-means centroids within each class; needs the "
                         "pool's labels) or kmeans (label-free, over the whole pool)")
    ex.add_argument("--ensemble", type=whole_number(0, " (0: none)"), default=0, metavar="M",
                    help="run a deep ensemble of M of the preset's networks instead of MC dropout (variant "
                         "ensembleM): the members, with dropout off at prediction, are the samples; M times "
                         "the training cost")
    ex.add_argument("--dataset", default=None, choices=["mnist", "repeated_mnist", "fashion_mnist", "digits"],
                    help="the preset's data set (default: the preset's, mnist for gal2017); repeated_mnist is "
                         "Kirsch et al.'s Repeated-MNIST, every training image 3 times with Gaussian noise; "
                         "fashion_mnist is Zalando's Fashion-MNIST (skdbal.datasets.load_fashion_mnist)")
    ex.add_argument("--representation", nargs="+", default=["none"], metavar="NAME",
                    help="what the runs learn on, each a run of its own on the same seeds: none (default: the "
                         "preset's network on the pixels), pool (an encoder learnt from the pool, no labels), "
                         "pca (50 principal components) or file:PATH (a .npy of embeddings, training rows then "
                         "test rows, or an encoder file .pt, .pt2 or .onnx); e.g. --representation none pool")
    ex.add_argument("--head", default="mc_dropout",
                    choices=["mc_dropout", "laplace", "ensemble", "bll", "bll_mfvi", "spread"],
                    help="the Bayesian head over a representation's embeddings (default mc_dropout); spread "
                         "spreads the labels over the pool's neighbour graph")
    ex.add_argument("--encoder-epochs", type=positive_number, default=15.0, metavar="EPOCHS",
                    help="passes of the pool encoder over the pool (default 15)")
    ex.add_argument("--n-jobs", type=_jobs, default=1, help="runs in parallel (default 1)")
    ex.add_argument("--torch-threads", type=whole_number(1), default=None,
                    help="torch threads per run (default cpus/n-jobs; 1 with --scheduler)")
    ex.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="run the grid on a Dask cluster (tcp://host:8786; the dask extra): one task per run on "
                         "its workers, with --out and the data on a file system they all reach")
    ex.add_argument("--deterministic-baseline", action="store_true",
                    help="also run mc_dropout=False for max_entropy and variation_ratios (Gal et al. 5.2)")
    ex.add_argument("--laplace", action="store_true",
                    help="score and evaluate with a last-layer Laplace posterior of each step's network "
                         "(laplace-torch; variant laplace) instead of MC dropout")
    ex.add_argument("--last-layer", default=None, metavar="analytic,mfvi",
                    help="score with a Bayesian linear regression on the CNN's penultimate features instead of "
                         "its softmax (exact 'analytic' inference, or mean-field variational 'mfvi'), as in "
                         "Anonymous (n.d.), section 4; e.g. --last-layer analytic,mfvi "
                         "--strategies predictive_variance")
    ex.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a preset field, e.g. --set n_queries=3 (repeatable)")
    ex.add_argument("--out", required=True, help="output folder; an interrupted grid resumes from it")
    ex.add_argument("--quiet", action="store_true", help="no per-step lines")
    ex.add_argument("--device", default="cpu",
                    help="torch device: cpu (default), cuda, or auto (cuda when torch sees a GPU); the runs "
                         "record it, since a GPU's numbers differ from a CPU's in the last digits")
    ex.set_defaults(func=_experiment)

    rp = sub.add_parser("report", help="write the table and figures of a grid's results")
    rp.add_argument("out", help="a folder written by skdbal experiment")
    rp.add_argument("--clean", default=None, metavar="DIR",
                    help="a grid without label noise whose runs of the same strategies stand for 0%% noise in "
                         "the cross-rate noise table and figure, e.g. docs/results/gal2017")
    rp.add_argument("--cost", action="store_true",
                    help="also write cost.md: labels to 90%% and 95%% by median, step-average and average-step, "
                         "beside the median seconds a step spends scoring, training and in all")
    rp.add_argument("--rerun", action="append", default=[], metavar="DIR",
                    help="a folder whose runs repeat some of this one's (same run names and preset): facts.json "
                         "records how far their medians moved, the rerun spread that widens every comparison")
    rp.add_argument("--rerun-floor", default=None, metavar="DIR",
                    help="a folder whose facts.json measured the rerun spread on the same preset, taken as this "
                         "folder's where --rerun measures none")
    rp.set_defaults(func=_report)
