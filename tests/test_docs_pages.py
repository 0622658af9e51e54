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
