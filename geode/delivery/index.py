"""The hook's binding index: which crystal is bound to which action by which terms.

Why an index: the hook runs before every tool call. Re-reading every file on every call
(what the original product did: docs/DESIGN.md, "Lessons") costs about five interpreter starts at 2,000 crystals. Here
a SQLite file holds each crystal's binding and a table of term keys, so finding the
candidates for an action is one indexed query whatever the store's size.

Why it is never stale:
- the text delivered is always read from the file at delivery time, and the file is
  re-parsed when its size or mtime differs from what the index saw, so an edit by any route
  is delivered in its new form on the next action (and a binding edited away stops firing);
- new, removed and renamed files change their folder's mtime, and every folder's mtime is
  checked on every call (a folder costs one ``stat``) while the store has at most
  ``sweep_folders`` (300) folders; beyond that a rotating slice of 300 plus the roots, so every
  folder within ``ceil(folders / 300)`` calls and the cost of a call stays flat;
- a file the agent writes through its own Write/Edit tools is marked dirty by the hook and
  re-checked on the following calls;
- a rotating sweep stats ``sweep_files`` files per call (all of them, on a store that size or
  smaller), which catches in-place edits by an editor to a binding that starts to match.

Term keys: the four-character piece of a term (lower-cased) that the fewest indexed terms
share; shorter terms are keyed by themselves. The action's text contributes its distinct substrings of each key length present in
the index (``meta.key_lengths``, kept up to date on every change), and SQLite checks
``instr(text, term)`` on the few rows that share a key before any row reaches Python, so the
work per call follows the length of the text, not the number of crystals (a shared prefix
such as ``npm `` costs C-level string checks, not Python objects).
"""

from __future__ import annotations

import marshal
import os
import time

from geode.delivery import match as _match
from geode.delivery.binding import parse_binding
from geode.kernel import fastjson, frontmatter
from geode.kernel.crystal import (
    NOTE_SUFFIXES,
    OUTSIDE_HOOK_SUBSET,
    SKIP_DIRS,
    NoteError,
    content_hash,
    extract_essence,
    name_is_utf8,
    parse_crystal_text,
    read_text,
    split_frontmatter,
)
from geode.kernel.errors import GeodeError
from geode.kernel.sqlite import sqlite3

#: 10: grammar terms keyed by their longest uncommon word; 11: crystals.exempt (``control: never``);
#: 12: the file's mtime and size on the crystal's own row (no join per candidate: ``_ROW_SQL``), and
#: a grammar term's second word checked by the prefilter too (``grams.also``: ``_also_word``), and
#: ``sess`` WITHOUT ROWID (a new session's ~240 pending rows were written twice: table and key)
INDEX_VERSION = "12"
KEY_LEN = 4
SEP = "\x1f"
DIRTY_TTL_S = 600
#: The per-session table (``sess``: what a session was delivered, denied, left pending) keeps
#: the sessions active in the last ``SESS_KEEP_S`` seconds, at most ``SESS_KEEP_MAX`` of them
#: (the newest). Why: it grows by about a row per matched crystal per session and nothing else
#: deletes it; after 40,000 sessions a hook call cost 1.16-1.27x a fresh home's (issue 25). A
#: session that ended long ago never calls again; one that comes back after its state was
#: pruned is delivered to as a new session. Pruned off the hook's path (``prune_sessions``).
SESS_KEEP_S = 14 * 86400
SESS_KEEP_MAX = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS dirs(domain TEXT, dir TEXT, mtime_ns INTEGER, abs TEXT, PRIMARY KEY(domain, dir));
CREATE TABLE IF NOT EXISTS files(domain TEXT, path TEXT, dir TEXT, mtime_ns INTEGER, size INTEGER,
    PRIMARY KEY(domain, path));
CREATE INDEX IF NOT EXISTS files_dir ON files(domain, dir);
CREATE TABLE IF NOT EXISTS crystals(id INTEGER PRIMARY KEY, domain TEXT, path TEXT, name TEXT,
    deliver TEXT, on_ TEXT, who TEXT, terms TEXT, salience REAL, essence_len INTEGER, essence_hash TEXT,
    exempt INTEGER DEFAULT 0, mtime_ns INTEGER, size INTEGER, UNIQUE(domain, path));
CREATE TABLE IF NOT EXISTS grams(key TEXT, action TEXT, term TEXT, crystal INTEGER, view TEXT, orig TEXT,
    also TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS grams_key ON grams(action, key, view, term, also, orig, crystal);
CREATE INDEX IF NOT EXISTS grams_crystal ON grams(crystal);
CREATE TABLE IF NOT EXISTS gramfreq(gram TEXT PRIMARY KEY, n INTEGER);
CREATE TABLE IF NOT EXISTS termfreq(term TEXT PRIMARY KEY, n INTEGER);
CREATE TABLE IF NOT EXISTS dirty(domain TEXT, path TEXT, since REAL, PRIMARY KEY(domain, path));
CREATE TABLE IF NOT EXISTS subset_out(domain TEXT, path TEXT, line INTEGER, reason TEXT, crystal INTEGER,
    PRIMARY KEY(domain, path));
CREATE TABLE IF NOT EXISTS sess(session TEXT, kind TEXT, item TEXT, ts REAL, n INTEGER DEFAULT 0,
    PRIMARY KEY(session, kind, item)) WITHOUT ROWID;
"""


class IndexBuilding(GeodeError):
    """The first build of a large index runs in the background (``index_build``): the hook
    answers nothing this call and records an ``index_building`` row."""

    def __init__(self, state: dict):
        super().__init__(f"the binding index is building in the background ({state.get('state')})")
        self.state = state


def is_busy(exc: BaseException) -> bool:
    """Whether a SQLite error is another process holding a lock (SQLITE_BUSY or SQLITE_LOCKED),
    as opposed to a bug or a broken file."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (5, 6)
    msg = str(exc)
    return "locked" in msg or "busy" in msg


def index_path(settings) -> str:
    """One index per set of domains (a one-off ``--store`` gets its own)."""
    ident = SEP.join(f"{k}={v}" for k, v in sorted(settings.domains.items()))
    return os.path.join(settings.index_dir, f"bindings-{crc32(ident.encode()):08x}.sqlite")


#: The CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) of each byte value: zlib's table.
_CRC_TABLE = (
    0x00000000,
    0x77073096,
    0xEE0E612C,
    0x990951BA,
    0x076DC419,
    0x706AF48F,
    0xE963A535,
    0x9E6495A3,
    0x0EDB8832,
    0x79DCB8A4,
    0xE0D5E91E,
    0x97D2D988,
    0x09B64C2B,
    0x7EB17CBD,
    0xE7B82D07,
    0x90BF1D91,
    0x1DB71064,
    0x6AB020F2,
    0xF3B97148,
    0x84BE41DE,
    0x1ADAD47D,
    0x6DDDE4EB,
    0xF4D4B551,
    0x83D385C7,
    0x136C9856,
    0x646BA8C0,
    0xFD62F97A,
    0x8A65C9EC,
    0x14015C4F,
    0x63066CD9,
    0xFA0F3D63,
    0x8D080DF5,
    0x3B6E20C8,
    0x4C69105E,
    0xD56041E4,
    0xA2677172,
    0x3C03E4D1,
    0x4B04D447,
    0xD20D85FD,
    0xA50AB56B,
    0x35B5A8FA,
    0x42B2986C,
    0xDBBBC9D6,
    0xACBCF940,
    0x32D86CE3,
    0x45DF5C75,
    0xDCD60DCF,
    0xABD13D59,
    0x26D930AC,
    0x51DE003A,
    0xC8D75180,
    0xBFD06116,
    0x21B4F4B5,
    0x56B3C423,
    0xCFBA9599,
    0xB8BDA50F,
    0x2802B89E,
    0x5F058808,
    0xC60CD9B2,
    0xB10BE924,
    0x2F6F7C87,
    0x58684C11,
    0xC1611DAB,
    0xB6662D3D,
    0x76DC4190,
    0x01DB7106,
    0x98D220BC,
    0xEFD5102A,
    0x71B18589,
    0x06B6B51F,
    0x9FBFE4A5,
    0xE8B8D433,
    0x7807C9A2,
    0x0F00F934,
    0x9609A88E,
    0xE10E9818,
    0x7F6A0DBB,
    0x086D3D2D,
    0x91646C97,
    0xE6635C01,
    0x6B6B51F4,
    0x1C6C6162,
    0x856530D8,
    0xF262004E,
    0x6C0695ED,
    0x1B01A57B,
    0x8208F4C1,
    0xF50FC457,
    0x65B0D9C6,
    0x12B7E950,
    0x8BBEB8EA,
    0xFCB9887C,
    0x62DD1DDF,
    0x15DA2D49,
    0x8CD37CF3,
    0xFBD44C65,
    0x4DB26158,
    0x3AB551CE,
    0xA3BC0074,
    0xD4BB30E2,
    0x4ADFA541,
    0x3DD895D7,
    0xA4D1C46D,
    0xD3D6F4FB,
    0x4369E96A,
    0x346ED9FC,
    0xAD678846,
    0xDA60B8D0,
    0x44042D73,
    0x33031DE5,
    0xAA0A4C5F,
    0xDD0D7CC9,
    0x5005713C,
    0x270241AA,
    0xBE0B1010,
    0xC90C2086,
    0x5768B525,
    0x206F85B3,
    0xB966D409,
    0xCE61E49F,
    0x5EDEF90E,
    0x29D9C998,
    0xB0D09822,
    0xC7D7A8B4,
    0x59B33D17,
    0x2EB40D81,
    0xB7BD5C3B,
    0xC0BA6CAD,
    0xEDB88320,
    0x9ABFB3B6,
    0x03B6E20C,
    0x74B1D29A,
    0xEAD54739,
    0x9DD277AF,
    0x04DB2615,
    0x73DC1683,
    0xE3630B12,
    0x94643B84,
    0x0D6D6A3E,
    0x7A6A5AA8,
    0xE40ECF0B,
    0x9309FF9D,
    0x0A00AE27,
    0x7D079EB1,
    0xF00F9344,
    0x8708A3D2,
    0x1E01F268,
    0x6906C2FE,
    0xF762575D,
    0x806567CB,
    0x196C3671,
    0x6E6B06E7,
    0xFED41B76,
    0x89D32BE0,
    0x10DA7A5A,
    0x67DD4ACC,
    0xF9B9DF6F,
    0x8EBEEFF9,
    0x17B7BE43,
    0x60B08ED5,
    0xD6D6A3E8,
    0xA1D1937E,
    0x38D8C2C4,
    0x4FDFF252,
    0xD1BB67F1,
    0xA6BC5767,
    0x3FB506DD,
    0x48B2364B,
    0xD80D2BDA,
    0xAF0A1B4C,
    0x36034AF6,
    0x41047A60,
    0xDF60EFC3,
    0xA867DF55,
    0x316E8EEF,
    0x4669BE79,
    0xCB61B38C,
    0xBC66831A,
    0x256FD2A0,
    0x5268E236,
    0xCC0C7795,
    0xBB0B4703,
    0x220216B9,
    0x5505262F,
    0xC5BA3BBE,
    0xB2BD0B28,
    0x2BB45A92,
    0x5CB36A04,
    0xC2D7FFA7,
    0xB5D0CF31,
    0x2CD99E8B,
    0x5BDEAE1D,
    0x9B64C2B0,
    0xEC63F226,
    0x756AA39C,
    0x026D930A,
    0x9C0906A9,
    0xEB0E363F,
    0x72076785,
    0x05005713,
    0x95BF4A82,
    0xE2B87A14,
    0x7BB12BAE,
    0x0CB61B38,
    0x92D28E9B,
    0xE5D5BE0D,
    0x7CDCEFB7,
    0x0BDBDF21,
    0x86D3D2D4,
    0xF1D4E242,
    0x68DDB3F8,
    0x1FDA836E,
    0x81BE16CD,
    0xF6B9265B,
    0x6FB077E1,
    0x18B74777,
    0x88085AE6,
    0xFF0F6A70,
    0x66063BCA,
    0x11010B5C,
    0x8F659EFF,
    0xF862AE69,
    0x616BFFD3,
    0x166CCF45,
    0xA00AE278,
    0xD70DD2EE,
    0x4E048354,
    0x3903B3C2,
    0xA7672661,
    0xD06016F7,
    0x4969474D,
    0x3E6E77DB,
    0xAED16A4A,
    0xD9D65ADC,
    0x40DF0B66,
    0x37D83BF0,
    0xA9BCAE53,
    0xDEBB9EC5,
    0x47B2CF7F,
    0x30B5FFE9,
    0xBDBDF21C,
    0xCABAC28A,
    0x53B39330,
    0x24B4A3A6,
    0xBAD03605,
    0xCDD70693,
    0x54DE5729,
    0x23D967BF,
    0xB3667A2E,
    0xC4614AB8,
    0x5D681B02,
    0x2A6F2B94,
    0xB40BBE37,
    0xC30C8EA1,
    0x5A05DF1B,
    0x2D02EF8D,
)


def crc32(data: bytes) -> int:
    """``zlib.crc32(data)``, in Python: the index's name is the CRC-32 of its domains, and
    loading ``zlib`` (and ``libz`` with it) cost the hook about 0.2-0.3 ms a call to hash some
    sixty bytes (issue 25). The same polynomial and the same value, so an index built by an
    older geode keeps its name."""
    table = _CRC_TABLE
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def text_keys(text_l: str, lengths: tuple[int, ...] = (KEY_LEN,)) -> list[str]:
    """Every distinct substring of ``text_l`` whose length is one of the key lengths in use."""
    n = len(text_l)
    keys: set[str] = set()
    for k in lengths:
        keys.update(text_l[i : i + k] for i in range(n - k + 1))
    return list(keys)


#: A crystal's row with the file's mtime and size as they were when it was indexed (``_load_file``
#: writes them with the ``files`` row, in the same transaction). Why on the crystal's own row and
#: not joined from ``files``: a command matching 240 crystals of a 100,000-crystal store read 240
#: more leaf pages of ``files`` and of its (domain, path) index for the join, about 3 ms a call
#: (issue 25), against a store of 10,000 whose smaller tables share pages between the matches.
_ROW_SQL = (
    "SELECT c.id, c.domain, c.path, c.name, c.deliver, c.on_, c.who, c.terms, c.salience, c.essence_len, "
    "c.essence_hash, c.mtime_ns, c.size, c.exempt FROM crystals c"
)


class CrystalRow:
    """A crystal as the index knows it, with the file's size and mtime at indexing: when a
    ``stat`` still shows those, the binding, salience and essence length here are current and
    the file need not be parsed (``Index.is_current``)."""

    __slots__ = (
        "id",
        "domain",
        "path",
        "name",
        "deliver",
        "on",
        "who",
        "terms",
        "salience",
        "essence_len",
        "essence_hash",
        "mtime_ns",
        "size",
        "spec",
        "exempt",
    )

    def __init__(self, row):
        self.id, self.domain, self.path, self.name = row[0], row[1], row[2], row[3]
        self.deliver = tuple(row[4].split(",")) if row[4] else ()
        self.on = tuple(row[5].split(",")) if row[5] else ()
        self.who = tuple(row[6].split(",")) if row[6] else ()
        self.terms = tuple(row[7].split(SEP)) if row[7] else ()
        self.salience = row[8] if row[8] is not None else 0.5
        self.essence_len = row[9] or 0 if len(row) > 9 else 0
        self.essence_hash = (row[10] or "") if len(row) > 10 else ""
        self.mtime_ns = row[11] if len(row) > 11 else None
        self.size = row[12] if len(row) > 12 else None
        self.spec = 0.0
        self.exempt = bool(row[13]) if len(row) > 13 else False  # ``control: never``

    @property
    def crystal_id(self) -> str:
        return f"{self.domain}:{self.path}"


class Index:
    """One open connection to the binding index; cheap to create per hook call.

    Two budgets (issue 22): a read waits up to ``index_read_ms`` for a lock (rare in WAL mode: a
    checkpoint, the first open of the WAL), a write only ``lock_budget_ms``. A hook whose refresh
    cannot take the write lock reads the index as it is (``snapshot`` is then True): it may miss
    a change made in the last moments, never deliver a wrong text (that is always read from the
    file). ``busy_ms`` (the commands: reindex, doctor) sets both."""

    def __init__(self, settings, busy_ms: int | None = None):
        self.settings = settings
        self.path = index_path(settings)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        if busy_ms is None:
            self.write_ms = settings.lock_budget_ms
            self.read_ms = max(settings.index_read_ms, self.write_ms)
        else:
            self.write_ms = self.read_ms = busy_ms
        busy = self.read_ms
        self.conn = sqlite3.connect(self.path, timeout=busy / 1000.0, isolation_level=None, check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout={int(busy)}")
        self.snapshot = False  # a refresh could not take the write lock: the index was read as it was
        # Derived data: an application crash cannot corrupt a WAL database even with
        # synchronous=OFF; a power cut might, and then the hook rebuilds it (see ``hook.py``).
        # NORMAL costs ~1 ms per hook call (the commit and the checkpoint at close).
        try:
            self.conn.execute("PRAGMA synchronous=OFF")
        except sqlite3.OperationalError as exc:  # the first statement opens the WAL: it may find it held
            if not is_busy(exc):
                raise  # a busy index is said by the first read, which the hook turns into an index_busy row
        self._queue: list[tuple[str, list]] = []
        self._pending_grams: list | None = None
        self._short: tuple[int, ...] | None = None  # key lengths, read once
        self.changed: list[str] = []  # crystal ids whose files were re-read in this call

    def close(self) -> None:
        self.commit()
        self.conn.close()

    def _begin_write(self) -> bool:
        """``BEGIN IMMEDIATE`` within the write budget; False when another process holds the
        write lock that long (any other error is raised)."""
        c = self.conn
        other = self.write_ms != self.read_ms
        if other:
            c.execute(f"PRAGMA busy_timeout={int(self.write_ms)}")
        try:
            c.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            return False
        finally:
            if other:
                c.execute(f"PRAGMA busy_timeout={int(self.read_ms)}")

    # -- schema and build ----------------------------------------------------
    def _meta(self, key: str) -> str | None:
        try:
            row = self.conn.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if is_busy(exc):  # locked past the read budget: not "unbuilt", which would start a build
                raise
            return None  # no meta table yet: not built
        return row[0] if row else None

    def is_built(self) -> bool:
        return self._meta("version") == INDEX_VERSION and self._meta("built") is not None

    def ensure(self) -> bool:
        """Build the index when it is missing or of another version; True when it was built now."""
        if self.is_built():
            return False
        self.build()
        return True

    def build(self) -> dict:
        """Scan every domain from nothing. Returns counts."""
        if self.settings.team_rules:  # the notes derived from a team's own rules, current first
            from geode.delivery import team_sync  # only with [team_rules]: its readers cost every call

            team_sync.sync(self.settings)
        c = self.conn
        mode = c.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=NORMAL")
        if not self._begin_write():
            raise sqlite3.OperationalError("database is locked: another process writes the binding index")
        try:
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    c.execute(stmt)
            if self._meta("version") != INDEX_VERSION:
                # ``sess`` too: its state is best effort, and version 12 keeps it WITHOUT ROWID
                for table in ("meta", "dirs", "files", "crystals", "grams", "dirty", "termfreq", "sess"):
                    c.execute(f"DROP TABLE IF EXISTS {table}")
                for stmt in _SCHEMA.strip().split(";"):
                    if stmt.strip():
                        c.execute(stmt)
            for table in ("meta", "dirs", "files", "crystals", "grams", "dirty", "termfreq"):
                c.execute(f"DELETE FROM {table}")
            self._short = None
            counts = {"files": 0, "crystals": 0, "problems": 0}
            self._pending_grams = []
            try:
                for domain, root in self.settings.domains.items():
                    if os.path.isdir(root):
                        self._scan_dir(domain, root, "", counts, recursive=True)
                self._insert_pending_grams()
            finally:
                self._pending_grams = None
            c.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (INDEX_VERSION,))
            c.execute("INSERT OR REPLACE INTO meta VALUES('built', ?)", (repr(time.time()),))
            c.execute("INSERT OR REPLACE INTO meta VALUES('cursor', '0')")
            if self._meta("key_lengths") is None:
                c.execute("INSERT OR REPLACE INTO meta VALUES('key_lengths', ?)", (str(KEY_LEN),))
            c.execute("COMMIT")
        except BaseException:  # clean up, then re-raise: nothing is caught here
            c.execute("ROLLBACK")
            raise
        self._short = None
        self._write_dirs()
        return counts

    # -- scanning ------------------------------------------------------------
    def _scan_dir(self, domain: str, root: str, rel_dir: str, counts: dict, recursive: bool) -> None:
        """Bring one folder's rows in line with the disk, and its subfolders' (all of them when
        ``recursive``, else the new ones); the caller holds a write transaction. A loop over a
        list, not recursion: a store nested 1,100 folders deep is no ``RecursionError``."""
        todo = self._scan_one(domain, root, rel_dir, counts, recursive)
        while todo:
            todo.extend(self._scan_one(domain, root, todo.pop(), counts, True))

    def _scan_one(self, domain: str, root: str, rel_dir: str, counts: dict, recursive: bool) -> list[str]:
        """One folder's rows in line with the disk; the subfolders still to scan."""
        c = self.conn
        descend: list[str] = []
        full = os.path.join(root, rel_dir) if rel_dir else root
        try:
            st = os.stat(full)
            entries = list(os.scandir(full))
        except OSError as exc:
            self._drop_dir(domain, rel_dir)
            if not isinstance(exc, FileNotFoundError):  # there, but not to be entered: counted
                counts["problems"] = counts.get("problems", 0) + 1
                counts["unentered"] = counts.get("unentered", 0) + 1
            return descend
        c.execute("INSERT OR REPLACE INTO dirs VALUES(?,?,?,?)", (domain, rel_dir, st.st_mtime_ns, full))
        known = {
            row[0]: (row[1], row[2])
            for row in c.execute("SELECT path, mtime_ns, size FROM files WHERE domain=? AND dir=?", (domain, rel_dir))
        }
        known_dirs = {
            row[0]
            for row in c.execute(
                "SELECT dir FROM dirs WHERE domain=? AND dir LIKE ? ESCAPE '\\'", (domain, _like_prefix(rel_dir))
            )
            if row[0] != rel_dir and "/" not in row[0][len(rel_dir) + (1 if rel_dir else 0) :]
        }
        seen_files = set()
        seen_dirs = set()
        for e in entries:
            name = e.name
            if not name_is_utf8(name):  # no row can hold it; lint and doctor name it
                counts["problems"] = counts.get("problems", 0) + 1
                counts["bad_names"] = counts.get("bad_names", 0) + 1
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                if e.is_dir(follow_symlinks=False):
                    if name in SKIP_DIRS:
                        continue
                    seen_dirs.add(rel)
                    if recursive or rel not in known_dirs:
                        descend.append(rel)
                    continue
                if not name.endswith(NOTE_SUFFIXES) or name.startswith("."):
                    continue
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            seen_files.add(rel)
            counts["files"] = counts.get("files", 0) + 1
            prev = known.get(rel)
            if prev is not None and prev == (est.st_mtime_ns, est.st_size):
                continue
            self._load_file(domain, root, rel, rel_dir, est.st_mtime_ns, est.st_size, counts)
        for rel in set(known) - seen_files:
            self._drop_file(domain, rel)
        for rel in known_dirs - seen_dirs:
            self._drop_dir(domain, rel)
        return descend

    def _drop_dir(self, domain: str, rel_dir: str) -> None:
        c = self.conn
        like = _like_prefix(rel_dir)
        for (path,) in c.execute(
            "SELECT path FROM files WHERE domain=? AND (dir=? OR dir LIKE ? ESCAPE '\\')", (domain, rel_dir, like)
        ).fetchall():
            self._drop_file(domain, path)
        c.execute("DELETE FROM dirs WHERE domain=? AND (dir=? OR dir LIKE ? ESCAPE '\\')", (domain, rel_dir, like))

    def _drop_file(self, domain: str, rel: str) -> None:
        c = self.conn
        c.execute("DELETE FROM files WHERE domain=? AND path=?", (domain, rel))
        c.execute("DELETE FROM subset_out WHERE domain=? AND path=?", (domain, rel))
        self._forget_crystal(domain, rel)

    def _load_file(self, domain, root, rel, rel_dir, mtime_ns, size, counts=None, parsed=None):
        """(Re)index one file; returns the parsed crystal text or None."""
        c = self.conn
        c.execute("INSERT OR REPLACE INTO files VALUES(?,?,?,?,?)", (domain, rel, rel_dir, mtime_ns, size))
        c.execute("DELETE FROM subset_out WHERE domain=? AND path=?", (domain, rel))
        self._forget_crystal(domain, rel)
        self.changed.append(f"{domain}:{rel}")
        if parsed is None:
            try:
                parsed = parse_crystal_text(read_text(root, rel, self.settings.max_file_bytes), rel)
            except NoteError as exc:
                if exc.code == OUTSIDE_HOOK_SUBSET:
                    # the hook's reader declined it: remembered, so that the next refresh off the
                    # hook reads it with the full parser (it is not changed again to be noticed)
                    c.execute(
                        "INSERT OR REPLACE INTO subset_out VALUES(?,?,?,?,NULL)", (domain, rel, exc.line, exc.message)
                    )
                if counts is not None:
                    counts["problems"] = counts.get("problems", 0) + 1
                return None
        crystal = parsed.frontmatter.get("crystal")
        if not isinstance(crystal, dict):
            return parsed
        b = parse_binding(crystal, parsed.fm_lines, self.settings.known_agents)
        if not b.deliver:
            return parsed
        outside = [(line, msg) for line, code, msg in parsed.fm_warnings if code == OUTSIDE_HOOK_SUBSET]
        if outside:  # read here by the full parser; the hook drops it the next time it changes
            c.execute("INSERT OR REPLACE INTO subset_out VALUES(?,?,?,?,1)", (domain, rel, *outside[0]))
        name = parsed.frontmatter.get("name") or rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        try:
            sal = float(parsed.frontmatter.get("salience", 0.5))
        except (TypeError, ValueError):
            sal = 0.5
        essence = parsed.essence or ""
        cur = c.execute(
            "INSERT INTO crystals(domain, path, name, deliver, on_, who, terms, salience, essence_len, essence_hash, "
            "exempt, mtime_ns, size) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                domain,
                rel,
                str(name),
                ",".join(b.deliver),
                ",".join(b.on),
                ",".join(b.who),
                SEP.join(b.terms),
                sal,
                len(essence),
                content_hash(essence) if essence else "",
                int(b.exempt),
                mtime_ns,
                size,
            ),
        )
        cid = cur.lastrowid
        if b.terms:
            self._count_terms(b.terms, +1)
        if "act" in b.deliver and b.on and b.terms:
            entries = [
                (a, checked, view, t, cid, also) for a in b.on for t in b.terms for view, checked, also in _views(t, a)
            ]
            if self._pending_grams is not None:  # a build: keys are chosen once every term is known
                self._pending_grams.extend(entries)
            else:
                rows = [
                    (self._key_for(checked), a, checked, cid_, view, t, also)
                    for a, checked, view, t, cid_, also in entries
                ]
                c.executemany("INSERT INTO grams VALUES(?,?,?,?,?,?,?)", rows)
            short = {len(e[1]) for e in entries if len(e[1]) < KEY_LEN}
            if short - set(self.key_lengths()):
                self._set_key_lengths(tuple(sorted(set(self.key_lengths()) | short)))
        if counts is not None:
            counts["crystals"] = counts.get("crystals", 0) + 1
        return parsed

    def _forget_crystal(self, domain: str, rel: str) -> None:
        """Remove a crystal's rows (its grams, its share of the term counts)."""
        c = self.conn
        row = c.execute("SELECT id, terms FROM crystals WHERE domain=? AND path=?", (domain, rel)).fetchone()
        if row:
            c.execute("DELETE FROM grams WHERE crystal=?", (row[0],))
            c.execute("DELETE FROM crystals WHERE id=?", (row[0],))
            if row[1] and self._pending_grams is None:
                self._count_terms(tuple(row[1].split(SEP)), -1)
            self.changed.append(f"{domain}:{rel}")

    def _count_terms(self, terms, delta: int) -> None:
        """``termfreq``: how many crystals carry each term (the rarity half of specificity).
        During a build the counts are made once at the end."""
        if self._pending_grams is not None:
            return
        uniq = list(dict.fromkeys(terms))
        if delta > 0:
            self.conn.executemany(
                "INSERT INTO termfreq VALUES(?, 1) ON CONFLICT(term) DO UPDATE SET n = n + 1", [(t,) for t in uniq]
            )
        else:
            self.conn.executemany("UPDATE termfreq SET n = n - 1 WHERE term = ?", [(t,) for t in uniq])
            # by key, not a scan: the table holds every distinct term of the store
            self.conn.executemany("DELETE FROM termfreq WHERE term = ? AND n <= 0", [(t,) for t in uniq])

    # -- term keys ---------------------------------------------------------------
    # A term is found through one of its 4-character pieces: any piece works (if the term is
    # in the text, so is every piece of it), so each term is keyed by the piece that the
    # fewest indexed terms share. Keyed by prefix, the 40 terms starting "npm " came back for
    # every npm command and were thrown away one by one (5,600 rows at 100,000 crystals).
    def _insert_pending_grams(self) -> None:
        pending = self._pending_grams
        assert pending is not None, "called only by rebuild, which collects the pending grams"
        freq: dict[str, int] = {}
        for t in {e[1] for e in pending}:
            for g in {t[i : i + KEY_LEN] for i in range(len(t) - KEY_LEN + 1)}:
                freq[g] = freq.get(g, 0) + 1
        self.conn.execute("DELETE FROM gramfreq")
        self.conn.executemany("INSERT INTO gramfreq VALUES(?,?)", freq.items())
        keys: dict[str, str] = {}
        rows = []
        for a, t, view, orig, cid, also in pending:
            k = keys.get(t)
            if k is None:
                k = keys[t] = _rarest(t, freq)
            rows.append((k, a, t, cid, view, orig, also))
        self.conn.executemany("INSERT INTO grams VALUES(?,?,?,?,?,?,?)", rows)
        counts: dict[str, int] = {}  # every crystal's terms, whatever its channel
        for (terms,) in self.conn.execute("SELECT terms FROM crystals WHERE terms != ''"):
            for t in set(terms.split(SEP)):
                counts[t] = counts.get(t, 0) + 1
        self.conn.execute("DELETE FROM termfreq")
        self.conn.executemany("INSERT INTO termfreq VALUES(?,?)", counts.items())

    def _key_for(self, term: str) -> str:
        """The key of a term indexed outside a build (a changed file): the rarest piece by the
        counts of the last build; a piece it never saw counts as rare."""
        if len(term) <= KEY_LEN:
            return term
        pieces = list({term[i : i + KEY_LEN] for i in range(len(term) - KEY_LEN + 1)})
        marks = ",".join("?" * len(pieces))
        freq = dict(self.conn.execute(f"SELECT gram, n FROM gramfreq WHERE gram IN ({marks})", pieces).fetchall())
        return _rarest(term, freq)

    # -- freshness -----------------------------------------------------------
    def refresh(self) -> int:
        """Catch up with the disk: changed folders, dirty files, one sweep slice. Returns files re-read."""
        if self.settings.team_rules:  # a changed team rule rewrites its derived note, seen below
            from geode.delivery import team_sync  # lazily: a store without team rules never loads it

            team_sync.sync(self.settings)
        c = self.conn
        before = len(self.changed)
        stale_dirs = []
        stat = os.stat
        # the hottest loop of a hook call on a large store: one stat per folder, kept bare
        # (absolute paths stored at scan time; ~2 microseconds a folder)
        for domain, rel_dir, mtime, full in self._folders_to_check():
            try:
                if stat(full).st_mtime_ns == mtime:
                    continue
            except OSError:
                pass
            if domain in self.settings.domains:
                stale_dirs.append((domain, rel_dir))
        dirty = c.execute("SELECT domain, path, since FROM dirty").fetchall()
        slice_rows = self._sweep_slice()
        suspects = []
        now = time.time()
        for domain, rel, mtime, size in slice_rows + [
            (d, p, *(self._file_stat_row(d, p) or (None, None))) for d, p, _s in dirty
        ]:
            root = self.settings.domains.get(domain)
            if root is None:
                continue
            try:
                st = os.stat(os.path.join(root, rel))
                cur = (st.st_mtime_ns, st.st_size)
            except OSError:
                cur = None
            if cur != (mtime, size):
                suspects.append((domain, rel, cur))
        if frontmatter.FULL_PARSER:  # off the hook: what the hook's reader declined is read in full now
            known = {(d, p) for d, p, _cur in suspects}
            for domain, rel in c.execute("SELECT domain, path FROM subset_out WHERE crystal IS NULL").fetchall():
                root = self.settings.domains.get(domain)
                if root is None or (domain, rel) in known:
                    continue
                try:
                    st = os.stat(os.path.join(root, rel))
                    suspects.append((domain, rel, (st.st_mtime_ns, st.st_size)))
                except OSError:
                    suspects.append((domain, rel, None))
        expired = [(d, p) for d, p, since in dirty if now - since > DIRTY_TTL_S]
        if not stale_dirs and not suspects and not expired:
            return 0
        if not self._begin_write():
            self.snapshot = True  # another process writes the index: read it as it is this call
            return 0
        try:
            counts: dict = {}
            for domain, rel_dir in stale_dirs:
                self._scan_dir(domain, self.settings.domains[domain], rel_dir, counts, recursive=False)
            for domain, rel, cur in suspects:
                root = self.settings.domains[domain]
                if cur is None:
                    self._drop_file(domain, rel)
                else:
                    rel_dir = rel.rsplit("/", 1)[0] if "/" in rel else ""
                    self._load_file(domain, root, rel, rel_dir, cur[0], cur[1], counts)
            for d, p in expired:
                c.execute("DELETE FROM dirty WHERE domain=? AND path=?", (d, p))
            c.execute("COMMIT")
        except BaseException:  # clean up, then re-raise: nothing is caught here
            c.execute("ROLLBACK")
            raise
        self._short = None
        if stale_dirs:
            self._write_dirs()
        return len(self.changed) - before

    def _folders_to_check(self) -> list:
        """Every folder when the store has at most ``sweep_folders`` of them (new files are
        then seen on the very next call); otherwise one part of that many, in turn, plus each
        domain's root, so that the cost of a call stays flat as the store grows (a stat is
        about 1.3 microseconds a folder) and every folder is checked within
        ``ceil(folders / sweep_folders)`` calls. Files the agent writes itself are marked dirty
        and seen at once whatever the size."""
        n = self.settings.sweep_folders
        roots, parts = self._load_dirs(n)
        if len(parts) <= 1:
            return marshal.loads(parts[0]) if parts else []
        k = int(self._meta("dircursor") or 0) % len(parts)
        chosen = marshal.loads(parts[k])
        self._queue.append(("INSERT OR REPLACE INTO meta VALUES('dircursor', ?)", [(str((k + 1) % len(parts)),)]))
        return chosen + [r for r in roots if r not in chosen]

    # -- the folder list, as one marshal blob in parts ------------------------------------
    # Every hook call stats its folders (that is how new files are seen at once); reading the
    # 1,000 folder rows of a 100,000-note store from SQLite cost 0.8 ms of a 25 ms call, the
    # blob 0.1 ms. It is derived from the ``dirs`` table after each commit that changed it and
    # tagged with the build it belongs to; a stale or racing copy can only make a folder look
    # changed (a harmless rescan), never hide a change, because every entry it holds was true
    # in the table when it was written. Why in parts of ``sweep_folders`` rows, each its own
    # marshal string: a call checks one part, and decoding all 1,100 rows of a 100,000-crystal
    # store to use 300 was most of what the folder check cost beyond a 10,000-crystal store's
    # (issue 25); the outer blob holds the parts as bytes, which decode as one copy each.
    @property
    def _dirs_path(self) -> str:
        return self.path + ".dirs"

    def _load_dirs(self, part_rows: int) -> tuple[list, list[bytes]]:
        """(each domain's root row, the folder rows in parts of ``part_rows``, each a marshal
        string); one part holding every row when ``part_rows`` is 0 or covers them all."""
        built = self._meta("built")
        try:
            with open(self._dirs_path, "rb") as fh:
                tag, size, roots, parts = marshal.loads(fh.read())  # marshal.load(fh) reads in tiny pieces
            if tag == built and size == part_rows:
                return roots, parts
        except (OSError, EOFError, ValueError, TypeError):
            pass
        return self._write_dirs(built, part_rows)

    def _write_dirs(self, built: str | None = None, part_rows: int | None = None) -> tuple[list, list[bytes]]:
        if built is None:
            built = self._meta("built")
        if part_rows is None:
            part_rows = self.settings.sweep_folders
        rows = [tuple(r) for r in self.conn.execute("SELECT domain, dir, mtime_ns, abs FROM dirs ORDER BY domain, dir")]
        step = part_rows if 0 < part_rows < len(rows) else max(1, len(rows))
        parts = [marshal.dumps(rows[i : i + step]) for i in range(0, len(rows), step)]
        roots = [r for r in rows if r[1] == ""]
        tmp = f"{self._dirs_path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as fh:
                marshal.dump((built, part_rows, roots, parts), fh)
            os.replace(tmp, self._dirs_path)
        except OSError:
            pass  # only slower next time
        return roots, parts

    def _file_stat_row(self, domain, rel):
        return self.conn.execute("SELECT mtime_ns, size FROM files WHERE domain=? AND path=?", (domain, rel)).fetchone()

    def _sweep_slice(self) -> list:
        n = self.settings.sweep_files
        if n <= 0:
            return []
        c = self.conn
        cursor = int(self._meta("cursor") or 0)
        rows = c.execute(
            "SELECT rowid, domain, path, mtime_ns, size FROM files WHERE rowid > ? ORDER BY rowid LIMIT ?", (cursor, n)
        ).fetchall()
        if len(rows) < n:
            rows += c.execute(
                "SELECT rowid, domain, path, mtime_ns, size FROM files WHERE rowid <= ? ORDER BY rowid LIMIT ?",
                (cursor, n - len(rows)),
            ).fetchall()
        if rows:
            self._queue.append(("UPDATE meta SET v=? WHERE k='cursor'", [(str(rows[-1][0]),)]))
        return [r[1:] for r in rows]

    def mark_dirty(self, domain: str, rel: str) -> None:
        self._queue.append(("INSERT OR REPLACE INTO dirty VALUES(?,?,?)", [(domain, rel, time.time())]))

    def commit(self) -> bool:
        """Write the queued small updates (cursor, dirty marks, session state) in one
        transaction: one commit per hook call instead of five. False when the lock could not
        be had within the budget (the updates are best effort; nothing in the ledger depends
        on them)."""
        if not self._queue:
            return True
        queue, self._queue = self._queue, []
        try:
            if not self._begin_write():
                return False
        except sqlite3.OperationalError:
            return False
        try:
            for sql, rows in queue:
                self.conn.executemany(sql, rows)
            self.conn.execute("COMMIT")
            return True
        except sqlite3.Error:
            self.conn.execute("ROLLBACK")
            return False

    def reload(self, domain: str, rel: str):
        """Re-read one file if it changed since indexing; returns (parsed or None, changed)."""
        root = self.settings.domains[domain]
        try:
            st = os.stat(os.path.join(root, rel))
        except OSError:
            return None, True
        known = self._file_stat_row(domain, rel)
        try:
            parsed = parse_crystal_text(read_text(root, rel, self.settings.max_file_bytes), rel)
        except NoteError:
            parsed = None
        if known is not None and tuple(known) == (st.st_mtime_ns, st.st_size):
            return parsed, False
        try:
            if self._begin_write():  # else another process writes: deliver from the file, index later
                rel_dir = rel.rsplit("/", 1)[0] if "/" in rel else ""
                self._load_file(domain, root, rel, rel_dir, st.st_mtime_ns, st.st_size, parsed=parsed)
                self.conn.execute("COMMIT")
        except sqlite3.OperationalError:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.OperationalError:
                pass
        self._short = None
        return parsed, True

    # -- queries ---------------------------------------------------------------
    def key_lengths(self) -> tuple[int, ...]:
        """Key lengths present: KEY_LEN, plus the length of every shorter term (rare)."""
        if self._short is None:
            raw = self._meta("key_lengths")
            self._short = tuple(int(x) for x in raw.split(",")) if raw else (KEY_LEN,)
        return self._short

    def _set_key_lengths(self, lengths: tuple[int, ...]) -> None:
        """Only grows between builds: a stale extra length costs a few lookups, never a miss."""
        if KEY_LEN not in lengths:
            lengths = tuple(sorted(set(lengths) | {KEY_LEN}))
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES('key_lengths', ?)", (",".join(map(str, lengths)),))
        self._short = lengths

    def candidates(self, actions: tuple[str, ...], text: str, prepared=None) -> list[tuple[CrystalRow, str]]:
        """Crystals bound to any of ``actions`` with a term that fires on ``text`` (``match``),
        each with its most specific matching term (``row.spec``: ``match.specificity``).

        SQLite narrows the rows first: each term is keyed by a 4-character piece, and
        ``instr`` checks its key form (``match.Term.key``) against the action's normalised
        text, so only the few rows that can match reach Python, where the real rule decides."""
        if not text:
            return []
        p = prepared if prepared is not None else _match.prepare(actions, text)
        lengths = self.key_lengths()
        keys = set(text_keys(p.norm, lengths))
        if p.raw != p.norm:
            keys.update(text_keys(p.raw, lengths))
        marks = ",".join("?" * len(actions))
        hits = self.conn.execute(
            f"SELECT crystal, action, orig FROM grams WHERE action IN ({marks}) "
            "AND key IN (SELECT value FROM json_each(?)) "
            "AND ((view = 'n' AND instr(?, term) > 0 AND instr(?, also) > 0) OR (view != 'n' AND instr(?, term) > 0))",
            (*actions, fastjson.dumps(list(keys)), p.norm, p.norm, p.raw),
        ).fetchall()
        if not hits:
            return []
        compiled: dict[tuple[str, str], _match.Term] = {}
        verdict: dict[tuple[str, str], bool] = {}
        matched: dict[int, list[str]] = {}
        for cid, action, orig in hits:
            kind = "bash" if action in _match.BASH_KINDS else action
            ck = (orig, kind)
            ok = verdict.get(ck)
            if ok is None:
                term = compiled.get(ck)
                if term is None:
                    term = compiled[ck] = _match.compile_term(orig, action)
                ok = verdict[ck] = _match.matches(term, p)
            if ok:
                matched.setdefault(cid, []).append(orig)
        if not matched:
            return []
        terms = sorted({t for ts in matched.values() for t in ts})
        freq = dict(
            self.conn.execute(
                f"SELECT term, n FROM termfreq WHERE term IN ({','.join('?' * len(terms))})", terms
            ).fetchall()
        )
        keylen = {orig: term.length for (orig, _kind), term in compiled.items()}
        specs = {t: _match.specificity(keylen.get(t, len(t)), freq.get(t, 1)) for t in terms}
        rows = self.conn.execute(
            f"{_ROW_SQL} WHERE c.id IN ({','.join('?' * len(matched))})", tuple(matched)
        ).fetchall()
        out = []
        for r in rows:
            row = CrystalRow(r)
            best = max(matched[row.id], key=lambda t: (specs[t], len(t), t))
            row.spec = specs[best]
            out.append((row, best))
        return out

    def term_counts(self, terms) -> dict[str, int]:
        """How many crystals of the store carry each term."""
        terms = list(terms)
        if not terms:
            return {}
        return dict(
            self.conn.execute(
                f"SELECT term, n FROM termfreq WHERE term IN ({','.join('?' * len(terms))})", terms
            ).fetchall()
        )

    def rows_at(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], CrystalRow]:
        """The crystals at ``(domain, path)``, by that key (the team rules a glob attached)."""
        out: dict[tuple[str, str], CrystalRow] = {}
        for domain, path in keys:
            r = self.conn.execute(f"{_ROW_SQL} WHERE c.domain=? AND c.path=?", (domain, path)).fetchone()
            if r is not None:
                out[(domain, path)] = CrystalRow(r)
        return out

    def channel(self, channel: str) -> list[CrystalRow]:
        rows = self.conn.execute(
            f"{_ROW_SQL} WHERE ',' || c.deliver || ',' LIKE ? ORDER BY c.salience DESC, c.domain, c.path",
            (f"%,{channel},%",),
        ).fetchall()
        return [CrystalRow(r) for r in rows]

    # -- reading what is delivered ---------------------------------------------------
    def is_current(self, row: CrystalRow) -> bool:
        """One ``stat``: the file is as it was indexed, so the row's binding, salience and
        essence length hold and nothing needs parsing."""
        root = self.settings.domains.get(row.domain)
        if root is None or row.mtime_ns is None:
            return False
        try:
            st = os.stat(os.path.join(root, row.path))
        except OSError:
            return False
        return st.st_mtime_ns == row.mtime_ns and st.st_size == row.size

    def essence_of(self, row: CrystalRow) -> str | None:
        """The essence of a file that ``is_current``, read without parsing its frontmatter;
        None when the text is not what was indexed (its hash differs: an edit within the
        clock's resolution) or it cannot be read."""
        root = self.settings.domains.get(row.domain)
        if root is None:
            return None
        try:
            text = read_text(root, row.path, self.settings.max_file_bytes)
            _fm, _first, body, body_line = split_frontmatter(text, row.path)
        except NoteError:
            return None
        essence, _line, _problems = extract_essence(body, body_line)
        if not essence or content_hash(essence) != row.essence_hash:
            return None
        return essence

    def hook_unreadable(self) -> list[tuple[str, str, int, str, bool]]:
        """``(domain, path, line, reason, is_crystal)`` of the notes whose frontmatter the hook's
        standard-library reader declines: crystals read here by the full parser (delivered from
        this index until they change, then dropped by the hook until the next refresh off the
        hook) and notes the hook declined that no refresh off the hook has read yet."""
        return [
            (d, p, int(line or 0), reason, bool(crystal))
            for d, p, line, reason, crystal in self.conn.execute(
                "SELECT domain, path, line, reason, crystal FROM subset_out ORDER BY domain, path"
            )
        ]

    def counts(self) -> dict:
        c = self.conn
        return {
            "files": c.execute("SELECT COUNT(*) FROM files").fetchone()[0],
            "crystals": c.execute("SELECT COUNT(*) FROM crystals").fetchone()[0],
            "folders": c.execute("SELECT COUNT(*) FROM dirs").fetchone()[0],
        }

    # -- per-session state (best effort: losing it never loses a ledger row) ---------
    def sess_get(self, session: str, kind: str) -> dict[str, tuple[float, int]]:
        return {
            item: (ts, n)
            for item, ts, n in self.conn.execute(
                "SELECT item, ts, n FROM sess WHERE session=? AND kind=?", (session, kind)
            )
        }

    def sess_put(self, session: str, kind: str, items: list[str], bump: bool = False) -> None:
        """Queued until ``commit``: reads in the same call do not see it."""
        now = time.time()
        if bump:
            self._queue.append(
                (
                    "INSERT INTO sess(session, kind, item, ts, n) VALUES(?,?,?,?,1) "
                    "ON CONFLICT(session, kind, item) DO UPDATE SET n = n + 1, ts = excluded.ts",
                    [(session, kind, it, now) for it in items],
                )
            )
        else:
            self._queue.append(
                (
                    "INSERT OR REPLACE INTO sess(session, kind, item, ts, n) VALUES(?,?,?,?,0)",
                    [(session, kind, it, now) for it in items],
                )
            )

    def prune_sessions(
        self, keep_s: float = SESS_KEEP_S, keep_max: int = SESS_KEEP_MAX, now: float | None = None
    ) -> int:
        """Drop the state of sessions last written more than ``keep_s`` ago, then of all but the
        newest ``keep_max``; returns the sessions dropped. Never called by the hook (``geode
        reindex`` and the nightly upkeep run it): one delete over a large table is the cost the
        hook is spared."""
        now = time.time() if now is None else now
        c = self.conn
        if not self._begin_write():
            raise sqlite3.OperationalError("database is locked: another process writes the binding index")
        try:
            before = c.execute("SELECT COUNT(DISTINCT session) FROM sess").fetchone()[0]
            c.execute(
                "DELETE FROM sess WHERE session IN (SELECT session FROM sess GROUP BY session HAVING MAX(ts) < ?)",
                (now - keep_s,),
            )
            c.execute(
                "DELETE FROM sess WHERE session NOT IN "
                "(SELECT session FROM sess GROUP BY session ORDER BY MAX(ts) DESC LIMIT ?)",
                (max(0, int(keep_max)),),
            )
            after = c.execute("SELECT COUNT(DISTINCT session) FROM sess").fetchone()[0]
            c.execute("COMMIT")
        except BaseException:  # clean up, then re-raise: nothing is caught here
            c.execute("ROLLBACK")
            raise
        return int(before - after)

    def sess_del(self, session: str, kind: str, items: list[str]) -> None:
        self._queue.append(
            ("DELETE FROM sess WHERE session=? AND kind=? AND item=?", [(session, kind, it) for it in items])
        )


_VIEWS: dict[tuple[str, str], list[tuple[str, str, str]]] = {}


def _views(term: str, action: str) -> list[tuple[str, str, str]]:
    """The strings the prefilter checks for one term bound to one action, with their view:
    ``n`` (its key form, against the action's normalised text), ``s`` (a ``substring:`` term,
    against the raw text) and ``f`` (the term as written, against the raw text, when that
    differs from the key form: for a command that cannot be split, and for data); third, a
    second word the ``n`` view checks too (``_also_word``), or "". Cached: a store's terms
    repeat (a build of 100,000 crystals splits each distinct term once)."""
    kind = "bash" if action in _match.BASH_KINDS else action
    hit = _VIEWS.get((term, kind))
    if hit is None:
        if len(_VIEWS) > 200_000:
            _VIEWS.clear()
        hit = _VIEWS[(term, kind)] = _compute_views(term, action)
    return hit


def _compute_views(term: str, action: str) -> list[tuple[str, str, str]]:
    t = _match.compile_term(term, action)
    if t.mode == "substring":
        return [("s", t.key, "")] if t.key else []
    out = [("n", t.key, _also_word(t))] if t.key else []
    if t.raw_key and t.raw_key != t.key:
        out.append(("f", t.raw_key, ""))
    return out


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_./:@+")


def _also_word(t: _match.Term) -> str:
    """A grammar term's second prefilter word: besides its key (one word, ``match._gram_key``),
    the longest other plain word of the term, uncommon first; "" for any other term.

    Why: a two-word term is keyed by one of its words, so ``docker push`` came back for every
    command holding ``push``: a command of ``git push`` sent 820 of a 100,000-crystal store's rows
    to Python (82 of 10,000), every one rejected there (issue 25). Every word of a grammar match is
    in the command's normalised text (a command word matches itself, its path's last part or a
    longer version of it, a later word a word holding it), so checking a second one in SQLite
    loses no match. Options are never taken (one may be implied by another, or grouped), nor a
    word with other characters than letters, digits and ``-_./:@+`` (quoted or shell text)."""
    if t.mode != "shell" or t.stages is None:
        return ""
    words = [
        w.text
        for w in t.words
        if not w.op and w.text and w.text[0] != "-" and w.text != t.key and all(c in _PLAIN for c in w.text)
    ]
    if not words:
        return ""
    rare = [w for w in words if w not in _match.COMMON_SHELL_WORDS] or words
    return max(rare, key=len)


def _rarest(term: str, freq: dict[str, int]) -> str:
    if len(term) <= KEY_LEN:
        return term
    best = term[:KEY_LEN]
    best_n = freq.get(best, 0)
    for i in range(1, len(term) - KEY_LEN + 1):
        g = term[i : i + KEY_LEN]
        n = freq.get(g, 0)
        if n < best_n:
            best, best_n = g, n
    return best


def _like_prefix(rel_dir: str) -> str:
    esc = rel_dir.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{esc}/%" if rel_dir else "%"
