"""The user-facing pages speak of the library and its results, not of the project's bookkeeping.

A reader cannot follow "stop 39", "issue 41" or "a session lent a device": those name the steps and
machines of the project's own work. A page names a machine by what it is ("an NVIDIA H100"), and an
issue number only inside a link that a reader can open (another project's issue on GitHub, say).

The pages checked: every Markdown page under ``docs/`` (the generated tables of ``docs/results/``
included), ``README.md`` and the gallery examples' text. ``docs/decisions.md`` is the developers'
record of why the code is as it is: its sections are keyed by the issue that made each decision, so
issue numbers stay there; it is checked for everything else ("stop N", lent machines, work sessions).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The developers' record: issue numbers allowed (see the module's docstring).
DEVELOPER_RECORD = "docs/decisions.md"

#: What a page may not say outside a link: (pattern, what it is).
BOOKKEEPING = [
    (re.compile(r"\bstops?\s+\d+", re.I), "a step of the project's work"),
    (re.compile(r"\bissues?\s+\d+(?:\s*(?:,|and|&)\s*\d+)*", re.I), "one of the project's issues"),
    (re.compile(r"\bissues?\s+#\d+", re.I), "an issue number without its link"),
    (re.compile(r"\blent\b|\blends?\b(?= (?:a|one|the) (?:GPU|device|machine))", re.I), "a lent machine"),
    (re.compile(r"\bsessions?\b(?= (?:lent|that ran\b))", re.I), "a work session"),
    (re.compile(r"\b(?:the|a|other) sessions?'s? (?:other work|light tests|processes)", re.I), "a work session"),
    (re.compile(r"\b(?:across|over) several sessions\b", re.I), "a work session"),
    (re.compile(r"\bdevice (?:lease|time lent)\b", re.I), "a lent machine"),
]
#: Issue numbers are allowed in the developers' record; the rest is not.
_RECORD_EXEMPT = {"one of the project's issues"}

#: What a reader can open: a Markdown link or autolink, a reST link, a bare URL (removed before the check).
_LINKS = [re.compile(r"\[[^\]]*\]\((?:https?://|mailto:)[^)]*\)"), re.compile(r"<https?://[^>]*>"),
          re.compile(r"`[^`<]*<https?://[^>]*>`_+"), re.compile(r"https?://\S+")]
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def pages():
    found = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
    found += [ROOT / "README.md"] + sorted((ROOT / "examples").glob("*.py")) + [ROOT / "examples" / "README.txt"]
    return [p.relative_to(ROOT).as_posix() for p in found if p.exists()]


def bookkeeping(text: str, record: bool = False):
    """``[(line, text, what)]``: the bookkeeping a page's ``text`` names outside links and HTML comments.

    Examples
    --------
    >>> bookkeeping("## PowerBALD on the cluster (stop 39)")
    [(1, 'stop 39', "a step of the project's work")]
    >>> bookkeeping("as [issue 123](https://github.com/o/r/issues/123) says <!-- cite: issue 14's goal -->")
    []
    >>> [w for _, w, _ in bookkeeping("issues 30 and 42; one run on a lent machine")]
    ['issues 30 and 42', 'lent']
    >>> bookkeeping("## A section (issue 41)", record=True)
    []
    >>> bookkeeping("fails (modAL issue #196); see [modAL issue #196](https://github.com/modAL-python/modAL/issues/196)")
    [(1, 'issue #196', 'an issue number without its link')]
    """
    text = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    for link in _LINKS:
        text = link.sub(" ", text)
    found = []
    for i, line in enumerate(text.splitlines(), 1):
        for pattern, what in BOOKKEEPING:
            if record and what in _RECORD_EXEMPT:
                continue
            found += [(i, m.group(), what) for m in pattern.finditer(line)]
    return found


@pytest.mark.parametrize("page", pages())
def test_a_user_page_names_no_internal_bookkeeping(page):
    found = bookkeeping((ROOT / page).read_text(encoding="utf-8"), record=page == DEVELOPER_RECORD)
    assert not found, f"{page}: internal bookkeeping a reader cannot follow:\n" + "\n".join(
        f"  line {i}: {text!r} ({what})" for i, text, what in found)


def test_the_checked_pages_include_the_results_and_performance_pages():
    assert {"docs/results/README.md", "docs/performance.md", "README.md", DEVELOPER_RECORD} <= set(pages())


# --- the results and performance pages lead with the answer


def _load_substitutions_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_docs_subs_pages", ROOT / "docs" / "_substitutions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["docs/results/README.md", "docs/performance.md"])
def test_the_page_opens_with_one_summary_table_and_ends_with_provenance(page):
    """The first table is the page's first content after a short paragraph: what was measured, against
    which paper or peer, the figure and its noise; the provenance is the last section."""
    text = (ROOT / page).read_text(encoding="utf-8")
    lines = text.splitlines()
    first_heading = next(i for i, line in enumerate(lines) if line.startswith("## "))
    opening = lines[:first_heading]
    tables = [i for i, line in enumerate(opening) if line.startswith("| ") and opening[i + 1].startswith("|---")]
    assert len(tables) == 1, tables
    header = [c.strip() for c in opening[tables[0]].strip("|").split("|")]
    assert header[0] == "measured" and header[-1] == "noise" and len(header) == 4, header
    assert len([line for line in opening if line.startswith("| ")]) >= 10   # a row per headline result
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[-1] == "## Provenance"
    assert "_table }}" in text[text.index("## Provenance"):]   # generated from the committed files


@pytest.mark.parametrize("page", ["docs/results/README.md", "docs/performance.md"])
def test_headings_are_short_and_carry_no_targets(page):
    fence = False
    for line in (ROOT / page).read_text(encoding="utf-8").splitlines():
        fence = fence != line.startswith("```")
        if line.startswith("#") and not fence:
            assert "target" not in line.lower() and len(line) <= 60, line


def test_the_provenance_tables_read_the_records(tmp_path):
    subs = _load_substitutions_module()
    machine = {"platform": "Linux-x", "cpu_count": 2, "cpu_model": "AMD EPYC", "python": "3.11.7",
               "torch": "2.13.0+cpu", "gpus": [], "versions": {"numpy": "2.2.6", "skorch": "1.4.0", "dask": "1"}}
    (tmp_path / "bench_memory").mkdir()
    (tmp_path / "bench_memory" / "bench_memory.json").write_text(json.dumps(
        {"started": "2026-11-27T10:00:00+0000", "provenance": {**machine, "commit": "abcdef0123456789"}}))
    table = subs.benchmark_provenance_table(tmp_path)["performance__provenance_table"].splitlines()
    assert table[0] == "| benchmark | machine | Python | torch | other packages | commit | run |"
    assert table[2] == ("| memory | AMD EPYC, 2 cores | 3.11.7 | 2.13.0+cpu | numpy 2.2.6, skorch 1.4.0 | `abcdef0` "
                        "| 2026\u201111\u201127 |")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "facts.json").write_text(json.dumps({"preset": {"mask_seeding": "row"}, "provenance": {
        "machines": [machine], "devices": ["cpu"], "results_versions": [3],
        "parallelism": [{"n_jobs": 2, "torch_threads": 1}],
        "invocations": [{"commit": "not recorded", "started": "2026-11-23T19:00:00+00:00"},
                        {"commit": "not recorded", "started": "2026-11-24T08:00:00+00:00"}]}}))
    grids = subs.grid_provenance_tables(tmp_path)
    assert grids["results__hosts_table"].splitlines()[2] == \
        "| CPU\u00a0A | 2 | AMD EPYC | 3.11.7 | 2.13.0+cpu | `Linux-x` |"
    assert grids["results__grids_table"].splitlines()[2] == \
        "| g/ | CPU\u00a0A | 2\u00a0×\u00a01 | 3 (`row`) | — | 2026\u201111\u201123 to 2026\u201111\u201124 |"
