"""Whether geode can read a construct in this store at all: when most uses of one construct do
not resolve (most ``((uuid))`` block references, most links of one form such as ``(g)`` or
``/section/page/``, most anchors of one shape), the reading is implausible: the store's tool
reads that construct some way geode does not know, and each use reported as broken would be a
false finding. Then the Librarian says once that it cannot read the construct here (the
construct, the count, a sample), files nothing that rests on it, and ``geode doctor`` fails.

A relative link to a file with an extension (``[x](guide.md)``) is never judged: CommonMark
defines it and the file system answers it, so when most of them fail the files truly are gone.
Judged by construct, never by the store's total: a store can truly have hundreds of broken
links of a form geode reads well (most of that form still resolve), and those stay findings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from geode.links.refs import Ref

#: at least this many distinct targets of a construct before its reading is judged (a few
#: broken links of a rare form are findings, not a misreading)
MIN_TARGETS = 10
#: more than this share of a construct's distinct targets unresolved: a misreading
SHARE = 0.5
_FAILED = {"broken", "missing-file", "broken-block", "broken-anchor", "undefined-reference"}
_ASCII_SLUG = re.compile(r"^[a-z0-9_-]+$")


@dataclass
class Unreadable:
    construct: str
    uses: int
    unresolved: int
    targets: int  # distinct targets written in the construct
    targets_unresolved: int
    sample: str  # "path:line target"

    @property
    def message(self) -> str:
        return (
            f"cannot read {self.construct} in this store: {self.unresolved} of {self.uses} uses "
            f"({self.targets_unresolved} of {self.targets} distinct targets) do not resolve "
            f"(e.g. {self.sample}); none of them is reported or rewritten"
        )


def construct(ref: Ref) -> str:
    """The construct a reference is written in: its syntax and the shape of its target."""
    if ref.syntax in ("blockref", "shortcode", "snippet", "refuse"):
        return {
            "blockref": "((uuid)) block references",
            "shortcode": "{{< ref >}} shortcodes",
            "snippet": "--8<-- snippet includes",
            "refuse": "[text][label] references",
        }[ref.syntax]
    if ref.syntax in ("wiki", "relation"):
        return "[[wikilinks]]"
    if ref.syntax in ("path", "mention"):
        return "paths named in prose" if ref.syntax == "path" else "paths in code spans"
    t = ref.target
    last = t.rstrip("/").rsplit("/", 1)[-1]
    if not t:
        return "(#anchor) links"
    if t.startswith("/"):
        return "links of the form (/section/page/)" if t.endswith("/") else "links of the form (/site/path)"
    if "." in last:
        return f"links to .{last.rsplit('.', 1)[1].lower()} files"
    if "/" not in t:
        return "links of the form (word)"
    return "links of the form (folder/page)"


def anchor_construct(ref: Ref) -> str:
    a = ref.anchor.strip().lower()
    shape = "plain" if _ASCII_SLUG.match(a) else "punctuated or non-ASCII"
    return f"#anchors ({shape}) of {construct(ref)}"


def construct_of(ref: Ref, status: str) -> str:
    """The construct ``audit`` counts this use under."""
    if status == "broken-anchor" or (ref.anchor and status == "ok"):
        return anchor_construct(ref)
    return construct(ref)


def audit(uses: Iterable[tuple[str, Ref, str, bool]]) -> dict[str, Unreadable]:
    """``uses``: (note path, ref, resolution status, whether a moved note explains it) of every
    reference in one store. Returns the constructs whose reading is implausible, by name.

    Judged over distinct targets, not uses: a hundred links to the one note that was deleted
    are one missing note, read well; a misreading spreads over many targets. A broken use
    that a move explains (the one good target is known) is read well too."""
    tally: dict[str, dict] = {}
    for path, ref, status, explained in uses:
        if status in ("skipped", "unchecked", "forward"):
            continue
        name = construct_of(ref, status)
        counts = [(name, status in _FAILED and not explained)]
        if name.startswith("#"):
            counts.append((construct(ref), False))  # the target itself resolved: its form reads well
        for cname, failed in counts:
            key = (ref.target + "#" + ref.anchor) if cname.startswith("#") else ref.target
            t = tally.setdefault(cname, {"uses": 0, "bad": 0, "targets": {}, "sample": ""})
            t["uses"] += 1
            t["targets"][key] = t["targets"].get(key, True) and failed
            if failed:
                t["bad"] += 1
                t["sample"] = t["sample"] or f"{path}:{ref.line} {ref.raw or ref.target}" + (
                    f"#{ref.anchor}" if cname.startswith("#") else ""
                )
    out = {}
    for name, t in tally.items():
        if name.startswith("links to ."):
            continue  # a relative file path: CommonMark defines it, the file system answers it

        n, bad = len(t["targets"]), sum(1 for v in t["targets"].values() if v)
        if n >= MIN_TARGETS and bad > SHARE * n:
            out[name] = Unreadable(name, t["uses"], t["bad"], n, bad, t["sample"])
    return out
