"""Path safety for the queue: fuzzed paths in proposals never read or write outside the
store root. Symlinks inside the root (to a file or a folder outside it, or even inside it) are
refused, also when one is swapped in between filing and applying, or in the middle of an apply.

Every ``os.open``, ``os.mkdir``, ``os.replace`` and ``os.unlink`` made while the fuzzed
proposals are filed and approved is recorded with the folder its ``dir_fd`` points at; each must
lie inside the root (or be the queue's lock file). The folders outside are compared byte for
byte, mode and mtime, before and after."""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest

from geode.queue import apply as A
from geode.queue import atomic_put, journal_owner, safepath
from geode.queue import changes as CH
from geode.queue import proposals as Q
from tests.stores import plain_settings, snapshot, write
from tests.test_apply import draft


def tree_state(path: Path) -> dict:
    out = {}
    for p in sorted(path.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(path))] = (
            stat.S_IFMT(st.st_mode),
            stat.S_IMODE(st.st_mode),
            st.st_mtime_ns,
            p.read_bytes() if stat.S_ISREG(st.st_mode) else None,
        )
    return out


@pytest.fixture()
def world(tmp_path):
    """A store with symlinks in it, and folders beside it that must never be touched."""
    base = tmp_path
    root = base / "root"
    outside = base / "outside"
    evil = base / "root-evil"  # a prefix collision: "root-evil" starts with "root"
    for d in (root / "sub", outside / "sub", evil):
        d.mkdir(parents=True)
    write(root, "sub/real.md", b"inside\n")
    write(outside, "secret.md", b"secret\n")
    write(outside, "real.md", b"inside\n")  # same bytes as root/sub/real.md: a sha check alone would pass
    write(outside, "sub/real.md", b"inside\n")
    write(evil, "x.md", b"evil\n")
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "secret.md", root / "link_file")
    os.symlink(root / "sub" / "real.md", root / "inner_link")
    os.symlink("../outside", root / "sub" / "rel_link")
    s = plain_settings(base / "home", root)
    engine = Q.open_queue(s)
    yield s, engine, base, root, [outside, evil]
    engine.dispose()


FIXED = [
    "../outside/secret.md",
    "../../etc/passwd",
    "/etc/passwd",
    "sub/../../outside/x.md",
    "sub/../real.md",
    "./sub/real.md",
    "sub//real.md",
    "sub/",
    "",
    "\x00",
    "sub/real.md\x00.txt",
    "..\\outside\\secret.md",
    "sub\\..\\..\\x.md",
    "%2e%2e/outside/x.md",
    "%2e%2e%2foutside%2fx.md",
    "%252e%252e/x.md",
    "..%2foutside/x.md",
    "\u2024\u2024/x.md",
    "\uff0e\uff0e/outside/x.md",
    "..\u2215outside\u2215x.md",
    "\uff0e\uff0e\uff0foutside\uff0fx.md",
    "../root-evil/x.md",
    "../root-evil/new.md",
    "~/x.md",
    "C:\\x.md",
    "link_dir",
    "link_dir/secret.md",
    "link_dir/new.md",
    "link_dir/sub/real.md",
    "link_file",
    "inner_link",
    "inner_link/x",
    "sub/rel_link/secret.md",
    "sub/rel_link/new.md",
    "sub/rel_link",
    "sub/real.md/x.md",
    "..",
    ".",
    "...",
    "....",
    ".../x.md",
    "sub/..",
    "\ud800.md",
    "a" * 300,
    ("d/" * 100) + "x.md",
    "sub/ spaced name.md",
    "\u202eevil.md",
    "sub/\t.md",
]
FRAGMENTS = [
    "..",
    ".",
    "",
    "\\",
    "\x00",
    "%2e%2e",
    "%2f",
    "link_dir",
    "link_file",
    "inner_link",
    "sub",
    "rel_link",
    "real.md",
    "new.md",
    "\u2024\u2024",
    "\uff0e\uff0e",
    "\u2215",
    "\uff0f",
    "~",
    "C:",
    "root-evil",
    "outside",
    "secret.md",
    " ",
    "....",
    "\u00e9",
    "x.md",
]


def fuzzed_names(base: Path, n: int = 300) -> list[str]:
    names = list(FIXED)
    names += [
        str(base / "outside" / "secret.md"),
        str(base / "outside" / "new.md"),
        str(base / "root-evil" / "x.md"),
        str(base / "root" / "sub" / "real.md"),
        "//" + str(base / "x.md"),
    ]
    rng = random.Random(22)
    seen = set(names)
    while len(names) < n:
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 5))]
        sep = rng.choice(["/", "/", "/", "\\", "//"])
        name = sep.join(parts)
        if rng.random() < 0.2:
            name = "/" + name
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


class Recorder:
    """Wraps os functions; records every target as an absolute path (dir_fd resolved)."""

    def __init__(self, monkeypatch):
        self.targets: list[str] = []
        for name, _argnames in (
            ("open", ("dir_fd",)),
            ("mkdir", ("dir_fd",)),
            ("unlink", ("dir_fd",)),
            ("replace", ("src_dir_fd", "dst_dir_fd")),
        ):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name), name))

    @staticmethod
    def _abs(path, dir_fd) -> str:
        path = os.fsdecode(path)
        if dir_fd is None or os.path.isabs(path):
            return os.path.abspath(path)
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)

    def _wrap(self, real, name):
        def wrapper(*args, **kw):
            if name == "replace":
                self.targets.append(self._abs(args[0], kw.get("src_dir_fd")))
                self.targets.append(self._abs(args[1], kw.get("dst_dir_fd")))
            else:
                self.targets.append(self._abs(args[0], kw.get("dir_fd")))
            return real(*args, **kw)

        return wrapper


def test_split_refuses_the_obvious():
    for bad in ["", "/x", "../x", "a/../b", "a/./b", "a//b", "a/", "a\\b", "a\x00b", "\ud800"]:
        with pytest.raises(safepath.UnsafePath):
            safepath.split(bad)
    assert safepath.split("a b/\u2024\u2024/%2e%2e/c.md") == ("a b", "\u2024\u2024", "%2e%2e", "c.md")


def test_fuzzed_names_never_reach_outside_the_root(world, monkeypatch):
    s, engine, base, root, outside_dirs = world
    names = fuzzed_names(base)
    assert len(names) >= 200 and len(set(names)) == len(names)
    before_outside = {str(d): tree_state(d) for d in outside_dirs}
    real_root = os.path.realpath(root)
    allowed_extra = {os.path.join(s.home, "locks", "queue.lock"), os.path.join(s.home, "locks")}
    rec = Recorder(monkeypatch)

    accepted, refused = [], 0
    for i, name in enumerate(names):
        # resolve(): refused, or a path inside the root with no symlink on the way
        try:
            full = safepath.resolve(str(root), name)
        except safepath.UnsafePath:
            full = None
        if full is not None:
            assert os.path.commonpath([os.path.realpath(full), real_root]) == real_root, name
        # filing a new note there, and an edit when something is there
        try:
            pid = Q.file_proposal(
                s, engine, draft("new_note", [Q.FileChange(name, None, b"fuzz %d\n" % i)], key=f"new-{i}")
            )
        except Q.ProposalError:
            refused += 1
            pid = None
        if pid is not None:
            assert full is not None, f"filed but resolve() refused it: {name!r}"
            accepted.append((pid, name))
        try:
            change = CH.edit_change(s, "main", name, b"edited\n")
        except (Q.ProposalError, safepath.UnsafePath, OSError):
            change = None
        if change is not None:
            pid = Q.file_proposal(s, engine, draft("edit", [change], key=f"edit-{i}"))
            accepted.append((pid, name))
    for pid, name in accepted:
        r = A.approve(s, engine, pid, "fuzz")
        assert r["ok"] or r["status"] in ("conflict", "failed"), (name, r)
    monkeypatch.undo()

    # Every file operation landed inside the root (or was the queue lock).
    assert rec.targets, "the recorder saw nothing: the check would be vacuous"
    # (dir_fd targets come from /proc/self/fd: already free of symlinks and "..")
    journals = journal_owner.lock_folder(s, engine)  # the journal entries' liveness locks
    allowed_extra.add(journals)
    bad = [
        t
        for t in rec.targets
        if t not in allowed_extra
        and t != real_root
        and not t.startswith(real_root + "/")
        and not t.startswith(journals + "/")
    ]
    assert bad == []
    # Nothing outside changed, and every symlink is still the same symlink.
    assert {str(d): tree_state(d) for d in outside_dirs} == before_outside
    assert os.readlink(root / "link_dir") == str(base / "outside")
    assert (base / "outside" / "secret.md").read_bytes() == b"secret\n"
    # The unsafe ones were refused, the safe ones (lookalikes, %2e, spaces) filed and applied inside.
    assert refused >= 150
    filed = {name for _pid, name in accepted}
    for name in ["\u2024\u2024/x.md", "%2e%2e/outside/x.md", "~/x.md", "sub/ spaced name.md"]:
        assert name in filed and (root / name).is_file()
    for name in [
        "../outside/secret.md",
        "link_dir/new.md",
        "link_file",
        "inner_link",
        "sub/rel_link/new.md",
        "..\\outside\\secret.md",
        str(base / "outside" / "new.md"),
        "sub/real.md\x00.txt",
    ]:
        assert name not in filed
    assert not (base / "outside" / "new.md").exists()


def test_folder_swapped_for_a_symlink_after_filing_is_refused(world):
    s, engine, base, root, outside_dirs = world
    before_outside = {str(d): tree_state(d) for d in outside_dirs}
    edit = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "sub/real.md", b"changed\n")]))
    new = Q.file_proposal(s, engine, draft("new_note", [CH.new_note_change(s, "main", "sub/new.md", b"n\n")]))
    os.rename(root / "sub", root / "sub.orig")
    os.symlink(base / "outside", root / "sub")  # outside/real.md has the very bytes proposed against
    for pid in (edit, new):
        r = A.approve(s, engine, pid, "t")
        assert not r["ok"] and r["status"] == "failed" and "symlink" in r["message"], r
    assert {str(d): tree_state(d) for d in outside_dirs} == before_outside


def test_symlink_swapped_in_during_an_apply_writes_nothing_outside(world, monkeypatch):
    s, engine, base, root, outside_dirs = world
    write(root, "sub/two.md", b"two\n")
    before_outside = {str(d): tree_state(d) for d in outside_dirs}
    changes = [CH.edit_change(s, "main", "sub/real.md", b"changed\n"), CH.edit_change(s, "main", "sub/two.md", b"2\n")]
    pid = Q.file_proposal(s, engine, draft("edit", changes))
    swapped = []

    def hook(step, path):
        if step == "write" and not swapped:  # the first file's temp is written: swap the folder now
            os.rename(root / "sub", root / "sub.orig")
            os.symlink(base / "outside", root / "sub")
            swapped.append(path)

    monkeypatch.setattr(atomic_put, "after_step", hook)
    r = A.approve(s, engine, pid, "t")
    assert swapped and not r["ok"], r
    assert {str(d): tree_state(d) for d in outside_dirs} == before_outside


def test_move_into_a_symlinked_folder_is_refused_at_filing(world):
    s, engine, base, root, outside_dirs = world
    with pytest.raises((Q.ProposalError, safepath.UnsafePath)):
        changes = CH.move_changes(s, "main", "sub/real.md", "link_dir/real2.md")
        Q.file_proposal(s, engine, draft("move", changes))
    assert not (base / "outside" / "real2.md").exists()
    assert snapshot(root)["sub/real.md"][0] == Q.sha256(b"inside\n")
