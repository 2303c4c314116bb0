"""``write_note``: a new note written at once, linted first; a change to an existing note filed
as a proposal in the approval queue (never an overwrite), citing a ``write_requested`` ledger row.

Apart from the read-only tools because it is the one tool that writes: its checks of the
agent's title, folder and frontmatter, the frontmatter composed by geode's one editor, the file
created without ever replacing one, and the proposal filed. :class:`NoteWriter` gives
:class:`geode.mcp.tools.Recall` its ``write_note`` method.
"""

import hashlib
import logging
import os
import re
import threading
import unicodedata
from typing import Any

from geode.kernel.errors import GeodeError
from geode.mcp.inputs import MAX_JSON_CHARS, ToolInputError, bounded

log = logging.getLogger("geode.mcp")

#: What ``write_note`` accepts as a body (the store's per-file limit applies too).
MAX_BODY_CHARS = 200_000
WRITE_KIND = "write_requested"
PROPOSAL_AGENT = "mcp"


def slugify(title: str) -> str:
    """A file name from a title: accents folded, lower case, words joined by ``-``."""
    s = unicodedata.normalize("NFKD", title)
    s = "".join(c for c in s if not unicodedata.combining(c)).lower()
    s = re.sub(r"[^\w\s-]", " ", s)
    s = re.sub(r"[\s_-]+", "-", s).strip("-")
    return s[:80].strip("-") or "note"


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def check_keys(data: dict, where: str = "frontmatter", depth: int = 0) -> None:
    """Keys an agent may give: plain names (a dot would name a nested key to the editor), at
    most three levels deep; values of the kinds a note holds."""
    if depth > 2:
        raise ToolInputError(f"{where}: nested deeper than three levels")
    for key, val in data.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ToolInputError(f"{where} key {key!r}: letters, digits, '_' and '-' only, starting with a letter")
        if isinstance(val, dict):
            check_keys(val, f"{where}.{key}", depth + 1)
        elif isinstance(val, list):
            if any(isinstance(x, (dict, list)) or x is None for x in val):
                raise ToolInputError(f"{where}.{key}: a list holds text, numbers or true/false only")
        elif val is not None and not isinstance(val, (str, int, float, bool)):
            raise ToolInputError(f"{where}.{key}: unsupported value {val!r}")


def frontmatter_text(meta: dict) -> str:
    """``---`` + the keys of ``meta`` in order + ``---``, written by geode's one frontmatter
    editor (``geode.kernel.frontmatter_edit.set_key``), which proves each key reads back as
    given through the reader every room uses; a value it cannot write is a tool error."""
    from geode.kernel.frontmatter_edit import FrontmatterEditError, set_key

    check_keys(meta)
    data = b""
    try:
        for key, val in meta.items():
            if val is not None:
                data = set_key(data, key, val, path="the new note")
    except FrontmatterEditError as exc:
        raise ToolInputError(str(exc)) from None
    return data.decode("utf-8") if data else "---\n---\n"


def read_back(v):
    """What the frontmatter parser reads back for a value we wrote (for the round-trip check)."""
    if isinstance(v, dict):
        return {k: read_back(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [read_back(x) for x in v]
    return v


def _safe_folder(folder: str) -> str:
    from geode.queue import safepath

    f = (folder or "").strip()
    if f.startswith(("/", "~")):
        raise ToolInputError(f"folder {folder!r}: give a folder relative to the domain's root, e.g. ops/ci")
    f = f.strip("/")
    if not f:
        return ""
    try:
        parts = safepath.split(f + "/x.md")[:-1]
    except safepath.UnsafePath as exc:
        raise ToolInputError(f"folder {folder!r}: {exc.reason}; give a folder relative to the domain's root") from None
    hidden = [p for p in parts if p.startswith(".")]
    if hidden:
        raise ToolInputError(f"folder {folder!r}: a hidden folder ({hidden[0]}) is not part of the store")
    return "/".join(parts)


#: What the agent can change when lint refuses a note (codes of ``geode.delivery.lint``).
_LINT_HINTS = {
    "no-essence": " (pass essence: the text to deliver when the binding fires)",
    "empty-essence": " (pass a non-empty essence)",
    "essence-over-budget": " (shorten essence; the details belong in body)",
}


class NoteWriter:
    """``write_note`` as a method of :class:`geode.mcp.tools.Recall`, which supplies the settings,
    the session, the lock that serialises the calls and the one recall index."""

    settings: Any
    session: str
    lock: threading.Lock

    def index(self) -> Any:
        raise NotImplementedError  # Recall's

    def write_note(
        self,
        title: str,
        body: str,
        folder: str = "",
        domain: str | None = None,
        frontmatter: dict | None = None,
        crystal: dict | None = None,
        essence: str | None = None,
    ) -> dict:
        for name, value in (("title", title), ("folder", folder), ("domain", domain), ("essence", essence)):
            bounded(name, value)  # before anything is read or written
        bounded("body", body, MAX_BODY_CHARS)
        bounded("frontmatter", frontmatter, MAX_JSON_CHARS)
        bounded("crystal", crystal, MAX_JSON_CHARS)
        from geode.delivery.lint import lint_note
        from geode.kernel import team_rules
        from geode.kernel.note import ESSENCE_CLOSE, ESSENCE_OPEN, parse_note
        from geode.queue import changes, safepath
        from geode.recall.recall_index import address as addr_of

        settings = self.settings
        title = " ".join((title or "").split())
        if not title:
            raise ToolInputError("title: give the note a title (one line)")
        if not (body or "").strip() and not (essence or "").strip():
            raise ToolInputError("body: a note needs a body")
        domain = domain or settings.default_domain
        if domain not in settings.domains:
            raise ToolInputError(f"unknown domain {domain!r}; configured: {', '.join(settings.domains)}")
        refusal = team_rules.write_refusal(settings, domain)
        if refusal is not None:
            raise ToolInputError(f"not written: {refusal}")
        sub = _safe_folder(folder)
        fm = dict(frontmatter or {})
        for k in ("title", "crystal"):
            if k in fm:
                raise ToolInputError(f"frontmatter: pass {k} as the {k} argument, not inside frontmatter")
        meta: dict = {"title": title, **fm}
        if crystal:
            meta["crystal"] = {k: v for k, v in dict(crystal).items() if v not in (None, "", [])}
        if (body or "").lstrip("\ufeff").startswith("---"):
            raise ToolInputError(
                "body: it starts with '---', a frontmatter of its own; pass those keys as "
                "frontmatter and the text after the closing '---' as body"
            )
        text = frontmatter_text(meta)
        if essence is not None and essence.strip():
            if ESSENCE_OPEN in (body or ""):
                raise ToolInputError("essence: the body already holds essence markers; give one or the other")
            text += f"{ESSENCE_OPEN}\n{essence.strip()}\n{ESSENCE_CLOSE}\n\n"
        text += (body or "").strip("\n") + "\n"

        root = settings.domains[domain]
        rel = f"{sub}/{slugify(title)}.md" if sub else f"{slugify(title)}.md"
        existing = self._existing(domain, sub, rel, title)
        target = existing or rel
        note = parse_note(text, target)
        if note.frontmatter != read_back(meta):  # what we wrote must read back as what was meant
            raise ToolInputError(
                f"frontmatter: it would not read back as given ({note.frontmatter!r}); "
                "simplify the values (text, numbers, lists of text)"
            )
        problems = lint_note(note, settings, domain)
        lint: dict[str, Any] = {
            "errors": sum(1 for p in problems if p.severity == "error"),
            "warnings": sum(1 for p in problems if p.severity == "warning"),
            "problems": [
                {"line": p.line, "code": p.code, "severity": p.severity, "message": p.message} for p in problems
            ],
        }
        if lint["errors"]:
            listed = "; ".join(
                f"line {p['line']}: {p['message']} [{p['code']}]{_LINT_HINTS.get(p['code'], '')}"
                for p in lint["problems"]
                if p["severity"] == "error"
            )
            raise ToolInputError(f"not written: lint found {lint['errors']} error(s): {listed}")
        data = text.encode("utf-8")
        if len(data) > settings.max_file_bytes:
            raise ToolInputError(f"body: {len(data):,} bytes, over the store's limit of {settings.max_file_bytes:,}")

        if existing is None:
            try:
                with self.lock:
                    created = _create_file(root, rel, data)
            except safepath.UnsafePath as exc:
                raise ToolInputError(f"folder {folder!r}: {exc.reason}") from None
            if created:
                from sqlalchemy.exc import SQLAlchemyError

                with self.lock:  # findable by text at once (the next search refreshes this folder too)
                    try:
                        self.index().quick_refresh()
                    except (GeodeError, SQLAlchemyError, OSError) as exc:
                        log.warning("the index was not refreshed after writing %s: %s", rel, exc)
                note2 = parse_note(text, rel)
                return {
                    "outcome": "written",
                    "address": addr_of(domain, note2.permalink),
                    "domain": domain,
                    "path": rel,
                    "proposal_id": None,
                    "lint": lint,
                    "message": f"written to {rel} in domain {domain}",
                }
            target = rel  # created by someone else between our look and our write: propose instead

        # an existing note: never overwritten; the change goes to the approval queue
        cur = changes.current(settings, domain, target)
        if cur is not None and cur[0] == data:
            raise ToolInputError(f"{target} already holds exactly this text; nothing to change")
        pid, fresh = self._propose(domain, target, data, title)
        note2 = parse_note(text, target)
        verb = "filed" if fresh else "was already filed"
        return {
            "outcome": "proposed" if fresh else "already_proposed",
            "address": addr_of(domain, note2.permalink),
            "domain": domain,
            "path": target,
            "proposal_id": pid,
            "lint": lint,
            "message": (
                f"{target} exists, so it was not overwritten: the change {verb} as proposal {pid} in "
                f"the approval queue; a person approves it with `geode proposals approve {pid}`"
            ),
        }

    def _existing(self, domain: str, sub: str, rel: str, title: str) -> str | None:
        """The note this write would change: the file at ``rel``, or a note in the same folder
        with the same title (case-insensitive)."""
        from sqlalchemy import func, select

        from geode.queue import changes
        from geode.recall.index_tables import notes_t

        if changes.current(self.settings, domain, rel) is not None:
            return rel
        c = notes_t.c
        with self.lock:
            idx = self.index()
            idx.quick_refresh()
            with idx.reader.connect() as conn:
                rows = conn.execute(
                    select(c.path).where(c.domain == domain, func.lower(c.title) == title.lower()).order_by(c.path)
                ).all()
        for (path,) in rows:
            folder_of = path.rsplit("/", 1)[0] if "/" in path else ""
            if folder_of == sub and changes.current(self.settings, domain, path) is not None:
                return path
        return None

    def _propose(self, domain: str, path: str, data: bytes, title: str) -> tuple[int, bool]:
        """File an edit proposal citing a ``write_requested`` ledger row; (id, newly filed)."""
        from sqlalchemy import select

        from geode.delivery import ledger
        from geode.queue import changes, proposals
        from geode.queue import tables as queue_tables
        from geode.records import models

        settings = self.settings
        engine = proposals.open_queue(settings)
        run_id = f"mcp:{self.session}"[:255]
        key = f"write_note:{domain}:{path}:{hashlib.sha256(data).hexdigest()[:16]}"[:255]
        P = queue_tables.P
        with engine.connect() as conn:  # the same change asked for again in this session: the same proposal
            known = conn.execute(select(P.c.id).where(P.c.run_id == run_id, P.c.key == key)).scalar()
        if known is not None:
            return int(known), False
        ev = ledger.new_event(
            WRITE_KIND,
            session=self.session,
            domain=domain,
            crystal_id=f"{domain}:{path}",
            path=path,
            action="write",
            channel="mcp",
            detail={"title": title, "sha256": hashlib.sha256(data).hexdigest(), "via": "mcp"},
        )
        models.insert_events(engine, [ev])
        t = models.table_of(models.LedgerEvent)
        with engine.connect() as conn:
            eid = conn.execute(select(t.c.id).where(t.c.event_id == ev["event_id"])).scalar_one()
        try:
            change = changes.edit_change(settings, domain, path, data)
            draft = proposals.ProposalDraft(
                agent=PROPOSAL_AGENT,
                kind="edit",
                domain=domain,
                title=f"Update {path}: {title}"[:500],
                rationale="An agent asked write_note to change this existing note; write_note never overwrites, "
                "so the change waits here for a person.",
                evidence=[{"ledger_event": int(eid)}],
                changes=[change],
                run_id=run_id,
                key=key,
            )
            pid = proposals.file_proposal(settings, engine, draft)
        except proposals.ProposalError as exc:
            raise ToolInputError(f"{path}: the change could not be filed: {exc}") from None
        if pid is not None:
            return pid, True
        with engine.connect() as conn:
            return int(conn.execute(select(P.c.id).where(P.c.run_id == run_id, P.c.key == key)).scalar_one()), False


def _create_file(root: str, rel: str, data: bytes) -> bool:
    """Create ``rel`` under ``root`` with ``data``, never replacing a file; False when it exists.

    Written to a temp file in the same folder, fsynced, then hard-linked into place: ``link(2)``
    fails when the name exists, so a file created meanwhile by anyone else is never overwritten.
    The folder walk refuses symlinks (``safepath.open_parent``). A filesystem without hard links
    gets ``O_CREAT | O_EXCL`` on the name itself (no overwrite either; not atomic against a crash).
    """
    from geode.queue import safepath
    from geode.queue.apply import default_mode

    dirfd, leaf = safepath.open_parent(root, rel, create=True)
    try:
        if safepath.leaf_stat(dirfd, leaf, rel) is not None:
            return False
        tmp = f".{leaf}.geode-{os.getpid()}-{os.urandom(4).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=dirfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, default_mode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, leaf, src_dir_fd=dirfd, dst_dir_fd=dirfd, follow_symlinks=False)
            except FileExistsError:
                return False
            except OSError:  # no hard links here (some network and FAT filesystems)
                try:
                    fd2 = os.open(leaf, flags, default_mode(), dir_fd=dirfd)
                except FileExistsError:
                    return False
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd2, view) :]
                    os.fsync(fd2)
                finally:
                    os.close(fd2)
        finally:
            try:
                os.unlink(tmp, dir_fd=dirfd)
            except FileNotFoundError:
                pass
        os.fsync(dirfd)
        return True
    finally:
        os.close(dirfd)
