"""docs/ARCHITECTURE.md against the code: its room table names every folder under ``geode/``
and no other, and each room's stated module count is the number of ``.py`` files in that folder
and the folders below it, ``__init__.py`` excluded (the rule the document states).

A document that drifts from the code sends a newcomer to the wrong door; this makes the drift a
failure that names the room and both numbers.
"""

from __future__ import annotations

import re

from tests.helpers import REPO

DOC = REPO / "docs" / "ARCHITECTURE.md"
GEODE = REPO / "geode"
ROW = re.compile(r"^\|\s*`geode/(?P<room>[a-z_]+)/`\s*\|\s*(?P<count>[^|]*?)\s*\|")


def _table() -> dict[str, str]:
    """Room -> the count cell as written, from the table whose header has a ``modules`` column."""
    rows: dict[str, str] = {}
    in_table = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells[:2] == ["room", "modules"]:
            in_table = True
            continue
        if in_table and not cells:
            break
        m = ROW.match(line) if in_table else None
        if m:
            assert m["room"] not in rows, f"ARCHITECTURE.md lists the room {m['room']} twice"
            rows[m["room"]] = m["count"]
    return rows


def _rooms() -> dict[str, int]:
    """Each folder directly under geode/ -> its modules, counted as the document says."""
    return {
        d.name: sum(1 for p in d.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts)
        for d in sorted(GEODE.iterdir())
        if d.is_dir() and d.name != "__pycache__"
    }


def test_the_table_is_found_and_the_code_has_rooms():
    table, rooms = _table(), _rooms()
    # both sides empty would make every check below pass over nothing
    assert len(table) >= 10, f"no room table with a `modules` column found in {DOC}"
    assert {"kernel", "delivery", "recall"} <= set(rooms), sorted(rooms)


def test_every_room_is_in_the_table_and_every_row_is_a_room():
    table, rooms = _table(), _rooms()
    problems = [
        f"geode/{r}/ is a room the table of ARCHITECTURE.md does not list" for r in sorted(set(rooms) - set(table))
    ]
    problems += [
        f"ARCHITECTURE.md lists the room {r}, which has no folder geode/{r}/" for r in sorted(set(table) - set(rooms))
    ]
    assert not problems, "\n".join(problems)


def test_each_stated_module_count_is_the_count_in_the_code():
    table, rooms = _table(), _rooms()
    problems = []
    for room, cell in table.items():
        if room not in rooms:
            continue  # reported by the test above
        if not cell.isdigit():
            problems.append(f"ARCHITECTURE.md gives {room} the module count {cell!r}, not a number")
        elif int(cell) != rooms[room]:
            problems.append(f"ARCHITECTURE.md says {room} has {cell} modules, the code has {rooms[room]}")
    assert not problems, "\n".join(problems)


#: What a comment, docstring or doc must not send a reader to: places that exist only on the
#: machines geode was first written on (the team's shared folder, its reliability sheet, a
#: machine path), never in a clone.
OUTSIDE = ("../shared", "RELIABILITY row", "FIELD-NOTES", "HOOKS.md", "/work/")
#: the reliability sheet of the shared folder, as opposed to the repository's own docs/RELIABILITY.md
OUTSIDE_SHEET = re.compile(r"(?<!docs/)\bRELIABILITY\.md")


def test_nothing_in_the_repository_cites_a_document_outside_it():
    root = REPO
    files = [*(root / "geode").rglob("*.py"), *(root / "docs").glob("*.md"), root / "README.md"]
    files += [*(root / "bench").glob("*.md"), *(root / "bench").glob("*.py")]
    assert len(files) >= 150, f"examined only {len(files)} files"
    hits = [
        f"{p.relative_to(root)}:{n}: {line.strip()[:100]}"
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if any(o in line for o in OUTSIDE) or OUTSIDE_SHEET.search(line)
    ]
    assert not hits, "\n".join(hits)


def test_the_reliability_doc_names_tests_that_exist():
    """docs/RELIABILITY.md says which test shows each promise: every file and test it names is real."""
    text = (REPO / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")
    files = sorted(set(re.findall(r"tests/(test_\w+\.py)", text)))
    assert len(files) >= 12, f"names only {len(files)} test files"
    missing = [f for f in files if not (REPO / "tests" / f).is_file()]
    assert not missing, missing
    named = re.findall(r"tests/(test_\w+\.py)::(test_\w+)", text)
    assert len(named) >= 20, f"names only {len(named)} tests"
    gone = [f"{f}::{t}" for f, t in named if f"def {t}(" not in (REPO / "tests" / f).read_text(encoding="utf-8")]
    assert not gone, gone
