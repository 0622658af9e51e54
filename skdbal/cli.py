"""The ``skdbal`` command: its parser and :func:`main`, dispatching to the subcommands.

- ``quickstart`` (the default), ``experiment``, ``report``: the research
  tooling (:mod:`skdbal.experiments.cli`);
- ``label``: label a pool in the browser (:mod:`skdbal.labelling.cli`);
- ``labelstudio``: order a Label Studio project's queue (:mod:`skdbal.labelstudio.cli`).

Each subcommand's module adds its parser and the function that runs it; this
module imports them when the parser is built, and none of them imports torch
before a command runs.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``skdbal`` parser: ``--version`` and the subcommands, each with its ``func``.

    Examples
    --------
    >>> from skdbal.cli import build_parser
    >>> build_parser().parse_args(["report", "docs/results/gal2017"]).func.__module__
    'skdbal.experiments.cli'
    """
    from . import __version__
    from .experiments.cli import add_parsers as add_experiment_parsers
    from .labelling.cli import add_parser as add_label_parser
    from .labelling.cli import run as run_label
    from .labelstudio.cli import add_parser as add_labelstudio_parser
    from .labelstudio.cli import run as run_labelstudio

    parser = argparse.ArgumentParser(prog="skdbal", description="Deep Bayesian active learning.")
    parser.add_argument("--version", action="version", version=f"skdbal {__version__}")
    sub = parser.add_subparsers(dest="command")
    add_experiment_parsers(sub)
    add_label_parser(sub).set_defaults(func=run_label)
    add_labelstudio_parser(sub).set_defaults(func=run_labelstudio)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """The ``skdbal`` command: ``quickstart`` (the default), ``experiment``, ``report``, ``label`` and
    ``labelstudio``.

    Parameters
    ----------
    argv : list of str, optional
        The arguments; ``sys.argv[1:]`` by default. Without a subcommand
        (or with options only) the quickstart runs.

    Returns
    -------
    int
        The exit status: 0 on success, 2 for a usage error (with a message
        naming it), 130 when interrupted, 1 when the output folder is being
        written by another grid.

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.cli import main
    >>> tiny = ["n_queries=1", "max_epochs=2", "n_samples=4", "pool_subsample=100", "n_validation=50",
    ...         "module_params={'kernel_size': 3}"]          # a grid of a second on digits
    >>> out = tempfile.mkdtemp()
    >>> args = ["experiment", "--dataset", "digits", "--strategies", "bald,random", "--seeds", "1",
    ...         "--torch-threads", "1", "--quiet", "--out", out] + [a for kv in tiny for a in ("--set", kv)]
    >>> main(args)                            # doctest: +ELLIPSIS
    grid done in ... s; wrote ...table.md, ...learning_curves.png
    0
    >>> main(["report", out])                 # doctest: +ELLIPSIS
    wrote ...table.md, ...learning_curves.png, ...facts.json
    0
    >>> main(["experiment", "--noise-rates", "1.5", "--out", out])   # a usage error (message on stderr)
    Traceback (most recent call last):
        ...
    SystemExit: 2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["quickstart"] + argv
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # the run files are written atomically after each step
        print("\ninterrupted; rerun the same command to resume" if args.command == "experiment"
              else "\ninterrupted", file=sys.stderr)
        return 130
    except ValueError as exc:
        parser.error(str(exc))
        return 2
    except Exception as exc:
        from .experiments import FolderLockedError

        if not isinstance(exc, FolderLockedError):
            raise
        print(f"skdbal: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
