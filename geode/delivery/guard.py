"""The lookup guard: an agent hunting through the store's files is a delivery that failed.

When the agent greps, finds, cats or lists inside a store (or uses Read/Grep/Glob there), the
hook denies the call and says how to ask geode instead. A deliberate lookup goes through when
the command carries the escape marker (``# geode:lookup`` by default). Every block and every
marked lookup is recorded: the blocked count is the store confessing it did not hand over
what was needed, and the marked count keeps that confession honest (the source's check that
the drop in blocks was not just people learning to mark their hunts).

A command is read with ``match.command_words``, the tokenizer the match terms use (no ``shlex``:
it imports ``re``, which the hook cannot afford), so the guard, the act channel and the
Gardener read one command one way.
"""

from __future__ import annotations

import os
import sys

from geode.delivery.match import command_words

LOOKUP_COMMANDS = frozenset(
    {
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "git-grep",
        "find",
        "fd",
        "fdfind",
        "locate",
        "cat",
        "bat",
        "less",
        "more",
        "head",
        "tail",
        "ls",
        "tree",
        "exa",
        "eza",
        "stat",
        "wc",
        "awk",
        "sed",
    }
)


def _inside(path: str, roots: dict[str, str], cwd: str) -> str | None:
    """The domain whose root contains ``path`` (resolved against ``cwd``), else None."""
    if not path or path.startswith("-"):
        return None
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        p = os.path.join(cwd or os.getcwd(), p)
    p = os.path.normpath(p)
    for domain, root in roots.items():
        if p == root or p.startswith(root + os.sep):
            return domain
        real = os.path.realpath(p) if os.path.lexists(p) else p
        if real == root or real.startswith(root + os.sep):
            return domain
    return None


def bash_lookup(command: str, roots: dict[str, str], cwd: str) -> tuple[str, str] | None:
    """(domain, the lookup command word) when the command hunts inside a store."""
    for words in command_words(command):
        # skip env assignments and wrappers: `FOO=1 sudo grep ...`
        idx = 0
        while idx < len(words) and (
            "=" in words[idx]
            and not words[idx].startswith("-")
            or words[idx] in ("sudo", "env", "command", "xargs", "nice", "time")
        ):
            idx += 1
        if idx >= len(words):
            continue
        cmd = os.path.basename(words[idx])
        if cmd == "git" and idx + 1 < len(words) and words[idx + 1] == "grep":
            cmd = "git-grep"
        if cmd not in LOOKUP_COMMANDS:
            continue
        args = words[idx + 1 :]
        for a in args:
            d = _inside(a, roots, cwd)
            if d:
                return d, cmd
        if (
            cmd in ("ls", "find", "fd", "tree", "rg", "ag", "git-grep")
            and not [a for a in args if not a.startswith("-")][1 if cmd in ("rg", "ag", "git-grep") else 0 :]
        ):
            d = _inside(cwd, roots, cwd)  # no path: the command works on the current folder
            if d:
                return d, cmd
    return None


def tool_lookup(tool: str, tool_input: dict, roots: dict[str, str], cwd: str) -> tuple[str, str] | None:
    """Read/Grep/Glob inside a store."""
    if tool == "Read":
        d = _inside(str(tool_input.get("file_path") or ""), roots, cwd)
    elif tool in ("Grep", "Glob"):
        path = str(tool_input.get("path") or "") or cwd
        d = _inside(path, roots, cwd)
        if d is None and tool == "Glob":
            d = _inside(str(tool_input.get("pattern") or ""), roots, cwd)
    else:
        return None
    return (d, tool) if d else None


def _quote(word: str) -> str:
    """``shlex.quote`` without importing shlex on the hook's path (a differential test checks it)."""
    if word and all(c.isalnum() or c in "@%+=:,./-_" for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def agent_command(python: str | None = None, home: str | None = None) -> str:
    """The command that runs geode in an agent's shell, which may have neither the virtual
    environment on PATH nor PYTHONPATH: the absolute interpreter (the hook's own, which the
    installer made absolute) and the absolute ``geode/cli/command.py``, with ``GEODE_HOME=``
    in front when one is set (the hook's command sets it for a home that is not the default)."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli", "command.py")
    cmd = f"{_quote(python or sys.executable)} {_quote(script)}"
    home = home if home is not None else os.environ.get("GEODE_HOME")
    return f"GEODE_HOME={_quote(home)} {cmd}" if home else cmd


#: the agents' file tools the guard answers (``tool_lookup``); anything else is a shell command
FILE_TOOLS = ("Read", "Grep", "Glob")


def escape_hint(tool: str, marker: str) -> str:
    """What lets a deliberate lookup through, for the tool that was used. A shell command takes the
    marker as a comment at its end; a file tool has no command to carry it, so the message must
    not tell it to add one: a Read goes through for the exact path a cut note named ("full
    note: <path>"), and any other direct read is a shell command with the marker."""
    if tool in FILE_TOOLS:
        read = (
            'A Read of exactly the path a note geode cut names after "full note:" goes through. '
            if tool == "Read"
            else ""
        )
        return (
            f"{read}{tool} has no marker to add: if you do mean to read the files directly, do it in the shell "
            f"with `# {marker}` at the end of the command (for example: cat FILE  # {marker}); "
            "every lookup is counted."
        )
    return (
        f"If you do mean to read the files directly, run it again with the marker `# {marker}` at the end of "
        f"the shell command (for example: cat FILE  # {marker}); every lookup is counted."
    )


def deny_message(domain: str, root: str, what: str, marker: str, tool: str = "Bash") -> str:
    """The deny's reason: why, how to ask geode instead, and the escape for ``tool``."""
    geode = agent_command()
    return (
        f"geode blocked this {what}: it looks through the memory store '{domain}' ({root}) by hand. "
        "The notes that apply to an action arrive on their own before it runs; to look something up, ask geode: "
        "its MCP tools (search, read_note) when you have them, or in the shell "
        f'`{geode} search "QUERY"` and `{geode} read ADDRESS`. ' + escape_hint(tool, marker)
    )
