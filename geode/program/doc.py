"""docs/CLI.md, generated from the parser: every command's ``--help``, so the reference cannot
drift from the code (``tests/test_cli_doc.py`` fails when the file is out of date).

    python -m geode.program.doc > docs/CLI.md
"""

from __future__ import annotations

import argparse
import os
import sys

#: The width the help is wrapped at, fixed so that the file does not depend on the terminal.
WIDTH = "100"


def commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser, one-line help) of the top parser and of every command under it, in order."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            for name, sub in a.choices.items():
                yield (*path, name), sub, helps.get(name) or ""
                yield from (c for c in commands(sub, (*path, name)) if len(c[0]) > len(path) + 1)


def render() -> str:
    """The whole reference as Markdown."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        from geode.program.main import build_parser

        top = build_parser()
        out = [
            "# The geode command line",
            "",
            "Generated from the parser by `python -m geode.program.doc > docs/CLI.md`; do not edit by hand",
            "(`tests/test_cli_doc.py` fails when this file is out of date).",
            "",
            "```text",
            top.format_help().rstrip(),
            "```",
        ]
        for path, parser, line in commands(top):
            out += ["", f"## geode {' '.join(path)}", ""]
            if line:
                out += [line[0].upper() + line[1:] + ".", ""]
            out += ["```text", parser.format_help().rstrip(), "```"]
        return "\n".join(out) + "\n"
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


if __name__ == "__main__":
    sys.stdout.write(render())
