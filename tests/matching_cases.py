"""The labelled matching set (``tests/fixtures/matching_cases.txt``): a reader shared by the
tests and ``bench/match_eval.py``. The file's header documents its format and sources."""

from __future__ import annotations

import os

CASES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "matching_cases.txt")
ACTIONS = ("bash", "commit", "write", "edit", "read")
NEWLINE = "\u23ce"  # ⏎ in the file stands for a newline


class Case:
    __slots__ = ("action", "term", "text", "fire", "source", "line")

    def __init__(self, action: str, term: str, text: str, fire: bool, source: str, line: int):
        self.action, self.term, self.text, self.fire, self.source, self.line = action, term, text, fire, source, line

    def __repr__(self) -> str:
        return f"Case({self.action} {self.term!r} {'+' if self.fire else '-'} {self.text!r}, line {self.line})"


def load_cases(path: str = CASES_PATH) -> tuple[list[Case], dict[str, str]]:
    """(cases, sources); a line that does not parse raises ValueError naming the file and line."""
    cases: list[Case] = []
    sources: dict[str, str] = {}
    action = term = None
    with open(path, encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line == "#" or line.startswith("# "):
                continue
            if line.startswith("@source "):
                key, _, what = line[len("@source ") :].strip().partition(" ")
                sources[key] = what.strip()
                continue
            if line.startswith("## "):
                action, _, term = line[3:].partition(" ")
                if action not in ACTIONS or not term.strip():
                    raise ValueError(f"{path}:{n}: expected '## ACTION TERM' with ACTION one of {ACTIONS}")
                term = term.strip()
                continue
            if line[:2] in ("+ ", "- ") and line.endswith("»") and "  «" in line:
                if action is None:
                    raise ValueError(f"{path}:{n}: a case before any '## ACTION TERM' line")
                body, _, src = line[2:].rpartition("  «")
                src = src[:-1]
                if src not in sources:
                    raise ValueError(f"{path}:{n}: unknown source {src!r}")
                cases.append(Case(action, term, body.replace(NEWLINE, "\n"), line[0] == "+", src, n))
                continue
            raise ValueError(f"{path}:{n}: cannot read {line!r}")
    return cases, sources
