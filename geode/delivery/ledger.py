"""The usage ledger's writer: standard library only, safe with many short writer processes.

Why this shape: the hook runs before every tool call, in its own process, and must answer in
a few milliseconds without ever breaking the agent. Dozens of hooks may write at once, and the
ledger is a record that cannot be rebuilt, so no event may be lost or counted twice.

- SQLite (the default): one short ``BEGIN IMMEDIATE`` transaction per call. A deferred
  transaction that upgrades from read to write fails at once with SQLITE_BUSY whatever the
  timeout; IMMEDIATE takes the write lock up front, so the busy timeout actually applies.
- When the lock cannot be had within ``settings.lock_budget_ms``, on any SQLite error, when
  the database or its table does not exist yet, and always when the ledger lives in
  PostgreSQL (the hook never opens a network connection), events go to the spool:
  ``spool/events.jsonl``, one JSON object per line, each line one ``os.write`` of under 4 KiB
  on an ``O_APPEND`` descriptor, so concurrent appenders never interleave or tear lines.
- The spool is drained into the database later (by the next hook that wrote to the database,
  or by the CLI through ``models.init_db``). ``event_id`` is unique and every insert is
  ``INSERT OR IGNORE`` / ``ON CONFLICT DO NOTHING``, so ingesting a line twice (after a crash
  between commit and delete) is harmless.

Locking between appenders and drainers (the part that is easy to get wrong): a drainer renames
``events.jsonl`` away and then ingests the renamed file. An appender that opened the file just
before the rename could otherwise write its line into a file that has already been read and
deleted. So appenders hold a shared ``flock`` while they write and check, under that lock,
that their descriptor is still the file named ``events.jsonl``; a drainer takes an exclusive
``flock`` on the renamed file before reading it. Locks die with their process, so a
``*.draining`` file whose lock can be taken belongs to a crashed drain and is picked up again.

Durability: the hook's connection uses ``synchronous=NORMAL`` (in WAL mode a committed
transaction survives a process crash, not necessarily a power cut); a spool line has the same
guarantee (written, not fsynced). Both survive SIGKILL, which is what the hook is exposed to.
"""

from __future__ import annotations

import os
import time

from geode.kernel.sqlite import sqlite3

try:  # POSIX only; without it the appender/drainer race is narrowed by the rename, not closed
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

TABLE = "ledger_event"

#: Every column of ``ledger_event``, in table order. ``models.LedgerEvent`` must match this
#: (a test asserts it): the hook cannot import the SQLModel definition, so the column list
#: lives here and the table is defined once, in ``models.py``.
COLUMNS: tuple[str, ...] = (
    "id",
    "event_id",
    "ts",
    "kind",
    "session",
    "domain",
    "crystal_id",
    "path",
    "content_hash",
    "action",
    "channel",
    "term",
    "chars",
    "truncated",
    "agent",
    "detail",
)

#: The columns an event carries (``id`` is assigned by the database).
EVENT_FIELDS: tuple[str, ...] = COLUMNS[1:]
_INT_FIELDS = frozenset(("chars", "truncated"))
_FLOAT_FIELDS = frozenset(("ts",))

KINDS: tuple[str, ...] = (
    "delivered",
    "withheld",
    "skipped_budget",
    "suppressed_backoff",
    "blocked",
    "lookup_marked",
    "followed_up",  # a Read of the full note a cut delivery pointed to ("full note: <path>"): not a lookup
    "denied_once",
    "stop_blocked",
    "session_end",
    "searched",
    "read",  # a note read on demand (geode read, the MCP read_note tool): search_log.read_event
    "write_requested",  # the MCP write_note tool asked to change a note; its proposal cites the row
    "index_busy",  # a hook call another process kept from the binding index: it delivered nothing
    "index_building",  # a hook call while the first build of a large index ran in the background
    "shell_run",  # PostToolUse: a shell command's shape and exit status (and a failure's first lines)
    "file_touched",  # PostToolUse: a Write/Edit, the files touched between a failure and its fix
)

SPOOL_NAME = "events.jsonl"
REJECTED_NAME = "rejected.jsonl"
#: Each spool write stays under one page: an O_APPEND write this small is never interleaved.
MAX_LINE_BYTES = 4000

_INSERT_SQL = (
    f"INSERT OR IGNORE INTO {TABLE} ({', '.join(EVENT_FIELDS)}) VALUES ({', '.join('?' for _ in EVENT_FIELDS)})"
)


def new_event(kind: str, **fields: object) -> dict:
    """A complete ledger row (every column but ``id``) with defaults filled in.

    ``detail`` may be given as a dict/list (it is stored as JSON text). An unknown field is a
    programming error and raises ``TypeError`` (the hook catches everything; tests do not).
    """
    unknown = set(fields) - set(EVENT_FIELDS)
    if unknown:
        raise TypeError(f"unknown ledger field(s): {', '.join(sorted(unknown))}")
    ev: dict = {name: "" for name in EVENT_FIELDS}
    ev["chars"] = 0
    ev["truncated"] = 0
    ev["ts"] = time.time()
    ev["event_id"] = os.urandom(16).hex()
    ev["kind"] = kind
    for name, value in fields.items():
        if value is None:
            continue
        ev[name] = value
    detail = ev["detail"]
    if not isinstance(detail, str):
        import json  # lazily: json pulls in re and enum, milliseconds the hook rarely needs

        ev["detail"] = json.dumps(detail, separators=(",", ":"), default=str)
    ev["truncated"] = int(bool(ev["truncated"]))
    ev["chars"] = int(ev["chars"])
    ev["ts"] = float(ev["ts"])
    return ev


#: A budget-skip row holds the crystals one action skipped (``detail``: ``{"limit": ...,
#: "skipped": [[crystal_id, term], ...]}``, ``crystal_id`` empty). Why: a common command
#: matching 240 crystals of which six fit wrote 234 rows per call for a new session, half the
#: hook's time (issue 25). A set is cut into rows of at most this many detail bytes, so each row
#: still fits one spool line (``MAX_LINE_BYTES``).
SKIP_SET_BYTES = 3000


def skip_set_details(limit: str, items: list[tuple[str, str]]) -> list[str]:
    """The ``detail`` texts of the rows recording ``items`` (crystal id, term) as skipped for
    ``limit``: one row per action, more only when the set would not fit one spool line."""
    from geode.kernel import fastjson

    # each pair is encoded once and the row's text joined from the pieces: byte for byte what
    # ``fastjson.dumps({"limit": limit, "skipped": chunk})`` writes, without encoding the set
    # twice (a new session's common command skips some 236 crystals a call: issue 25)
    enc = fastjson.dumps
    head = '{"limit":' + enc(limit) + ',"skipped":['
    out: list[str] = []
    chunk: list[str] = []
    size = 0
    for cid, term in items:
        pair = "[" + enc(str(cid)) + "," + enc(str(term)) + "]"
        n = len(pair) + 1
        if chunk and size + n > SKIP_SET_BYTES:
            out.append(head + ",".join(chunk) + "]}")
            chunk, size = [], 0
        chunk.append(pair)
        size += n
    if chunk:
        out.append(head + ",".join(chunk) + "]}")
    return out


def skipped_items(crystal_id: str, term: str, detail: str) -> list[tuple[str, str]]:
    """(crystal id, term) of every crystal a ``skipped_budget`` row records: the row's own for
    an older row (one row per crystal), the set in its ``detail`` for a newer one."""
    if crystal_id:
        return [(crystal_id, term or "")]
    from geode.kernel import fastjson

    try:
        obj = fastjson.loads(detail or "")
    except ValueError:
        return []
    pairs = obj.get("skipped") if isinstance(obj, dict) else None
    if not isinstance(pairs, list):
        return []
    return [(str(p[0]), str(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2 and p[0]]


def _row(ev: dict) -> tuple:
    return tuple(ev.get(name, 0 if name in _INT_FIELDS else "") for name in EVENT_FIELDS)


def spool_path(settings) -> str:
    return os.path.join(str(settings.spool_dir), SPOOL_NAME)


def _sqlite_uri(path: str) -> str:
    """A ``mode=rw`` URI: connecting must never create an empty database file."""
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?mode=rw"


def connect(settings, timeout_ms: int | None = None) -> sqlite3.Connection:
    """A hook-side connection to an existing SQLite ledger (raises if the file is missing).

    Autocommit mode (``isolation_level=None``) so that the transactions we issue are exactly
    the ones we write: ``BEGIN IMMEDIATE`` ... ``COMMIT``.
    """
    ms = settings.lock_budget_ms if timeout_ms is None else timeout_ms
    path = settings.records_file
    if path is None:
        raise sqlite3.OperationalError("the records are not in a SQLite file")
    conn = sqlite3.connect(_sqlite_uri(path), uri=True, timeout=ms / 1000.0, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(ms)}")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:  # clean up, then re-raise: nothing is caught here
        conn.close()
        raise
    return conn


def _insert_sqlite(conn: sqlite3.Connection, rows: list[tuple]) -> int:
    """Insert rows in one IMMEDIATE transaction; returns how many were new."""
    before = conn.total_changes
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(_INSERT_SQL, rows)
        conn.execute("COMMIT")
    except BaseException:  # clean up, then re-raise: nothing is caught here
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        raise
    return conn.total_changes - before


def append(settings, events: list[dict], conn: sqlite3.Connection | None = None) -> str:
    """Record events; returns ``"db"`` or ``"spool"`` (where they went).

    ``conn``: a connection the caller already holds (the hook's control arm opened one to read
    its plan): written through and left open, so one hook call opens and closes the ledger
    once, not twice (each close of a WAL connection costs a checkpoint: issue 25).
    Raises only when both the database and the spool failed (the hook catches that and
    stays silent). An empty list writes nothing and returns ``"db"``.
    """
    if not events:
        return "db"
    path = settings.records_file  # None: PostgreSQL (never opened from here) or SQLite in memory
    if path is not None and os.path.exists(path):
        own = conn is None
        try:
            if conn is None:
                conn = connect(settings)
            _insert_sqlite(conn, [_row(ev) for ev in events])
        except sqlite3.Error:
            pass  # locked, missing table, corrupt file...: the spool takes it
        else:
            try:
                st = os.stat(spool_path(settings))
                if st.st_size > 0:
                    drain(settings, lambda evs: _insert_sqlite(conn, [_row(e) for e in evs]), claim_wait_s=0.02)
            except (OSError, sqlite3.Error):
                pass  # draining is opportunistic (spool busy, database locked); the events themselves are stored
            return "db"
        finally:
            if own and conn is not None:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
    spool_append(settings, events)
    return "spool"


def encode_line(ev: dict) -> bytes:
    """One JSON line under MAX_LINE_BYTES; an oversized ``detail`` (then any long text
    field) is cut and marked, because a line that cannot be written atomically is worse."""
    from geode.kernel import fastjson  # `json` imports re and enum: milliseconds the hook cannot spare

    def dump(obj: dict) -> bytes:
        clean = {k: (v if v is None or isinstance(v, (str, int, float, bool)) else str(v)) for k, v in obj.items()}
        return (fastjson.dumps(clean) + "\n").encode("ascii")

    line = dump(ev)
    if len(line) <= MAX_LINE_BYTES:
        return line
    ev = dict(ev)
    detail = str(ev.get("detail", ""))
    keep = len(detail)
    while len(line) > MAX_LINE_BYTES and keep > 0:
        keep = max(0, keep - (len(line) - MAX_LINE_BYTES) - 64)
        ev["detail"] = fastjson.dumps({"detail_truncated": True, "prefix": detail[:keep]})
        line = dump(ev)
    for name in ("path", "term", "crystal_id", "session", "agent", "content_hash", "domain", "action", "channel"):
        if len(line) <= MAX_LINE_BYTES:
            break
        value = str(ev.get(name, ""))
        if len(value) > 200:
            ev[name] = value[:200] + "...[cut]"
            line = dump(ev)
    if len(line) > MAX_LINE_BYTES:  # only a pathological kind/event_id gets here
        raise ValueError("ledger event cannot be encoded in one spool line")
    return line


def spool_append(settings, events: list[dict]) -> None:
    """Append events to ``spool/events.jsonl``, one atomic ``os.write`` per event line."""
    lines = [encode_line(ev) for ev in events]
    os.makedirs(str(settings.spool_dir), exist_ok=True)
    path = spool_path(settings)
    for _attempt in range(50):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a drainer holds this (already renamed) file: reopen the name
                try:
                    same = os.fstat(fd).st_ino == os.stat(path).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    continue  # renamed away between our open and our lock: reopen
            for line in lines:
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
            return
        finally:
            os.close(fd)  # also releases the shared lock
    raise OSError(f"could not append to {path}: it kept being drained")


def _parse_line(raw: bytes) -> dict | None:
    """A spool line as an event dict, or None when it is torn or malformed."""
    if not raw.endswith(b"\n"):
        return None
    from geode.kernel import fastjson

    try:
        obj = fastjson.loads(raw.decode("utf-8"))
    except ValueError:  # fastjson.JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    if not isinstance(obj, dict):
        return None
    event_id = obj.get("event_id")
    if not isinstance(event_id, str) or len(event_id) != 32:
        return None
    try:
        int(event_id, 16)
    except ValueError:
        return None
    if not isinstance(obj.get("kind"), str) or not obj["kind"]:
        return None
    ev: dict = {}
    try:
        for name in EVENT_FIELDS:
            value = obj.get(name)
            if name in _INT_FIELDS:
                ev[name] = int(value or 0)
            elif name in _FLOAT_FIELDS:
                if value is None:
                    return None  # a float field is required (float(None) would be the TypeError below)
                ev[name] = float(value)
            else:
                ev[name] = "" if value is None else str(value)
    except (TypeError, ValueError):
        return None
    return ev


def _claim(path: str, wait_s: float) -> int | None:
    """Open and exclusively lock a ``.draining`` file; None if another drainer has it or it
    is already gone (drained and deleted by someone else)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    if fcntl is not None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # An appender finishing its write (microseconds) or another drainer (longer).
                if time.monotonic() > deadline:
                    os.close(fd)
                    return None
                time.sleep(0.002)
    if os.fstat(fd).st_nlink == 0:  # another drainer finished it while we waited
        os.close(fd)
        return None
    return fd


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def drain(settings, insert_rows, claim_wait_s: float = 2.0) -> dict:
    """Move spooled events into the ledger through ``insert_rows(events) -> new_count``.

    ``insert_rows`` must insert all events in one transaction, ignoring event ids already
    present, and raise on failure (the file is then kept for the next drain). Returns
    ``{"ingested": lines taken, "new": rows that were not present yet, "rejected": torn or
    malformed lines moved to spool/rejected.jsonl, "files": spool files consumed}``.
    ``claim_wait_s`` bounds the wait for a file another process has locked (the hook passes a
    few milliseconds; a file it could not claim is left for the next drain).
    """
    report = {"ingested": 0, "new": 0, "rejected": 0, "files": 0}
    spool_dir = str(settings.spool_dir)
    if not os.path.isdir(spool_dir):
        return report
    src = spool_path(settings)
    try:
        if os.stat(src).st_size > 0:
            dst = os.path.join(spool_dir, f"events.{os.getpid()}.{os.urandom(4).hex()}.draining")
            os.rename(src, dst)
    except FileNotFoundError:
        pass  # nothing spooled, or another drainer just took it
    names = sorted(n for n in os.listdir(spool_dir) if n.startswith("events.") and n.endswith(".draining"))
    for name in names:
        path = os.path.join(spool_dir, name)
        fd = _claim(path, claim_wait_s)
        if fd is None:
            continue
        try:
            data = _read_all(fd)
            events: list[dict] = []
            bad: list[bytes] = []
            for raw in data.splitlines(keepends=True):
                if not raw.strip():
                    continue
                ev = _parse_line(raw)
                if ev is None:
                    bad.append(raw if raw.endswith(b"\n") else raw + b"\n")
                else:
                    events.append(ev)
            if events:
                report["new"] += int(insert_rows(events) or 0)
            if bad:
                rfd = os.open(os.path.join(spool_dir, REJECTED_NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(rfd, b"".join(bad))
                    os.fsync(rfd)
                finally:
                    os.close(rfd)
            os.unlink(path)
            report["ingested"] += len(events)
            report["rejected"] += len(bad)
            report["files"] += 1
        finally:
            os.close(fd)
    return report


def drain_spool_report(settings, conn: sqlite3.Connection | None = None) -> dict:
    """``drain`` into a SQLite ledger through ``sqlite3``; see ``drain`` for the report."""
    own = conn is None
    db = connect(settings, timeout_ms=max(settings.lock_budget_ms, 5000)) if conn is None else conn
    try:
        return drain(settings, lambda events: _insert_sqlite(db, [_row(ev) for ev in events]))
    finally:
        if own:
            db.close()


def drain_spool(settings, conn: sqlite3.Connection | None = None) -> int:
    """Drain the spool into the SQLite ledger; returns the number of event lines ingested.

    Torn or malformed lines are never silently dropped: they go to ``spool/rejected.jsonl``
    (use ``drain_spool_report`` for that count). For a PostgreSQL ledger use
    ``models.ingest_spool_into``.
    """
    return drain_spool_report(settings, conn)["ingested"]


def rejected_count(settings) -> int:
    """Lines in ``spool/rejected.jsonl`` (reports surface them: nothing disappears quietly)."""
    try:
        with open(os.path.join(str(settings.spool_dir), REJECTED_NAME), "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def pending_count(settings) -> int:
    """Event lines still waiting in the spool (including unfinished drains)."""
    spool_dir = str(settings.spool_dir)
    try:
        names = os.listdir(spool_dir)
    except FileNotFoundError:
        return 0
    total = 0
    for name in names:
        if name == SPOOL_NAME or (name.startswith("events.") and name.endswith(".draining")):
            try:
                with open(os.path.join(spool_dir, name), "rb") as fh:
                    total += sum(1 for _ in fh)
            except FileNotFoundError:
                pass
    return total
