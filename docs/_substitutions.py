"""The MyST substitutions of the docs: figures read from the files under ``docs/results/``.

``docs/conf.py`` sets ``myst_substitutions = substitutions(...)``; a page
writes ``{{ key }}``. The keys:

- ``<folder>__…`` from each ``docs/results/<folder>/facts.json`` (written
  by ``skdbal report``; :func:`skdbal.experiments.facts.facts_substitutions`
  documents the fields), with ``<folder>__order_acc90`` and the
  comparisons across folders declared in :data:`SAME_ORDER` and :data:`ABOVE`;
- ``<bench>__…`` from each benchmark JSON named in :data:`BENCHMARKS`, its
  keys slugged and joined by ``__``
  (:func:`skdbal.experiments.facts.json_substitutions`).
"""
from __future__ import annotations

import json
from pathlib import Path

from skdbal.experiments.facts import json_substitutions, results_substitutions

#: Pairs of folders whose strategies' order by median a page compares.
SAME_ORDER = [("post2019", "post2019_cuda")]
#: (folder, group, folder, group): from which labels A's mean curve stays above B's.
ABOVE = [("post2019_cuda_laplace", "bald__laplace", "post2019_cuda", "random")]
#: The benchmark JSONs that docs/performance.md quotes: substitution prefix -> path under docs/results.
BENCHMARKS = {"bench_gpu": "bench_gpu/bench_gpu.json"}


def substitutions(results_dir) -> dict:
    """Every substitution of the docs, read from ``results_dir`` (``docs/results``)."""
    results_dir = Path(results_dir)
    subs = results_substitutions(results_dir, same_order=SAME_ORDER, above=ABOVE)
    for prefix, name in BENCHMARKS.items():
        subs.update(json_substitutions(json.loads((results_dir / name).read_text()), prefix))
    return subs
