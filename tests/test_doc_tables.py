"""The README's status table and docs/layout.md describe the code that exists."""
import re
from pathlib import Path

from constrfl import status as st

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def status_rows():
    """``[(status, holds)]`` of the README's "Statuses" table, in order."""
    section = README.split("## Statuses", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|.*\| ([^|]*) \|$", section, re.M)


def test_the_status_table_is_the_code_s():
    """One table (status.py points to it): every status, in the order of STATUSES, and
    'resumable' in the column of what the result holds exactly for RESUMABLE."""
    rows = status_rows()
    assert [s for s, _ in rows] == list(st.STATUSES)
    assert [s for s, holds in rows if "resumable" in holds] == list(st.RESUMABLE)
    assert "README.md" in st.__doc__ and "| " not in st.__doc__


def layout_names():
    """The module paths docs/layout.md names (``constrfl/....py``)."""
    return set(re.findall(r"`(constrfl/[\w/]+\.py)`",
                          (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")))


def test_the_layout_page_names_every_module_that_exists():
    """Each module named exists; each module, but a subpackage's ``__init__`` (its
    modules are named), is named."""
    named = layout_names()
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "constrfl").rglob("*.py")}
    assert named, "docs/layout.md names no module"
    assert sorted(named - modules) == [], "named, not there"
    assert sorted(m for m in modules - named
                  if not (m.endswith("/__init__.py") and m != "constrfl/__init__.py")) == []
