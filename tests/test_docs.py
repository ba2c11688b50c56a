"""Every citation in the code and the README resolves in docs/algorithms.md: equation
numbers "(N)", the paper's named results ("Definition 1", "Appendix E.2", ...), seed
papers ("002") and sections "algorithms.md §N"."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "algorithms.md").read_text()
SOURCES = sorted([*ROOT.glob("constrfl/**/*.py"), *ROOT.glob("validation/*.py"),
                  *ROOT.glob("tests/*.py"), ROOT / "README.md"])
SECTIONS = {int(n) for n in re.findall(r"^## (\d+)\. ", DOC, re.M)}


def citations(pattern):
    """``{citation: [files]}`` for the regex ``pattern`` (group 1 is the citation)."""
    found = {}
    for path in SOURCES:
        if path.name == "test_docs.py":
            continue
        for m in re.finditer(pattern, path.read_text()):
            found.setdefault(m.group(1), []).append(str(path.relative_to(ROOT)))
    return found


def test_sections_are_numbered_in_order():
    assert sorted(SECTIONS) == list(range(1, len(SECTIONS) + 1))
    assert "Status of this page" in DOC


def test_equation_numbers_resolve():
    cited = citations(r"(?<![\w)\]])\((\d{1,3})\)")
    assert {"5", "10", "23", "30"} <= set(cited)          # the scan finds the citations
    missing = {n: files for n, files in cited.items()
               if (f"`{n}`" if n.startswith("0") else f"({n})") not in DOC}
    assert not missing, f"cited but not in docs/algorithms.md: {missing}"


def test_named_results_resolve():
    cited = citations(r"\b((?:Definition|Theorem|Remark|Algorithm|Lemma|Table) \d+"
                      r"|Appendix [A-Z](?:\.\d+)?)")
    assert "Definition 1" in cited
    missing = {k: v for k, v in cited.items() if k not in DOC}
    assert not missing, f"cited but not in docs/algorithms.md: {missing}"


def test_section_references_resolve():
    cited = citations(r"algorithms\.md ((?:§\d+(?:[–-]\d+)?(?:, )?)+)")
    numbers = {int(n) for refs in cited for n in re.findall(r"\d+", refs)}
    assert cited and numbers <= SECTIONS, f"sections {sorted(numbers - SECTIONS)} missing"


def test_the_maths_page_is_cited_by_its_path():
    """The page is docs/algorithms.md; no file cites an ALGORITHMS.md that is not there."""
    assert not citations(r"(ALGORITHMS\.md)")
