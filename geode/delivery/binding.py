"""A crystal's binding: which channel, which actions, which match terms, which agents.

Normalising and judging the binding live together, so that the hook, ``geode lint`` and the
Librarian can never disagree about whether a crystal fires. The original product's doctor
(docs/DESIGN.md, "Lessons from the original product") said "all is well" over typos in ``on:``/``who:``, a quoted ``match:`` value and a list-valued
``match:``; here each of those is either handled or reported, with the line.
"""

from __future__ import annotations

CHANNELS = ("act", "boot", "inject", "rag")
ACTIONS = ("bash", "write", "edit", "read", "commit")
WHO_CLASSES = ("all", "main", "subagent")
#: ``control:`` values: ``never`` (the control arm never withholds this crystal) or ``default``
#: (the arm may, as for every crystal without the key)
CONTROL_VALUES = ("never", "default")
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"


class BindingIssue:
    """One thing wrong with a binding. Plain classes here: this module is on the hook's path."""

    __slots__ = ("line", "code", "severity", "message")

    def __init__(self, line: int, code: str, severity: str, message: str):
        self.line, self.code, self.severity, self.message = line, code, severity, message

    def __repr__(self) -> str:
        return f"BindingIssue({self.line}, {self.code!r}, {self.severity!r}, {self.message!r})"


class Binding:
    """``terms`` are stripped, unquoted, non-empty and as written (matching folds the case of words, not of options)."""

    __slots__ = ("deliver", "on", "terms", "who", "issues", "exempt")

    def __init__(
        self,
        deliver: tuple[str, ...],
        on: tuple[str, ...],
        terms: tuple[str, ...],
        who: tuple[str, ...],
        issues: tuple[BindingIssue, ...] = (),
        exempt: bool = False,
    ) -> None:
        self.deliver = deliver
        self.on = on
        self.terms = terms
        self.who = who
        self.issues = issues
        self.exempt = exempt  # ``control: never``: the control arm never withholds it

    @property
    def can_fire(self) -> bool:
        """Whether any channel can ever deliver it (the act channel needs actions and terms)."""
        if any(ch in ("boot", "inject") for ch in self.deliver):
            return True
        return "act" in self.deliver and bool(self.on) and bool(self.terms)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the did-you-mean of binding issues and of lint's `who` check."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _suggest(value: str, choices: tuple[str, ...]) -> str:
    best = min(choices, key=lambda c: edit_distance(value, c))
    return f" (did you mean {best!r}?)" if edit_distance(value, best) <= 2 else ""


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _split_words(value) -> list[str]:
    """``on: bash, write`` and ``on: [bash, write]`` mean the same."""
    out: list[str] = []
    for item in _as_list(value):
        for part in str(item).split(","):
            part = part.strip().strip(_QUOTES).strip()
            if part:
                out.append(part)
    return out


def split_terms(value, line: int = 0) -> tuple[list[str], list[BindingIssue]]:
    """Match terms from a string (comma-separated) or a list, quotes handled and reported."""
    issues: list[BindingIssue] = []
    raw_items = _as_list(value)
    if isinstance(value, (list, tuple)):
        issues.append(
            BindingIssue(
                line,
                "match-list",
                "info",
                "match is a YAML list; each item is a term (commas inside an item split it too)",
            )
        )
    terms: list[str] = []
    whole = str(value).strip() if isinstance(value, str) else ""
    if whole and len(whole) >= 2 and whole[0] in _QUOTES and whole[-1] == whole[0] and whole.count(whole[0]) == 2:
        issues.append(
            BindingIssue(
                line,
                "match-quoted",
                "warning",
                "the whole match value is wrapped in quotes inside the YAML string; the quotes were removed",
            )
        )
        raw_items = [whole[1:-1]]
    for item in raw_items:
        if item is None:
            continue
        for part in str(item).split(","):
            stripped = part.strip()
            if not stripped:
                issues.append(
                    BindingIssue(
                        line,
                        "match-empty-term",
                        "warning",
                        "an empty match term (two commas in a row or a trailing comma) is ignored",
                    )
                )
                continue
            unq = stripped
            if len(unq) >= 2 and unq[0] in _QUOTES and unq[-1] in _QUOTES:
                unq = unq[1:-1]
                issues.append(
                    BindingIssue(
                        line,
                        "match-quoted-term",
                        "warning",
                        f"term {stripped} is quoted; the quotes were removed (write it bare)",
                    )
                )
            elif unq[0] in _QUOTES or unq[-1] in _QUOTES:
                issues.append(
                    BindingIssue(
                        line,
                        "match-stray-quote",
                        "warning",
                        f"term {stripped!r} has a quote at one end only; it is matched literally",
                    )
                )
            if not unq.strip():
                issues.append(
                    BindingIssue(line, "match-empty-term", "warning", "a match term is empty after removing its quotes")
                )
                continue
            if len(unq.strip()) == 1:
                issues.append(
                    BindingIssue(
                        line,
                        "match-too-broad",
                        "warning",
                        f"term {unq.strip()!r} is one character; it fires on almost every action",
                    )
                )
            terms.append(unq.strip())  # as written: an option's case is part of it (-D is not -d)
    # first occurrence of each, in order; words fold (``Docker build`` is ``docker build``),
    # options do not (``git branch -D`` and ``git branch -d`` are two terms)
    folded: dict[str, str] = {}
    for t in terms:
        folded.setdefault(" ".join(w if w.startswith("-") else w.lower() for w in t.split()), t)
    unique = list(folded.values())
    return unique, issues


def control_exempt(crystal: object) -> bool:
    """Whether a ``crystal:`` mapping says ``control: never``. Read on its own (not through
    ``parse_binding``) because the engine asks it of a file it re-read without re-judging the
    binding; a value other than ``never`` is not an exemption (lint reports a misspelt one)."""
    if not isinstance(crystal, dict):
        return False
    return str(crystal.get("control") or "").strip().strip(_QUOTES).strip().lower() == "never"


def parse_binding(crystal: dict, lines: dict[str, int], known_agents: tuple[str, ...] = ()) -> Binding:
    """Normalise a ``crystal:`` mapping; every value that cannot work is an issue with its line."""
    issues: list[BindingIssue] = []
    base = lines.get("crystal", 1)

    def ln(key: str) -> int:
        return lines.get(f"crystal.{key}", base)

    known = {"deliver", "on", "match", "who", "when", "priority", "control"}
    for key in crystal:
        if key not in known:
            issues.append(
                BindingIssue(
                    ln(key),
                    "binding-unknown-key",
                    "error",
                    f"unknown binding key {key!r}{_suggest(str(key), tuple(sorted(known)))}; it is ignored",
                )
            )

    deliver: list[str] = []
    raw_deliver = _split_words(crystal.get("deliver", "act"))
    for v in raw_deliver:
        low = v.lower()
        if low in CHANNELS:
            deliver.append(low)
        else:
            issues.append(
                BindingIssue(
                    ln("deliver"),
                    "unknown-deliver",
                    "error",
                    f"unknown deliver value {v!r}{_suggest(low, CHANNELS)}; expected one of {', '.join(CHANNELS)}",
                )
            )
    if "deliver" not in crystal:
        issues.append(BindingIssue(base, "deliver-default", "info", "no deliver value; the act channel is assumed"))

    on: list[str] = []
    for v in _split_words(crystal.get("on")):
        low = v.lower()
        if low in ACTIONS:
            on.append(low)
        else:
            issues.append(
                BindingIssue(
                    ln("on"),
                    "unknown-on",
                    "error",
                    f"unknown action {v!r}{_suggest(low, ACTIONS)}; expected one of {', '.join(ACTIONS)}",
                )
            )
    if "act" in deliver and "on" not in crystal:
        issues.append(
            BindingIssue(
                base,
                "no-on",
                "error",
                "an act binding without 'on:' never fires; name the action (bash, write, edit, read, commit)",
            )
        )

    terms, term_issues = split_terms(crystal.get("match"), ln("match"))
    issues.extend(term_issues)
    if "act" in deliver and not terms:
        issues.append(
            BindingIssue(
                ln("match") if "match" in crystal else base,
                "no-match",
                "error",
                "an act binding without match terms never fires",
            )
        )

    who: list[str] = []
    for v in _split_words(crystal.get("who", "all")):
        low = v.lower()
        if low in WHO_CLASSES or v in known_agents:
            who.append(low if low in WHO_CLASSES else v)
            continue
        hint = _suggest(low, WHO_CLASSES)
        if hint:
            issues.append(
                BindingIssue(
                    ln("who"), "unknown-who", "error", f"unknown who value {v!r}{hint}; it would never match an agent"
                )
            )
        else:
            who.append(v)
            if known_agents:
                issues.append(
                    BindingIssue(
                        ln("who"),
                        "unknown-who",
                        "warning",
                        f"who value {v!r} is not a known agent type ({', '.join(known_agents)})",
                    )
                )
    if not who and "who" in crystal:
        issues.append(BindingIssue(ln("who"), "no-who", "error", "no valid who value; the crystal reaches no agent"))

    if "control" in crystal:
        raw = str(crystal.get("control") or "").strip().strip(_QUOTES).strip().lower()
        if raw not in CONTROL_VALUES:
            issues.append(
                BindingIssue(
                    ln("control"),
                    "unknown-control",
                    "error",
                    f"unknown control value {crystal.get('control')!r}{_suggest(raw, CONTROL_VALUES)}; expected "
                    "'never' (never withheld by the control arm) or 'default'; the crystal can be withheld",
                )
            )

    if "when" in crystal and "act" in deliver:
        issues.append(BindingIssue(ln("when"), "when-ignored", "info", "'when' has no effect on the act channel"))

    return Binding(
        tuple(dict.fromkeys(deliver)),
        tuple(dict.fromkeys(on)),
        tuple(terms),
        tuple(who),
        tuple(issues),
        exempt=control_exempt(crystal),
    )


def who_matches(who: tuple[str, ...], agent: str) -> bool:
    """``agent`` is ``main``, ``subagent`` or ``subagent:<type>`` / ``main:<type>``."""
    if not who:
        return False  # every who value was invalid (lint says so): reaching everyone would hide the typo
    if "all" in who:
        return True
    cls, _, kind = agent.partition(":")
    if cls in who:
        return True
    return bool(kind) and kind in who
