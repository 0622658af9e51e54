"""Command line: ``skdbal quickstart`` (the default)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional

__all__ = ["main"]


def _quickstart(args) -> int:
    from .quickstart import format_table, plot_learning_curves, run_quickstart

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    print(f"skdbal quickstart: {', '.join(strategies)} on digits, seeds {args.seeds}, "
          f"{args.n_queries} queries of {args.n_instances}", flush=True)
    t0 = time.perf_counter()
    results = run_quickstart(strategies, args.seeds, args.n_queries, args.n_instances)
    print()
    print(format_table(results))
    plot_learning_curves(results, args.out, title="skdbal quickstart: digits, Bayesian CNN")
    print(f"\nlearning curves written to {args.out} ({time.perf_counter() - t0:.0f} s in all)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skdbal", description="Deep Bayesian active learning.")
    sub = parser.add_subparsers(dest="command")
    qs = sub.add_parser("quickstart", help="BALD against random on scikit-learn's digits (default)")
    qs.add_argument("--strategies", default="bald,random",
                    help="comma-separated: bald, max_entropy, variation_ratios, mean_std, random")
    qs.add_argument("--n-queries", type=int, default=12, help="acquisition rounds (default 12)")
    qs.add_argument("--n-instances", type=int, default=10, help="points per round (default 10)")
    qs.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    qs.add_argument("--out", default="quickstart.png", help="learning-curve PNG (default quickstart.png)")
    qs.set_defaults(func=_quickstart)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["quickstart"] + argv
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        parser.error(str(exc))
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
