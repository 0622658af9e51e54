"""Every measured figure on the results pages is read from a file, cited, or a setting (issue 44).

A *measured figure* is a digit string in prose: outside code (fenced and
indented blocks, inline code spans), math (``$…$``), MyST substitutions
(``{{ key }}``, which ``docs/conf.py`` fills from the ``facts.json`` and
benchmark JSONs under ``docs/results/``), HTML comments and link targets;
the headings of the pages in :data:`HEADINGS_CHECKED` are checked like prose.
It passes when it is

- on a line that carries a citation marker ``<!-- cite: source -->``
  (a published figure, e.g. a paper's table), or
- a *setting* by the grammar of :data:`SETTINGS` (docs/decisions.md,
  "Numbers on the results pages"): a number that names a protocol's or a
  machine's parameter, a version, a date or a reference.

Any other figure fails the test with its file, line and text: write it as a
substitution, or cite it. The pages checked are listed in :data:`CHECKED`
(whole pages: docs/results/README.md, docs/performance.md, README.md, docs/index.md,
every docs/guide/ page and every gallery example's text blocks).
"""
from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from skdbal.experiments.facts import grid_facts, json_substitutions, results_substitutions

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

#: page -> the headings (their text's start) of the sections checked; None checks the whole file.
CHECKED = {
    "docs/results/README.md": None,
    "docs/performance.md": None,
    "README.md": None,
    "docs/index.md": None,
    **{f"docs/guide/{p.name}": None for p in sorted((ROOT / "docs" / "guide").glob("*.md"))},
    # every gallery example's text blocks
    **{f"examples/{p.name}": None for p in sorted((ROOT / "examples").glob("plot_*.py"))},
}

#: Pages whose headings are checked too (a heading's measured count, "complete: 45 runs", is generated or dropped).
#: TODO: docs/performance.md, whose headings state each benchmark's target.
HEADINGS_CHECKED = {"docs/results/README.md"}

#: The setting grammar: a number matching one of these, in its line, is a setting, not a measured figure.
#: Each pattern names the number with the group ``n``.
SETTINGS = [
    # a parameter given its value: T = 100, b = 10, β = 1, lr 1e-3, batch 128
    # (t = 1 … T, ε = 0.1, a batch of 20 too)
    r"(?:\b[Tbkβτwtε]|\bweights?|\bbatch(?:es)?(?: of)?|\blr|\bepochs?|\bstep size|\bdropout)"
    r"\s*=?\s*[−-]?(?P<n>\d[\d.,e-]*)",
    # seeds, steps and sizes named as settings: seeds 1–3, seed 1, issue 31, results version 3, (step|steps) 0–88
    r"(?i:\b(?:seeds?|steps?|stages?|issues?|items?|faults?|results version|version|invocations?))"
    r"\s+(?P<n>\d+)(?:\s*[–-]\s*\d+)?",
    r"\b(?:seeds?|steps?)\s+\d+\s*[–-]\s*(?P<n>\d+)",
    # the machine: 16 CPU cores, 2 cores, one NVIDIA H100 80GB, 1 torch thread, 7 + 7 + 3 runs at a time, 12 jobs
    r"(?P<n>\d+)\s*(?:CPU cores|cores|GB\b|torch (?:CPU )?threads?|jobs?\b|processes|(?:runs )?at a time)",
    r"(?P<n>\d+)(?:\s*\+\s*\d+)+\s*runs at a time",
    r"(?P<n>\d+)-core\b",
    r"(?P<n>\d+) epochs\b",
    r"(?:\+\s*)(?P<n>\d+)(?=[\s+\d]*runs at a time)",
    # the protocol: 20 balanced initial labels, 2,000 random pool points scored per step, 10 per step, 10,000 images
    r"(?P<n>\d[\d,]*)\s+(?:balanced |class-balanced )?initial (?:labels|points)",
    r"(?P<n>\d[\d,]*)\s+(?:random )?pool points",
    r"(?P<n>\d[\d,]*)\s+(?:per|a) step\b",
    r"(?P<n>\d[\d,]*)\s+(?:(?:MNIST|MNIST-like|test|pool|training|Repeated-MNIST|labelled|unlabelled) )*"
    r"(?:images|digits)\b",
    r"(?P<n>\d+)\s+(?:rounds of|seeds\b|(?:held-out )?folds\b|(?:hidden )?units\b|acquired at a time)",
    r"\brounds of\s+(?P<n>\d+)",
    r"\b(?P<n>\d)-[Dd]\b",
    r"(?P<n>\d+)%(?:\s+|-)(?:label )?(?:noise|panels|of the labels|rate)\b",
    r"\b(?:Nov(?:ember)?\.?)\s+(?P<n>\d{1,2})\b",
    r"(?P<n>\d[\d,]*)-(?:image|point|label|million-image)\b",
    r"(?P<n>\d[\d,]*)\s+(?:validation |pool |scored )?points\b",
    r"(?P<n>\d[\d,]*)\s+(?:fixed )?epochs\b",
    r"(?P<n>\d+)\s+(?:worker processes|workers?|annotators|clients)\b",
    r"(?P<n>\d+)\s+(?:per class|clusters)\b",
    r"(?i:\b(?:batches of|default|chunks of|pages of|requests of|sample of|overlap of|window of|time-outs? of))"
    r"\s+(?P<n>\d[\d,]*)",
    # a default given after its value: "(8080 by default)", "2 by default", "600 s by default"
    r"(?P<n>\d[\d,.]*)(?:\s*s)?\s+by default\b",
    # an API's limits and sizes by their unit: at most 64 characters, 192 bits, 16 KiB, 256 pixels, 10 classes
    r"(?P<n>\d[\d,]*)\s+(?:pixels|bits|bytes|characters|KiB|MiB|classes)\b",
    # a width × height: 1280×900, 8×8 digits
    r"(?<![\w.])(?P<ns>\d+×\d+)(?![\w.])",
    # an interval: [0, 1]
    r"\[(?P<ns>[−-]?\d[\d.]*,\s*[−-]?\d[\d.]*)\]",
    # the top of a ranking: its top 10
    r"\btop\s+(?P<n>\d+)\b",
    # a command's exit status, an HTTP status, a file's mode: exit status 2, refused (403), HTTP 500, mode 600
    r"\bexit (?:status|code)\s+(?P<n>\d+)",
    r"\b(?:HTTP|refused)\s*\(?(?P<n>[1-5]\d\d)\b",
    r"\bmode\s+(?P<n>[0-7]{3,4})\b",
    # an ordered list's marker: "1. **A Label Studio**"
    r"^\s*(?P<n>\d+)[.)]\s",
    # a host address: 127.0.0.1
    r"(?P<n>\d+\.\d+\.\d+\.\d+)",
    r"(?P<n>\d[\d,]*)\s+acquisitions of \d+",
    # a run's length: 200 labels a run
    r"(?P<n>\d[\d,]*)\s+labels a run\b",
    # a table's header of the label counts where a curve is read: "| labels | 20 | 30 | … |"
    r"^\|\s*labels\s*\|(?P<ns>[\d\s|]+)$",
    r"acquisitions of (?P<n>\d+)",
    # where a curve is read: "accuracy at 130 labels", "at 130 / 260 / 390 labels", "from 600 acquired labels"
    # (a list, the group ``ns``); not after a threshold ("reaches 90% at 240 labels" is measured)
    r"(?<!%\s)\b(?i:at|from)\s+(?P<ns>\d[\d,]*(?:\s*(?:/|,|,? and|or)\s*\d[\d,]*)*)\s+(?:acquired\s+)?labels\b",
    # the label-noise grid's rates (0, 10, 20, 30%): listed ("0/10/20/30%", "10, 20 and 30%"), after "at",
    # or before what they qualify ("the 30% runs", "0% rows")
    r"(?<![\d.,])(?P<ns>(?:0|10|20|30)(?:\s*(?:/|,|,? and|or)\s*(?:0|10|20|30))+)%",
    r"\bat\s+(?P<n>0|10|20|30)%",
    r"(?<![\d.,])(?P<n>0|10|20|30)%\s+(?:runs|rows|means|column|filter rows)\b",
    # the thresholds of the measure
    r"\b(?P<n>9[05])%",
    # software versions and dates: Python 3.12.3, torch 2.11.0+cu130, CUDA 13.0, Python ≥ 3.9,
    # label-studio==1.23.2, modAL 0.4.1, a series (0.4.2.x), 2026-11-26, (2019)
    r"\b(?:Python|PyTorch|torch|numpy|scikit-learn|skorch|laplace-torch|baal|CUDA|cuDNN|modAL(?:-python)?"
    r"|scikit-activeml|Label Studio|label-studio|skdbal)\s*(?:[≥≤]|[<>=]=)?\s*(?P<n>\d[\w.+]*)",
    r"(?<![\w.])(?P<n>\d+(?:\.\d+)+)\.x\b",
    r"(?P<n>\d{4}-\d{2}-\d{2})",
    r"(?<![\d,.])(?P<n>(?:19|20)\d\d)(?![\d,.])",
    # references: Table 1, Fig. 3, §5.1, Appendix A
    r"(?:Tables?|Figs?\.?|Figures?|§|Eq\.?)\s*(?P<n>\d[\d.–-]*)",
    r"(?:Tables?|Figs?\.?|Figures?|§)\s*\d[\d.]*\s*(?:[–-]|and|,)\s*(?P<n>\d[\d.]*)",
]
_SETTINGS = [re.compile(p) for p in SETTINGS]
_CITE = re.compile(r"<!--\s*cite:[^>]*-->")
_NUMBER = re.compile(r"(?<![\w.{}/#-])\d+(?:[.,]\d+)*(?![\w}])")


def _strip(line: str) -> str:
    """A prose line without what the test does not read: code spans, substitutions, math, comments, link targets."""
    line = re.sub(r"``.*?``|`[^`]*`", " ", line)
    line = re.sub(r"\{\{.*?\}\}", " ", line)
    line = re.sub(r"\$[^$]*\$", " ", line)
    line = re.sub(r"<!--.*?-->", " ", line)
    line = re.sub(r"\]\([^)]*\)", "] ", line)
    return line


def _prose_lines(text: str, sections, headings: bool = False):
    """``(line number, line)`` of the prose in ``sections`` of a Markdown page (None: all of it), with its
    headings' text where ``headings``."""
    out, fence, code, blank = [], False, False, True
    keep, keep_level = sections is None, 0
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence:
            continue
        if not line.strip():
            blank = True
            continue
        code = line.startswith("    ") and (blank or code)  # an indented code block, after a blank line
        blank = False
        if code:
            continue
        if line.startswith("#"):  # a heading: it opens or closes a checked section (checked itself if asked)
            level = len(line) - len(line.lstrip("#"))
            if sections is not None:
                if any(line.startswith(s) for s in sections):
                    keep, keep_level = True, level
                elif keep and level <= keep_level:
                    keep = False
            if keep and headings:
                out.append((i, line.lstrip("#")))
            continue
        if keep:
            out.append((i, line))
    return out


def _example_text(path: Path):
    """``(line number, line)`` of a gallery example's text blocks: its docstring and the comments of ``# %%`` cells."""
    source = path.read_text()
    doc = ast.get_docstring(ast.parse(source), clean=False) or ""
    first = source.index(doc.splitlines()[1]) if doc.count("\n") else 0
    start = source[:first].count("\n")
    lines = [(start + j, line) for j, line in enumerate(doc.splitlines(), 1)]
    in_cell = False
    for i, line in enumerate(source.splitlines(), 1):
        if line.startswith("# %%"):
            in_cell = True
        elif in_cell and line.startswith("#"):
            lines.append((i, line[1:]))
        else:
            in_cell = False
    # reST literal blocks (after ``::``) are code
    out, literal = [], False
    for i, line in lines:
        if literal and (line.startswith("    ") or not line.strip()):
            continue
        literal = line.rstrip().endswith("::")
        out.append((i, line))
    return out


def measured_figures(lines):
    """The digit strings of ``lines`` that are neither cited nor settings: ``[(line number, number, line)]``."""
    found = []
    for i, line in lines:
        if _CITE.search(line):
            continue
        prose = _strip(line)
        allowed = set()
        for pattern in _SETTINGS:
            for m in pattern.finditer(prose):
                if "ns" in pattern.groupindex:  # a list of settings: every number in it
                    allowed.update(m.start("ns") + n.start() for n in _NUMBER.finditer(m.group("ns")))
                else:
                    allowed.add(m.start("n"))
        for m in _NUMBER.finditer(prose):
            if m.start() not in allowed:
                found.append((i, m.group(), line.strip()))
    return found


def _figures(page: str):
    path = ROOT / page
    lines = _example_text(path) if path.suffix == ".py" else \
        _prose_lines(path.read_text(), CHECKED[page], headings=page in HEADINGS_CHECKED)
    return measured_figures(lines)


@pytest.mark.parametrize("page", sorted(CHECKED))
def test_every_measured_figure_is_read_from_a_file_or_cited(page):
    figures = _figures(page)
    assert not figures, f"{page}: figures neither substituted, cited nor settings:\n" + "\n".join(
        f"  line {i}: {number!r} in: {line}" for i, number, line in figures)


def test_the_checked_sections_exist():
    for page, sections in CHECKED.items():
        text = (ROOT / page).read_text()
        for heading in sections or ():
            assert any(line.startswith(heading) for line in text.splitlines()), (page, heading)


def _site_substitutions():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_docs_conf_substitutions", ROOT / "docs" / "_substitutions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.substitutions(RESULTS)


@pytest.mark.parametrize("page", sorted(p for p in CHECKED if p.endswith(".md")))
def test_every_substitution_on_a_page_is_defined(page):
    subs = _site_substitutions()
    used = set(re.findall(r"\{\{\s*([\w]+)\s*\}\}", (ROOT / page).read_text()))
    assert used - set(subs) == set()


def test_a_figure_in_prose_is_found():
    lines = [(1, "BALD needs 80 labels at T = 100 on 2 cores, seeds 1–3, to 90% (Kirsch et al., 2019)."),
             (4, "accuracy at 130 / 260 and 390 labels; it reaches 90% at 240 labels"),
             (2, "BADGE needs {{ g__badge__acc90_median }} labels; `pip install x==1.2`."),
             (3, "Gal et al. report 145 acquired images <!-- cite: Gal et al. 2017, Table 1 -->")]
    assert [(i, n) for i, n, _ in measured_figures(lines)] == [(1, "80"), (4, "240")]


def test_a_changed_facts_value_changes_the_rendered_substitution(tmp_path):
    shutil.copytree(RESULTS / "post2019_cuda", tmp_path / "post2019_cuda",
                    ignore=shutil.ignore_patterns("runs", "*.png", "*.csv"))
    key = "post2019_cuda__batch_bald__acc90_median"
    before = results_substitutions(tmp_path)[key]
    path = tmp_path / "post2019_cuda" / "facts.json"
    facts = json.loads(path.read_text())
    facts["groups"]["batch_bald"]["acc90"]["median"] += 10
    path.write_text(json.dumps(facts))
    after = results_substitutions(tmp_path)[key]
    assert int(after) == int(before) + 10


def test_a_changed_benchmark_value_changes_the_rendered_substitution():
    bench = json.loads((RESULTS / "bench_gpu" / "bench_gpu.json").read_text())
    method = next(iter(bench["part_a"]["T=100"]))
    before = json_substitutions(bench, "bench_gpu")
    bench["part_a"]["T=100"][method]["runs"] = 7
    after = json_substitutions(bench, "bench_gpu")
    assert before["bench_gpu__part_a__T_100__runs_summary"] != after["bench_gpu__part_a__T_100__runs_summary"]
    assert after["bench_gpu__part_a__T_100__runs_summary"].startswith("7 for ")


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in RESULTS.glob("*/facts.json")))
def test_the_committed_facts_are_those_of_the_committed_runs(folder):
    """``skdbal report`` with the reruns the facts name writes the committed ``facts.json`` byte for byte."""
    path = RESULTS / folder / "facts.json"
    committed = json.loads(path.read_text())["reruns"]
    floor = committed.get("floor_from")
    facts = grid_facts(RESULTS / folder, reruns=[RESULTS / f for f in committed["folders"]],
                       rerun_floor=RESULTS / floor if floor else None)
    assert json.dumps(facts, indent=1, sort_keys=True) + "\n" == path.read_text()


_SUBSTITUTION = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_SIGNS = "−-+"


def sign_faults(text: str, subs: dict):
    """The substitutions of ``text`` that a hand-typed sign precedes: ``[(line, key)]``.

    A sign (−, - or +) right before ``{{ key }}`` is refused whatever the value; one separated by spaces
    is refused when the value is itself signed (it would render "− +2.3"). A list item's marker ("- ",
    "+ " at the start of a line) is not a sign.
    """
    faults = []
    for m in _SUBSTITUTION.finditer(text):
        before = text[:m.start()]
        line_start = before.rfind("\n") + 1
        stripped = before.rstrip(" ")
        if not stripped or stripped[-1] not in _SIGNS:
            continue
        if not stripped[line_start:].strip(" " + _SIGNS) and before[line_start:].lstrip()[:1] in "-+" \
                and len(before[line_start:].strip()) == 1:
            continue  # a list item's marker
        value = str(subs.get(m.group(1), ""))
        if stripped == before or value[:1] in _SIGNS:
            faults.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return faults


def rendered_faults(text: str):
    """Faults of a page as rendered: a doubled sign ("−+2.3"), a count of one in the plural ("1 runs") and a
    range whose ends are equal ("0.82–0.82 s")."""
    faults = [m.group() for m in re.finditer(r"[−+-]\s?[−+]\d[\d.]*", text)]
    faults += [m.group() for m in re.finditer(r"(?<![\d.,])1 (?:runs|seeds|steps|invocations|folders)\b", text)]
    faults += [m.group() for m in re.finditer(r"(?<![\d.,])(\d[\d.,]*)%?–\1(?![\d.,])", text)]
    return faults


def _render(text: str, subs: dict) -> str:
    return _SUBSTITUTION.sub(lambda m: str(subs.get(m.group(1), m.group())), text)


@pytest.mark.parametrize("page", sorted(p for p in CHECKED if p.endswith(".md")))
def test_no_hand_typed_sign_before_a_substitution(page):
    faults = sign_faults((ROOT / page).read_text(), _site_substitutions())
    assert not faults, f"{page}: a sign typed before a substitution (let the value carry it): {faults}"


@pytest.mark.parametrize("page", sorted(p for p in CHECKED if p.endswith(".md")))
def test_the_rendered_page_has_no_doubled_sign_singular_plural_or_one_value_range(page):
    faults = rendered_faults(_render((ROOT / page).read_text(), _site_substitutions()))
    assert not faults, f"{page}: {faults}"


def test_a_sign_before_a_substitution_is_found():
    subs = {"d": "+2.3", "u": "2.3"}
    text = "is {{ d }}, −{{ u }} and − {{ d }}\n- {{ d }} a list item\nA − {{ u }} subtracts"
    assert sign_faults(text, subs) == [(1, "u"), (1, "d")]
    assert rendered_faults("is −+2.3 and (1 runs; 3 runs) 0.82–0.82 s, 0.57–1.7 s, 95.7–95.7%") == \
        ["−+2.3", "1 runs", "0.82–0.82", "95.7–95.7"]


def test_the_declared_copies_are_copies():
    """``docs/_substitutions.COPIED``: every run file of the source is in each folder, byte for byte."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_docs_subs_copied", ROOT / "docs" / "_substitutions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for source, group, folders in module.COPIED:
        files = sorted((RESULTS / source / "runs").glob(f"*__{group}__*"))
        assert files
        for folder in folders:
            for path in files:
                assert (RESULTS / folder / "runs" / path.name).read_bytes() == path.read_bytes(), (folder, path.name)


def test_no_substitution_sits_in_a_code_span():
    """MyST leaves ``{{ key }}`` as it is inside backticks: the page would show the braces, not the value
    (the parts between odd and even backticks of a line are its code spans)."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    found = [f"{p.relative_to(docs)}:{i}" for p in sorted(docs.rglob("*.md")) if "_build" not in p.parts
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if any(re.search(r"\{\{\s*[A-Za-z0-9_]+\s*\}\}", part) for part in line.split("`")[1::2])]
    assert found == [], found
