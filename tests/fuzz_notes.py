"""A seeded generator of strange stores for ``tests/test_fuzz_store.py``: note files and names
of every kind a person's folder can hold, each with what geode must say of it.

Our own generator rather than Hypothesis: ten thousand files are written once and read by real
commands, which Hypothesis's per-example shrinking cannot drive; a seed reproduces a store.

Each file is a ``Made``: its path as bytes (names need not be UTF-8), its bytes, and
``must_be_named``: True when geode cannot read it as a note (a NUL, bytes that are not UTF-8, a
name that is not UTF-8, frontmatter over the cap, an alias bomb, a file over the size limit,
frontmatter never closed), so lint must name it as an error; False when it must load; None when
either is right (YAML soup, deep nesting). ``lone_cr``: a CR that ends no line, so no edit may
be proposed on it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

ESSENCE = "<!-- crystal:essence -->\n{}\n<!-- /crystal:essence -->\n"
WORDS = (
    "build deploy cache index migrate schema retry backoff queue worker lock socket token "
    "release branch rebase pipeline flaky timeout budget ledger vector shard replica"
).split()


@dataclass
class Made:
    path: bytes  # relative to the store, "/"-separated
    data: bytes
    kind: str
    must_be_named: bool | None
    lone_cr: bool = False

    @property
    def shown(self) -> str:
        """The path as geode names it (bytes that are not UTF-8 as ``\\xNN``)."""
        return self.path.decode("utf-8", "backslashreplace")


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def good_text(rng: random.Random, i: int, crystal: bool = False) -> str:
    fm = [f"title: note {i} {_words(rng, 2)}", f"type: {rng.choice(['fact', 'decision', 'howto'])}"]
    if rng.random() < 0.5:
        fm.append(f"last_verified: {rng.choice(['2020-01-01', '2025-06-01', '2026-11-30'])}")
    if rng.random() < 0.2:
        fm.append(f"tags: [{_words(rng, 1)}, {_words(rng, 1)}]")
    if crystal:
        fm += ["crystal:", "  deliver: act", "  on: bash", f'  match: "{rng.choice(WORDS)}-{i}"']
    body = f"# note {i}\n\n{_words(rng, rng.randint(5, 40))}\n"
    if crystal:
        body = ESSENCE.format(f"essence {i}: {_words(rng, 8)}") + body
    if rng.random() < 0.3:
        body += f"\nSee [[note-{rng.randint(0, 50)}]] and [other](missing-{i}.md).\n"
    body += "\n## Where this came from\nthe fuzz generator.\n"
    return "---\n" + "\n".join(fm) + "\n---\n" + body


def bomb_text(levels: int) -> str:
    lines = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    prev = "a"
    for c in "bcdefghij"[: levels - 1]:
        lines.append(f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = c
    return "---\n" + "\n".join(lines) + "\n---\n# bomb\n"


YAML_SOUP = [
    "key: [unclosed",
    "key: {a: 1",
    "\tkey: tab",
    ": :",
    "- - -",
    "key: 'unterminated",
    'key: "bad \\q escape"',
    "key: |\n  block\n bad indent",
    "? complex\n: key",
    "key: !!python/object:os.system ls",
    "key: !tag value",
    "a: 1\na: 2",
    "  indented: first",
    "key: @reserved",
    "key: `tick",
    "key: value # comment: with: colons",
    "on: yes\noff: no\ny: n",
    "k: &anchor v\nj: *anchor",
    "k: *undefined",
    "%YAML 1.2",
    "key: \x85 next line",
    "key: \u2028 line sep",
    "[1, 2, 3]",
    "just text",
    "<<: {a: 1}\nb: 2",
]


def _made(rng: random.Random, i: int) -> Made:
    kind = rng.choices(
        [
            "good",
            "crystal",
            "empty",
            "random",
            "nul_late",
            "nul_early",
            "latin1",
            "bad_name",
            "lf_cr",
            "cr_only",
            "crlf_mixed",
            "soup",
            "unclosed",
            "huge_fm",
            "bomb",
            "loop_alias",
            "deep_flow",
            "deep_body",
            "too_large",
            "bom",
            "odd_name",
            "long_flow",
        ],
        # about a quarter readable: the garbage is what is under test, and the agents' time
        # grows with the notes they can read
        weights=[5, 3, 2, 14, 14, 8, 12, 14, 3, 2, 2, 8, 6, 0.3, 4, 2, 2, 1, 0.03, 1, 1, 0.5],
    )[0]
    name = f"n{i}.md".encode()
    good = good_text(rng, i, crystal=kind == "crystal")
    lone_cr = False
    must: bool | None = None
    if kind in ("good", "crystal"):
        data, must = good.encode(), False
    elif kind == "empty":
        data = b""
    elif kind == "random":
        data = rng.randbytes(rng.randint(1, 3000))
        must = True if (b"\0" in data) else None
    elif kind == "nul_late":  # past the first 8 KB, where detection used to stop
        pad = ("filler " * 1400).encode()
        data = good.encode() + pad + b"\0" + pad[: rng.randint(0, 5000)]
        must = True
    elif kind == "nul_early":
        data = good.encode()[:50] + b"\0" + good.encode()[50:]
        must = True
    elif kind == "latin1":
        data = good.replace("note", "n\xf6te").encode("latin-1")
        must = True
    elif kind == "bad_name":
        name = b"bad" + bytes([rng.choice([0xFF, 0xFE, 0xC3, 0x80, 0xED])]) + f"{i}.md".encode()
        data, must = good.encode(), True
    elif kind == "lf_cr":
        data, lone_cr = good.replace("\n", "\n\r").encode(), True
    elif kind == "cr_only":
        data, lone_cr = good.replace("\n", "\r").encode(), True
    elif kind == "crlf_mixed":
        data = "".join(ln + rng.choice(["\n", "\r\n"]) for ln in good.split("\n")).encode()
    elif kind == "soup":
        fm = "\n".join(rng.sample(YAML_SOUP, rng.randint(1, 4)))
        data = ("---\n" + fm + "\n---\n# soup\n" + _words(rng, 10) + "\n").encode()
    elif kind == "unclosed":
        data, must = ("---\ntitle: never closed\n" + _words(rng, 20) + "\n").encode(), True
    elif kind == "huge_fm":
        data = (
            "---\n" + "".join(f"k{j}: {_words(rng, 2)}\n" for j in range(rng.randint(5000, 9000))) + "---\n"
        ).encode()
        must = True
    elif kind == "bomb":
        levels = rng.randint(5, 9)  # 9**5 = 59,049 nodes and up: past the budget
        data, must = bomb_text(levels).encode(), True
    elif kind == "loop_alias":
        data, must = b"---\na: &a [1, *a]\n---\n# loop\n", True
    elif kind == "deep_flow":
        n = rng.randint(200, 6000)
        data = ("---\nk: " + "[" * n + "]" * n + "\n---\n# deep\n").encode()
    elif kind == "deep_body":
        n = rng.randint(200, 5000)
        data = ("# deep\n" + "> " * n + "quote\n" + "- " * n + "item\n" + "[" * n + "x" + "]" * n + "\n").encode()
    elif kind == "too_large":
        data, must = good.encode() + b"x" * 1_100_000, True
    elif kind == "bom":
        data, must = b"\xef\xbb\xbf" + good.encode(), False
    elif kind == "long_flow":  # a value over thousands of lines, under the cap: read in linear time
        n = rng.randint(2000, 15000)
        data, must = ("---\nk: [\n" + "a,\n" * n + "]\n---\n# long\n").encode(), False
    else:  # odd_name: spaces, unicode, a leading dash, a dot in the middle: all UTF-8
        name = rng.choice(["with space {}.md", "ünïcødé {}.md", "-dash{}.md", "a.b.{}.md", "日本{}.md", "emoji🦀{}.md"])
        name = name.format(i).encode()
        data, must = good.encode(), False
    return Made(name, data, kind, must, lone_cr)


def generate(seed: int, count: int, folders: int) -> Iterator[Made]:
    """``count`` files spread over ``folders`` folders (a few nested deep, a few not UTF-8)."""
    rng = random.Random(seed)
    dirs: list[bytes] = [b""]
    for d in range(folders - 1):
        r = rng.random()
        if r < 0.02:
            dirs.append(b"/".join([b"deep"] * rng.randint(50, 200)) + f"/{d}".encode())
        elif r < 0.04:
            dirs.append(f"dir{d}".encode() + b"\xff")  # the notes inside are never seen: must be named
        else:
            dirs.append(f"dir{d}".encode())
    for i in range(count):
        made = _made(rng, i)
        folder = rng.choice(dirs)
        if b"\xff" in folder and made.must_be_named is False:
            made.must_be_named = None  # its folder is named instead
        made.path = folder + b"/" + made.path if folder else made.path
        yield made


def write_store(root: str, made: list[Made]) -> None:
    broot = os.fsencode(root)
    for m in made:
        full = os.path.join(broot, m.path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(m.data)
