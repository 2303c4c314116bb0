"""Where one key's value lies in a note's frontmatter text, and how it was written: the key's
own line split at its colon, the lines that belong to its value (block scalars, block lists,
continuation lines), the comment after it, and its form (plain, quoted, flow, block, ...).

Apart from ``geode.kernel.frontmatter_edit`` (the editor and its proof) because this reads
lines of text and nothing else: no parsing of values, no writing.
"""

from __future__ import annotations


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def key_split(line: str) -> tuple[str, str]:
    """``(indentation + key + ':', the rest of the line)`` of a ``key: value`` line."""
    ind = indent_of(line)
    content = line[ind:]
    if content[:1] in ("'", '"'):
        end = _quoted_end(content)  # escapes and '' inside the key, spaces before its colon
        colon = content.find(":", end) if end > 0 else content.find(content[0], 1) + 1
    else:
        idx = content.find(": ")
        colon = idx if idx >= 0 else len(content.rstrip()) - 1
    return line[: ind + colon + 1], line[ind + colon + 1 :]


def extent(lines: list[str], k: int) -> int:
    """Index after the last line that belongs to the value of the key on line ``k``: deeper
    lines, and ``- `` items at the key's own indentation under a key with no inline value.
    Blank and comment lines count only between lines that belong."""
    ind = indent_of(lines[k])
    rest = key_split(lines[k])[1].strip()
    items_here = rest == "" or rest.startswith("#")
    end = k + 1
    j = k + 1
    while j < len(lines):
        s = lines[j].strip()
        if not s or s.startswith("#"):
            j += 1
            continue
        li = indent_of(lines[j])
        if li > ind or (items_here and li == ind and (s.startswith("- ") or s == "-")):
            end = j = j + 1
            continue
        break
    return end


def _quoted_end(s: str) -> int:
    q = s[0]
    j = 1
    while j < len(s):
        if q == "'" and s[j] == "'":
            if s[j + 1 : j + 2] == "'":
                j += 2
                continue
            return j + 1
        if q == '"' and s[j] == "\\":
            j += 2
            continue
        if q == '"' and s[j] == '"':
            return j + 1
        j += 1
    return -1


def _flow_end(s: str) -> int:
    depth = 0
    j = 0
    while j < len(s):
        ch = s[j]
        if ch in "'\"":
            e = _quoted_end(s[j:])
            if e < 0:
                return -1
            j += e
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def trailing_comment(rest: str) -> str:
    """The comment after a value on the key's line, with the spaces before it ('' when none)."""
    s = rest.lstrip(" ")
    if not s:
        return ""
    if s.startswith("#"):
        return rest  # no inline value: the line ends in a comment
    if s[0] in "'\"":
        end = _quoted_end(s)
    elif s[0] in "[{":
        end = _flow_end(s)
    else:
        indicator = s.split(" #", 1)[0].strip()
        if s[0] in "|>" and len(indicator) <= 3 and all(ch in "|>-+0123456789" for ch in indicator):
            end = len(indicator)
        else:
            idx = s.find(" #")
            end = len(s[:idx].rstrip()) if idx >= 0 else -1
    if end < 0:
        return ""
    tail = s[end:]
    return tail if tail.lstrip(" ").startswith("#") else ""


class Form:
    """How the old value was written: ``kind`` plain | lenient | single | double | flow | flowmap |
    block-scalar | block-list | block-map | empty | none; ``indent`` of block items or keys."""

    __slots__ = ("kind", "indent")

    def __init__(self, kind: str = "none", indent: int = 0):
        self.kind = kind
        self.indent = indent


def form_of(lines: list[str], k: int, end: int, lenient: bool) -> Form:
    s = key_split(lines[k])[1].strip()
    if s == "" or s.startswith("#"):
        for j in range(k + 1, end):
            t = lines[j].strip()
            if not t or t.startswith("#"):
                continue
            return Form("block-list" if t.startswith("- ") or t == "-" else "block-map", indent_of(lines[j]))
        return Form("empty")
    if lenient:
        return Form("lenient")
    return Form(
        {"'": "single", '"': "double", "[": "flow", "{": "flowmap", "|": "block-scalar", ">": "block-scalar"}.get(
            s[0], "plain"
        )
    )
