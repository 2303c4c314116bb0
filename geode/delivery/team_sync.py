"""The team-rules domains: the notes geode derives from a repository's own rules, kept current.

``[team_rules] name = "/path/to/repo"`` in geode.toml makes ``name`` a domain whose notes are
derived from the repository's Cursor rules, CLAUDE.md / AGENTS.md sections and Claude skills
(``geode.kernel.team_rules`` reads them). The derived notes live in ``GEODE_HOME/team/<name>``
(rebuildable, like the indexes); the team's files are read, never written, never moved.

Why derived notes rather than reading the repository as a store: every room that walks a
domain (the binding index, recall, lint, the Gardener's ledger reports) then sees ordinary
notes, and delivery from them goes through the ledger and the control arm like any crystal.
The upkeep agents never examine these domains (``team_domains``): a proposal could only edit a
derived copy, and the source is the team's, not geode's.

What each derived note carries: its source file and line, and as its binding what the tool
itself would do: an ``alwaysApply: true`` rule is a boot crystal; a rule with ``globs`` is
delivered on Write and Edit of a file the globs match (``glob_rules``; the hook matches the
path relative to the repository); every other rule, section and skill is recall only.

``sync`` runs before each refresh of the binding index (so on the hook, standard library
only) and of the recall index. It stats the team files (a handful of ``stat`` calls) and
rewrites the derived notes only when one changed.
"""

from __future__ import annotations

import os

from geode.kernel import fastjson
from geode.kernel import team_rules as tr
from geode.kernel.crystal import ESSENCE_CLOSE, ESSENCE_OPEN

#: the file that records what the last sync saw and derived (under the mirror's root; a dot
#: file, which no walk reads as a note)
MANIFEST = ".team-rules.json"
FORMAT = "1"


def mirror_root(home: str, name: str) -> str:
    """Where the derived notes of team-rules domain ``name`` live."""
    return os.path.join(home, "team", name)


def team_domains(settings) -> dict[str, str]:
    """``{domain: repository root}`` of the team-rules domains (empty for most stores)."""
    return getattr(settings, "team_rules", None) or {}


def _fingerprint(repo: str) -> list:
    files = tr.discover(repo)
    out = []
    for rel, kind in files:
        try:
            st = os.stat(os.path.join(repo, rel))
        except OSError:
            continue
        out.append([rel, kind, st.st_mtime_ns, st.st_size])
    return out


def yaml_quoted(value: str) -> str:
    """A YAML double-quoted scalar of one line (the text stays readable: only ``\\`` and ``"``
    are escaped, line breaks and tabs become spaces)."""
    flat = " ".join(value.replace("\\", "\\\\").replace('"', '\\"').split())
    return f'"{flat}"'


def derived_path(section: tr.Section) -> str:
    """The derived note's path inside the mirror, by the kind of source."""
    if section.source_kind == tr.CURSOR_RULE:
        inner = section.source[len(tr.RULES_DIR) + 1 : -len(".mdc")]
        return f"cursor/{inner.replace('/', '--')}.md"
    if section.source_kind == tr.SKILL:
        return f"skills/{section.slug}.md"
    return f"{tr.slugify(section.source)}/{section.slug}.md"


def render(section: tr.Section, repo: str) -> str:
    """The derived note of one section: its source, its binding as the tool would apply it,
    the section's text as the essence."""
    lines = [
        "---",
        f"name: {yaml_quoted(section.title)}",
        f"title: {yaml_quoted(section.title)}",
        f"team_source: {yaml_quoted(section.source)}",
        f"team_line: {section.line}",
        f"team_kind: {yaml_quoted(section.kind)}",
    ]
    if section.description:
        lines.append(f"description: {yaml_quoted(section.description)}")
    if section.globs:
        lines.append("team_globs:")
        lines.extend(f"  - {yaml_quoted(g)}" for g in section.globs)
    if section.kind == tr.ALWAYS:
        lines += ["crystal:", "  deliver: boot"]
    elif section.kind == tr.GLOBS:
        lines += ["crystal:", "  deliver: act", "  on: [write, edit]"]
    lines.append("---")
    body = section.body.replace(ESSENCE_OPEN, "").replace(ESSENCE_CLOSE, "")
    lines += [
        ESSENCE_OPEN,
        body,
        ESSENCE_CLOSE,
        "",
        f"From `{section.source}` line {section.line} of {repo}; geode derived this note from it and "
        "rewrites it when the source changes: edit the source, not this file.",
        "",
    ]
    return "\n".join(lines)


def derive(repo: str) -> tuple[dict[str, str], list, list[tr.Trouble], list[tr.Section]]:
    """Everything one repository's team files give: ``(derived path -> text, glob rules,
    troubles, sections)``. A file that cannot be read is a trouble, never an exception."""
    notes: dict[str, str] = {}
    globs: list = []
    troubles: list[tr.Trouble] = []
    sections: list[tr.Section] = []
    for rel, kind in tr.discover(repo):
        try:
            with open(os.path.join(repo, rel), "rb") as fh:
                data = fh.read(1_000_001)
        except OSError as exc:
            troubles.append(tr.Trouble(rel, 0, "team-file-unreadable", f"cannot read: {exc.strerror or exc}"))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            troubles.append(
                tr.Trouble(
                    rel,
                    line,
                    "team-file-unreadable",
                    f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}): not read",
                )
            )
            continue
        found, bad = tr.read_file(repo, rel, kind, text)
        troubles.extend(bad)
        for s in found:
            if not s.body:
                continue
            sections.append(s)
            path = derived_path(s)
            notes[path] = render(s, repo)
            if s.kind == tr.GLOBS:
                globs.append([path, list(s.globs)])
    return notes, globs, troubles, sections


def _write(path: str, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return True


def _read_manifest(root: str) -> dict:
    try:
        with open(os.path.join(root, MANIFEST), encoding="utf-8") as fh:
            data = fastjson.loads(fh.read())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def sync_one(home: str, name: str, repo: str) -> bool:
    """Bring one mirror in line with its repository; True when a derived note changed."""
    root = mirror_root(home, name)
    seen = _fingerprint(repo)
    manifest = _read_manifest(root)
    if manifest.get("format") == FORMAT and manifest.get("repo") == repo and manifest.get("seen") == seen:
        return False
    notes, globs, _troubles, _sections = derive(repo)
    changed = False
    os.makedirs(root, exist_ok=True)
    for rel, text in notes.items():
        changed = _write(os.path.join(root, rel), text) or changed
    for rel in manifest.get("notes") or []:
        if rel not in notes:
            try:
                os.remove(os.path.join(root, rel))
                changed = True
            except OSError:
                pass
    record = {"format": FORMAT, "repo": repo, "seen": seen, "notes": sorted(notes), "globs": globs}
    _write(os.path.join(root, MANIFEST), fastjson.dumps(record))
    return changed


def sync(settings) -> bool:
    """Every team-rules domain in line with its repository (a no-op for most stores). A mirror
    that cannot be written is left as it is: delivery then serves what it last derived."""
    changed = False
    for name, repo in team_domains(settings).items():
        try:
            changed = sync_one(settings.home, name, repo) or changed
        except OSError:
            continue
    return changed


def glob_rules(settings) -> list[tuple[str, str, str, list[str]]]:
    """``(domain, derived path, repository, globs)`` of every auto-attached rule, as the last
    sync recorded them."""
    out = []
    for name, repo in team_domains(settings).items():
        manifest = _read_manifest(mirror_root(settings.home, name))
        for path, globs in manifest.get("globs") or []:
            out.append((name, path, repo, globs))
    return out


def attached(settings, file_path: str, cwd: str = "") -> list[tuple[str, str, str]]:
    """``(domain, derived path, the glob that matched)`` of the auto-attached rules whose globs
    match ``file_path`` (absolute, or relative to ``cwd``), relative to the rule's repository."""
    if not file_path or not team_domains(settings):
        return []
    p = file_path if os.path.isabs(file_path) else os.path.join(cwd or os.getcwd(), file_path)
    p = os.path.normpath(p)
    out = []
    for domain, path, repo, globs in glob_rules(settings):
        rel = None
        for q in (p, os.path.realpath(p)):
            if q.startswith(repo + os.sep):
                rel = q[len(repo) + 1 :].replace(os.sep, "/")
                break
        if rel is None:
            continue
        hit = next((g for g in globs if tr.glob_match(g, rel)), None)
        if hit is not None:
            out.append((domain, path, hit))
    return out
