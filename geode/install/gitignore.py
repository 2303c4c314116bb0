"""Keep a machine-local file out of the project's commits: ``.claude/settings.local.json`` holds
this machine's absolute paths (the interpreter, hookmain.py, GEODE_HOME), and Claude Code itself
adds it to the git-ignored files only when *it* creates the file. When geode writes it inside a
git work tree that does not ignore it, a ``git add -A`` would commit those paths; so the file's
path is added to the work tree's ``.gitignore`` (said in the install's output).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def work_tree(path: Path) -> Path | None:
    """The git work tree holding ``path`` (the nearest folder above it with a ``.git``), or None."""
    for folder in [path.parent, *path.parent.parents]:
        if (folder / ".git").exists():
            return folder
    return None


def is_ignored(root: Path, path: Path) -> bool:
    """Whether git ignores ``path`` in ``root`` (every ignore source git reads: nested
    .gitignore files, info/exclude, core.excludesFile); without git, whether the root's
    .gitignore names it exactly."""
    rel = path.relative_to(root).as_posix()
    try:
        p = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-q", "--no-index", rel],
            capture_output=True,
            timeout=10,
        )
        if p.returncode in (0, 1):
            return p.returncode == 0
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        lines = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return any(line.strip().lstrip("/") == rel for line in lines)


def ignore_local_file(path: str | os.PathLike[str]) -> Path | None:
    """Add ``path`` to its work tree's ``.gitignore`` unless git already ignores it; returns the
    ``.gitignore`` written, or None (not in a work tree, or already ignored)."""
    target = Path(os.path.abspath(path))
    root = work_tree(target)
    if root is None or is_ignored(root, target):
        return None
    gi = root / ".gitignore"
    rel = "/" + target.relative_to(root).as_posix()
    try:
        old = gi.read_bytes()
    except FileNotFoundError:
        old = b""
    sep = b"" if not old or old.endswith(b"\n") else b"\n"
    entry = f"# machine-local: this machine's paths, written by `geode hooks install`\n{rel}\n".encode()
    with open(gi, "ab") as f:
        f.write(sep + entry)
    return gi
