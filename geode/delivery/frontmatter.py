"""A YAML subset for note frontmatter, standard library only, with line numbers.

Why not PyYAML: the hook must import only the standard library, and it re-parses a
crystal whose file changed right before delivering it. One parser serves the hook, the
CLI and the agents, so a note means the same thing everywhere.

What it reads: block mappings nested by indentation, block lists (``- item``), flow lists
(``[a, "b"]``) and flow mappings, single and double quoted strings, plain scalars with
continuation lines, block scalars (``|``, ``>``, with ``-``/``+``), comments, and the
scalars ``true/false/null/~`` and numbers. Dates stay strings (ISO text compares well).

Leniency, each recorded as a warning rather than an error:
- crystal-memory stores write ``match: | tail, |tail, | head``. Strict YAML reads the
  leading ``|`` as a block scalar and rejects the line; those crystals must still fire, so
  text after ``|`` or ``>`` on the same line is read as a plain string.
- Cursor rules write ``globs: **/*.py``; strict YAML reads ``*`` as an alias. It is read as
  text with a warning that tells the author to quote it.

Errors (``FrontmatterError``) carry the 1-based line number inside the file.
"""

from __future__ import annotations

from geode.delivery.errors import GeodeError, StoreError


class FrontmatterError(StoreError, ValueError):
    """The frontmatter cannot be read; ``line`` is 1-based within the file."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class ParsedFrontmatter:
    """``data``; ``lines``: key path ("crystal.match") -> 1-based line of the key;
    ``warnings``: (line, code, message) for constructs read leniently.

    A plain class, not a dataclass: ``dataclasses`` costs the hook ~8 ms of imports."""

    __slots__ = ("data", "lines", "warnings")

    def __init__(self, data: dict):
        self.data = data
        self.lines: dict[str, int] = {}
        self.warnings: list[tuple[int, str, str]] = []


_SCALAR_WORDS = {"true": True, "false": False, "yes": True, "no": False, "null": None, "~": None}


def _convert_plain(text: str):
    low = text.lower()
    if low in _SCALAR_WORDS:
        return _SCALAR_WORDS[low]
    if text == "":
        return None
    try:
        if text.lstrip("+-").isdigit():
            return int(text)
        if any(ch.isdigit() for ch in text) and text.count(".") == 1 and text.replace(".", "").lstrip("+-").isdigit():
            return float(text)
    except ValueError:
        pass
    return text


def _strip_comment(text: str) -> str:
    """Drop a `` #`` comment from a plain scalar (a ``#`` inside a word is text)."""
    idx = text.find(" #")
    if text.startswith("#"):
        return ""
    return text[:idx].rstrip() if idx >= 0 else text.rstrip()


class _Parser:
    def __init__(self, lines: list[str], first_line: int):
        self.lines = lines
        self.first = first_line  # file line number of lines[0]
        self.i = 0
        self.out = ParsedFrontmatter({})

    # -- helpers ---------------------------------------------------------
    def lineno(self, i: int | None = None) -> int:
        return self.first + (self.i if i is None else i)

    def err(self, message: str, i: int | None = None) -> FrontmatterError:
        return FrontmatterError(self.lineno(i), message)

    def warn(self, code: str, message: str, i: int | None = None) -> None:
        self.out.warnings.append((self.lineno(i), code, message))

    def skip_blank(self) -> None:
        while self.i < len(self.lines):
            s = self.lines[self.i].strip()
            if s and not s.startswith("#"):
                return
            self.i += 1

    @staticmethod
    def indent_of(line: str) -> int:
        return len(line) - len(line.lstrip(" "))

    # -- structure -------------------------------------------------------
    def parse(self) -> ParsedFrontmatter:
        for n, line in enumerate(self.lines):
            if line[: len(line) - len(line.lstrip(" \t"))].count("\t"):
                raise self.err("a tab in indentation; YAML indents with spaces only", n)
        self.skip_blank()
        if self.i >= len(self.lines):
            return self.out
        if self.lines[self.i].lstrip().startswith("- "):
            raise self.err("frontmatter must be a mapping of keys, not a list")
        self.out.data = self.block_mapping(self.indent_of(self.lines[self.i]), "")
        self.skip_blank()
        if self.i < len(self.lines):
            raise self.err(f"unexpected indentation: {self.lines[self.i].strip()[:40]!r}")
        return self.out

    def split_key(self, content: str, i: int) -> tuple[str, str]:
        if content[:1] in ("'", '"'):
            q = content[0]
            end = content.find(q, 1)
            if end < 0 or content[end + 1 : end + 2] != ":":
                raise self.err(f"cannot read key in {content[:40]!r}", i)
            return content[1:end], content[end + 2 :].strip()
        # the key ends at the first ": " (or a final ":")
        idx = content.find(": ")
        if idx < 0:
            if content.endswith(":"):
                return content[:-1].strip(), ""
            raise self.err(
                f"expected 'key: value', found {content[:60]!r} (is a value missing its key, "
                "or a continuation line under-indented?)",
                i,
            )
        return content[:idx].strip(), content[idx + 2 :].strip()

    def block_mapping(self, indent: int, prefix: str) -> dict:
        result: dict = {}
        while True:
            self.skip_blank()
            if self.i >= len(self.lines):
                return result
            line = self.lines[self.i]
            ind = self.indent_of(line)
            if ind < indent:
                return result
            if ind > indent:
                raise self.err(f"unexpected indentation: {line.strip()[:40]!r}")
            content = line.strip()
            if content.startswith("- "):
                return result  # a list at this level belongs to the parent key
            key_line = self.i
            key, rest = self.split_key(content, self.i)
            if not key:
                raise self.err("empty key")
            path = f"{prefix}{key}"
            if key in result:
                self.warn("duplicate-key", f"key {key!r} appears twice; the last value wins")
            self.out.lines[path] = self.lineno(key_line)
            self.i += 1
            result[key] = self.value(rest, indent, path, key_line)

    def value(self, rest: str, indent: int, path: str, key_line: int):
        if rest == "" or rest.startswith("#"):
            # nested block, list, or null
            self.skip_blank()
            if self.i >= len(self.lines):
                return None
            nxt = self.lines[self.i]
            nind = self.indent_of(nxt)
            if nxt.strip().startswith("- ") or nxt.strip() == "-":
                if nind >= indent:
                    return self.block_list(nind, path)
                return None
            if nind > indent:
                return self.block_mapping(nind, path + ".")
            return None
        head = rest[0]
        if head in "|>":
            indicator = rest.split(" #", 1)[0].strip()
            if all(ch in "|>-+0123456789" for ch in indicator) and len(indicator) <= 3:
                return self.block_scalar(indicator, indent)
            # crystal-memory: `match: | tail, |tail` -- text, not a block scalar
            self.warn(
                "lenient-block-indicator",
                f"value of {path!r} starts with {head!r}, which strict YAML reads as a block scalar; "
                "read as text (quote it to be portable)",
                key_line,
            )
            return self.plain(rest, indent, path, key_line)
        if head in "'\"":
            return self.quoted(rest, indent, key_line)
        if head == "[":
            return self.flow(rest, indent, key_line, "[", "]")
        if head == "{":
            return self.flow(rest, indent, key_line, "{", "}")
        if head in "*&!":
            self.warn(
                "unquoted-special",
                f"value of {path!r} starts with {head!r}, which YAML reads as an "
                f"{'alias' if head == '*' else 'anchor' if head == '&' else 'tag'}; read as text. "
                f'Quote it: {path.rsplit(".", 1)[-1]}: "{rest}"',
                key_line,
            )
            return self.plain(rest, indent, path, key_line, convert=False)
        if head in "@`":
            self.warn("reserved-indicator", f"value of {path!r} starts with reserved {head!r}; read as text", key_line)
        return self.plain(rest, indent, path, key_line)

    def plain(self, rest: str, indent: int, path: str, key_line: int, convert: bool = True):
        parts = [_strip_comment(rest)]
        # continuation lines: more indented than the key, not starting a new key/list
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if not line.strip():
                # a blank line inside a plain scalar folds to a newline; stop if the next is not deeper
                j = self.i + 1
                while j < len(self.lines) and not self.lines[j].strip():
                    j += 1
                if j < len(self.lines) and self.indent_of(self.lines[j]) > indent:
                    parts.append("\n")
                    self.i = j
                    continue
                break
            if self.indent_of(line) <= indent:
                break
            parts.append(_strip_comment(line.strip()))
            self.i += 1
        text = ""
        for p in parts:
            if p == "\n":
                text = text + "\n"
            elif text and not text.endswith("\n"):
                text += " " + p
            else:
                text += p
        if len(parts) == 1 and convert:
            return _convert_plain(text)
        return text

    def block_list(self, indent: int, path: str) -> list:
        items: list = []
        while True:
            self.skip_blank()
            if self.i >= len(self.lines):
                return items
            line = self.lines[self.i]
            ind = self.indent_of(line)
            content = line.strip()
            if ind != indent or not (content.startswith("- ") or content == "-"):
                if ind > indent:
                    raise self.err(f"unexpected indentation in list: {content[:40]!r}")
                return items
            item_line = self.i
            rest = content[2:].strip() if content != "-" else ""
            item_path = f"{path}[{len(items)}]"
            # `- key: value` starts a mapping item whose keys align after the dash
            if rest and not rest.startswith(("'", '"', "[", "{")) and (": " in rest or rest.endswith(":")):
                sub_indent = ind + 2
                self.lines[self.i] = " " * sub_indent + rest
                items.append(self.block_mapping(sub_indent, item_path + "."))
                continue
            self.i += 1
            items.append(self.value(rest, indent, item_path, item_line))

    def block_scalar(self, indicator: str, indent: int) -> str:
        folded = ">" in indicator
        chomp = "-" if "-" in indicator else "+" if "+" in indicator else ""
        body: list[str] = []
        block_indent = None
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.strip():
                ind = self.indent_of(line)
                if ind <= indent:
                    break
                if block_indent is None:
                    block_indent = ind
                if ind < block_indent:
                    break
                body.append(line[block_indent:])
            else:
                body.append("")
            self.i += 1
        while body and body[-1] == "" and chomp != "+":
            body.pop()
        if folded:
            text = ""
            for ln in body:
                if ln == "":
                    text += "\n"
                elif text and not text.endswith("\n"):
                    text += " " + ln
                else:
                    text += ln
        else:
            text = "\n".join(body)
        return text if chomp == "-" else text + "\n"

    def quoted(self, rest: str, indent: int, key_line: int):
        q = rest[0]
        buf = rest
        start = self.i
        # a quoted scalar may continue on following lines
        while True:
            val, end = self._scan_quoted(buf, q)
            if end >= 0:
                tail = buf[end:].strip()
                if tail and not tail.startswith("#"):
                    raise self.err(f"text after the closing quote: {tail[:40]!r}", key_line)
                return val
            if self.i >= len(self.lines) or (
                self.lines[self.i].strip() and self.indent_of(self.lines[self.i]) <= indent
            ):
                raise self.err(f"unclosed {q} quote", key_line)
            buf += " " + self.lines[self.i].strip()
            self.i += 1
            if self.i - start > 200:
                raise self.err(f"unclosed {q} quote", key_line)

    @staticmethod
    def _scan_quoted(buf: str, q: str) -> tuple[str, int]:
        out = []
        j = 1
        while j < len(buf):
            ch = buf[j]
            if q == "'" and ch == "'":
                if buf[j + 1 : j + 2] == "'":
                    out.append("'")
                    j += 2
                    continue
                return "".join(out), j + 1
            if q == '"' and ch == "\\" and j + 1 < len(buf):
                nxt = buf[j + 1]
                out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "0": "\0"}.get(nxt, "\\" + nxt))
                j += 2
                continue
            if q == '"' and ch == '"':
                return "".join(out), j + 1
            out.append(ch)
            j += 1
        return "".join(out), -1

    def flow(self, rest: str, indent: int, key_line: int, open_: str, close: str):
        buf = rest
        while True:
            try:
                val, end = self._flow_value(buf, 0)
            except _Incomplete:
                if self.i >= len(self.lines) or (
                    self.lines[self.i].strip() and self.indent_of(self.lines[self.i]) <= indent
                ):
                    raise self.err(f"unclosed {open_!r}: expected {close!r}", key_line) from None
                buf += " " + self.lines[self.i].strip()
                self.i += 1
                continue
            except ValueError as exc:
                raise self.err(str(exc), key_line) from exc
            tail = buf[end:].strip()
            if tail and not tail.startswith("#"):
                raise self.err(f"text after {close!r}: {tail[:40]!r}", key_line)
            return val

    def _flow_value(self, s: str, j: int):
        while j < len(s) and s[j] == " ":
            j += 1
        if j >= len(s):
            raise _Incomplete()
        ch = s[j]
        if ch == "[":
            items: list = []
            j += 1
            while True:
                while j < len(s) and s[j] == " ":
                    j += 1
                if j >= len(s):
                    raise _Incomplete()
                if s[j] == "]":
                    return items, j + 1
                val, j = self._flow_value(s, j)
                items.append(val)
                while j < len(s) and s[j] == " ":
                    j += 1
                if j >= len(s):
                    raise _Incomplete()
                if s[j] == ",":
                    j += 1
                elif s[j] != "]":
                    raise ValueError(f"expected ',' or ']' in flow list near {s[j : j + 20]!r}")
        if ch == "{":
            result: dict = {}
            j += 1
            while True:
                while j < len(s) and s[j] == " ":
                    j += 1
                if j >= len(s):
                    raise _Incomplete()
                if s[j] == "}":
                    return result, j + 1
                k_end = s.find(":", j)
                if k_end < 0:
                    raise _Incomplete()
                key = s[j:k_end].strip().strip("'\"")
                val, j = self._flow_value(s, k_end + 1)
                result[key] = val
                while j < len(s) and s[j] == " ":
                    j += 1
                if j >= len(s):
                    raise _Incomplete()
                if s[j] == ",":
                    j += 1
                elif s[j] != "}":
                    raise ValueError(f"expected ',' or '}}' in flow mapping near {s[j : j + 20]!r}")
        if ch in "'\"":
            val, end = self._scan_quoted(s[j:], ch)
            if end < 0:
                raise _Incomplete()
            return val, j + end
        k = j
        while k < len(s) and s[k] not in ",]}":
            k += 1
        return _convert_plain(s[j:k].strip()), k


class _Incomplete(GeodeError):
    """Internal: a flow value continues on the next line (never leaves this module)."""


def parse_frontmatter(text: str, first_line: int = 2) -> ParsedFrontmatter:
    """Parse frontmatter text (without the ``---`` fences); ``first_line`` is its file line."""
    return _Parser(text.split("\n"), first_line).parse()
