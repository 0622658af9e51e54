"""The ``skdbal`` command: its parser and :func:`main`, dispatching to the subcommands.

- ``quickstart`` (the default), ``experiment``, ``report``: the research
  tooling (:mod:`skdbal.experiments.cli`);
- ``label``: label a pool in the browser (:mod:`skdbal.labelling.cli`);
- ``labelstudio``: order a Label Studio project's queue (:mod:`skdbal.labelstudio.cli`).

Each subcommand's module adds its parser and the function that runs it; this
module imports them when the parser is built, and none of them imports torch
before a command runs.

Bad input is one line on stderr in the command's words (``skdbal label: error: ...``),
exit status 2, before anything is printed or written: an unknown flag is named with
the closest one (:class:`CommandParser`), and a refusal from a library function that
names a Python parameter names the command's flag instead (:func:`in_flags`).
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import List, Optional

__all__ = ["CommandParser", "build_parser", "in_flags", "main"]

_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, ``<prog>: error: <message>``, exit status 2,
    without the usage block (``--help`` shows it), and which names an unknown flag with the closest
    one it knows.

    Examples
    --------
    >>> import contextlib, io
    >>> from skdbal.cli import CommandParser
    >>> parser = CommandParser(prog="skdbal label")
    >>> _ = parser.add_argument("--batch-size", type=int)
    >>> parser.unknown_flag(["--batch-size", "3", "--bach-size", "4"])
    'unrecognized argument --bach-size (did you mean --batch-size?)'
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     parser.parse_args(["--batch-size", "x"])
    Traceback (most recent call last):
        ...
    SystemExit: 2
    >>> print(err.getvalue(), end="")
    skdbal label: error: argument --batch-size: invalid int value: 'x'
    """

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")

    def _knows(self, flag: str) -> bool:
        if flag in self._option_string_actions:
            return True
        return self.allow_abbrev and flag.startswith("--") and any(
            o.startswith(flag) for o in self._option_string_actions)

    def unknown_flag(self, argv) -> Optional[str]:
        """What to say of the first flag in ``argv`` that this parser does not know (None if all are
        known): its name and, if one is close, the flag meant."""
        for arg in argv:
            if arg == "--":
                break
            if not arg.startswith("-") or arg == "-" or _NUMBER.match(arg):
                continue
            flag = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]
            if self._knows(flag):
                continue
            options = {o[2:]: o for o in self._option_string_actions if o.startswith("--")}
            close = difflib.get_close_matches(flag.lstrip("-"), sorted(options), n=1, cutoff=0.6)
            return f"unrecognized argument {flag}" + (f" (did you mean {options[close[0]]}?)" if close else "")
        return None


def in_flags(message: str, parser: argparse.ArgumentParser) -> str:
    """``message`` with the Python parameters that are ``parser``'s options named as its flags:
    ``batch_size=10`` and ``batch_size`` become ``--batch-size 10`` and ``--batch-size``.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.cli import in_flags
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--n-instances", type=int)
    >>> in_flags("n_instances must be >= 1; got -1", parser)
    '--n-instances must be >= 1; got -1'
    >>> in_flags("n_instances=0 is too small", parser)
    '--n-instances 0 is too small'
    """
    for action in parser._actions:
        flags = [o for o in action.option_strings if o.startswith("--")]
        if not flags or "_" not in action.dest and action.dest != "device":
            continue
        name = rf"(?<![\w'-]){re.escape(action.dest)}(?![\w'])"
        if re.search(name + "=", message):
            message = re.sub(name + "=", flags[0] + " ", message, count=1)
        else:
            message = re.sub(name, flags[0], message, count=1)
    return message


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

    parser = CommandParser(prog="skdbal", description="Deep Bayesian active learning.")
    parser.add_argument("--version", action="version", version=f"skdbal {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=CommandParser)
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
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    command = commands.get(argv[0])
    if command is None and argv[0] not in ("-h", "--help", "--version"):
        close = difflib.get_close_matches(argv[0], list(commands), n=1)
        parser.error(f"unknown command {argv[0]!r}" + (f" (did you mean {close[0]}?)" if close else "")
                     + f"; the commands are {', '.join(commands)}")
    if command is not None:   # an unknown flag first: it is often why a required one seems missing
        said = command.unknown_flag(argv[1:])
        if said:
            command.error(said)
    args, extras = parser.parse_known_args(argv)
    said_by: argparse.ArgumentParser = command if command is not None else parser   # the one whose words
    if extras:   # a stray value
        said_by.error(f"unrecognized argument {extras[0]}")
    try:
        return args.func(args)
    except KeyboardInterrupt:  # the run files are written atomically after each step
        print("\ninterrupted; rerun the same command to resume" if args.command == "experiment"
              else "\ninterrupted", file=sys.stderr)
        return 130
    except ValueError as exc:
        said_by.error(in_flags(str(exc), said_by))
        return 2
    except Exception as exc:
        from .experiments import FolderLockedError

        if not isinstance(exc, FolderLockedError):
            raise
        print(f"{said_by.prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
