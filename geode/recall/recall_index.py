"""The recall index: notes, tags, frontmatter, links and observations in the SQL database.

Derived from the files and rebuildable at any time. It lives in the SQLModel database
(``GEODE_HOME/geode.db`` by default, PostgreSQL by ``[database] url``), in tables prefixed
``recall_``. Being derived, these tables are not migrated: ``ensure_schema`` keeps
``create_all`` and a changed layout is rebuilt (``geode reindex --wipe``); the records beside
them have Alembic migrations (``geode.records.migrations``), which never touch ``recall_*``.
Full text:

- SQLite: an FTS5 table ``recall_fts`` (columns title, tags, description, body, dates; tokenizer
  ``unicode61 remove_diacritics 2``), ranked with ``bm25`` and the column weights
  ``FTS_WEIGHTS`` (a word in the title counts 8 times a word in the body; ``dates`` holds the
  day terms of ``geode.recall.date_terms``: the note's own day and the days it tells, relative
  ones resolved against it);
- PostgreSQL: a ``tsvector`` column ``recall_note.tsv`` with a GIN index, built with the
  ``simple`` configuration (no stemming: the store is multilingual) and weights A (title),
  B (tags, description) and D (body), ranked with ``ts_rank_cd``.

Each note row carries ``content_hash`` (sha256 of the file's text) and its embedding state:
``embed_text_hash`` (sha256 of the text that is embedded), ``embed_model`` and ``embed_hash``
(the model and text hash of the vector in Chroma). A note is *pending* when its vector is
missing, was made from other text, or by another model; ``done`` otherwise. Unchanged text and
model are never embedded twice.

Freshness: ``refresh()`` compares every file's size and mtime with the index and re-reads what
changed (``full=True`` re-reads every file, keeping the embedding state of unchanged text).
``quick_refresh()`` is what a search runs first: it stats folders only, and re-reads the files of
folders whose mtime moved (new, removed and renamed files, and editors that save by rename). An
in-place edit that keeps the folder's mtime is seen by the next ``refresh()`` (``geode reindex``,
``geode serve``'s periodic pass).

The tables and engines are in ``geode.recall.index_tables``; a note's rows are computed by
``geode.recall.note_rows``. Reading (search, context, the folder check) goes through
``self.sql`` (``geode.recall.sqlread``: the standard library's ``sqlite3`` on SQLite), and
SQLAlchemy is imported only by what writes: opening an SQLite index whose schema is complete
(read from ``sqlite_master``) and a ``quick_refresh`` that finds no folder changed write nothing
and import none of it (SQLAlchemy's import was ~0.3 s of a cold ``geode search``).
"""

from __future__ import annotations

import json
import os
import time
from collections import namedtuple

from geode.kernel.crystal import RETIRED_STATUSES
from geode.kernel.problems import Problem
from geode.kernel.store import iter_note_paths, read_note_file
from geode.recall import sqlread
from geode.recall.folders import folder_mtimes
from geode.recall.note_rows import note_rows

BATCH = 200
STATS_DRIFT = 0.25  # ANALYZE again when the number of notes moved by this share since the last
ANALYSIS_LIMIT = 2000  # rows ANALYZE samples per index (SQLite's analysis_limit): bounded at any size


# -- addresses ----------------------------------------------------------------------------
def address(domain: str, permalink: str) -> str:
    return f"geode://{domain}/{permalink}"


def parse_address(addr: str, settings) -> tuple[str, str]:
    """``geode://domain/permalink``, ``domain:permalink`` or a bare permalink (default domain)
    -> (domain, permalink). A trailing ``.md`` is removed."""
    a = addr.strip()
    if a.startswith("geode://"):
        rest = a[len("geode://") :]
        domain, _, perm = rest.partition("/")
    elif ":" in a and a.split(":", 1)[0] in settings.domains:
        domain, perm = a.split(":", 1)
    else:
        domain, perm = settings.default_domain, a
    perm = perm.strip("/")
    for suf in (".md", ".mdc", ".markdown"):
        if perm.endswith(suf):
            perm = perm[: -len(suf)]
    return domain, perm


# -- the index ------------------------------------------------------------------------------
def skipped_by_reindex(settings, root: str, rel: str, domain: str) -> Problem | None:
    """Why ``refresh`` keeps no row for this file (a ``Problem``: unreadable, binary, too large,
    bad frontmatter), or None when it indexes it. One rule for both: ``geode status`` asks it
    of the files it finds no row for, so a file reindex always skips is reported as skipped,
    never as "out of sync" forever (issue 15, point 6)."""
    result = read_note_file(root, rel, settings.max_file_bytes, domain)
    return result if isinstance(result, Problem) else None


def _team_sync(settings) -> None:
    """The team-rules domains' derived notes made current before recall reads them (a few
    ``stat`` calls; geode.delivery.team_sync)."""
    if getattr(settings, "team_rules", None):
        from geode.delivery import team_sync

        team_sync.sync(settings)


def _touched(counts: dict) -> int:
    """Notes a refresh added, changed or removed: what the word counts' staleness tally adds."""
    return sum(int(counts.get(k) or 0) for k in ("added", "changed", "removed"))


class RecallIndex:
    """The SQL side of recall for one ``Settings``: refresh from the files, read back."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.dialect = sqlread.dialect_of(settings.db_url)
        self._engines: tuple | None = None  # (writer, reader), opened on first use
        self._schema_ok = False
        path = sqlread.sqlite_path(settings.db_url) if self.dialect == "sqlite" else None
        self.sql: sqlread.SqliteReader | sqlread.SAReader
        if path is not None:
            self.sql = sqlread.sqlite_reader(path)
            if not self.sql.schema_complete():
                self._open_writer()  # creates what is missing (a new home, an older layout)
                self.keep_stats()  # an older layout's index gets its statistics (none yet: ANALYZE)
        else:
            self._open_writer()
            self.sql = sqlread.SAReader(self.reader)

    def _open_writer(self):
        if self._engines is None:
            from geode.recall.index_tables import engines

            self._engines = engines(self.settings)
        if not self._schema_ok:
            from geode.recall.index_tables import ensure_schema

            ensure_schema(self._engines[0])
            self._schema_ok = True
        return self._engines[0]

    @property
    def writer(self):
        """The SQLAlchemy engine that writes (imported, and the schema checked, on first use)."""
        return self._open_writer()

    @property
    def reader(self):
        """A SQLAlchemy engine that reads (for queries built with SQLAlchemy, outside search)."""
        self._open_writer()
        assert self._engines is not None
        return self._engines[1]

    # -- writing -----------------------------------------------------------------------
    def _write_batch(self, conn, items: list[tuple[int | None, dict]]) -> None:
        """Insert or update notes (``(id or None, rows)``), replacing their child rows."""
        from sqlalchemy import insert, text, update

        from geode.recall.index_tables import fm_t, links_t, notes_t, obs_t, tags_t

        ids = []
        for nid, data in items:
            row = data["row"]
            if nid is None:
                nid = conn.execute(insert(notes_t).values(**row).returning(notes_t.c.id)).scalar_one()
            else:
                conn.execute(update(notes_t).where(notes_t.c.id == nid).values(**row))
            ids.append(nid)
            data["id"] = nid
        self._delete_children(conn, [i for (old, _d), i in zip(items, ids, strict=False) if old is not None])
        fm, tg, lk, ob = [], [], [], []
        for _old, data in items:
            nid = data["id"]
            fm += [{"note_id": nid, "key": k, "val": v, "num": n} for k, v, n in data["fm"]]
            tg += [{"note_id": nid, "tag": t} for t in data["tags"]]
            lk += [{"note_id": nid, "line": a, "kind": b, "relation": c, "target": d} for a, b, c, d in data["links"]]
            ob += [{"note_id": nid, "line": a, "category": b, "text": c} for a, b, c in data["obs"]]
        for table, rows in ((fm_t, fm), (tags_t, tg), (links_t, lk), (obs_t, ob)):
            if rows:
                conn.execute(insert(table), rows)
        if self.dialect == "sqlite":
            conn.exec_driver_sql(
                "INSERT INTO recall_fts(rowid, title, tags, description, body, dates) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        d["id"],
                        d["row"]["title"],
                        " ".join(json.loads(d["row"]["tags"])),
                        d["row"]["description"],
                        d["row"]["body"],
                        d["row"]["dates"],
                    )
                    for _o, d in items
                ],
            )
        else:
            from geode.recall.index_tables import PG_TSV

            conn.execute(
                text(f"UPDATE recall_note SET tsv = {PG_TSV} WHERE id = ANY(:ids)"),
                {"ids": [d["id"] for _o, d in items]},
            )

    def _delete_children(self, conn, ids: list[int]) -> None:
        from sqlalchemy import delete

        from geode.recall.index_tables import CHILD_TABLES

        if not ids:
            return
        for table in CHILD_TABLES:
            conn.execute(delete(table).where(table.c.note_id.in_(ids)))
        if self.dialect == "sqlite":
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                conn.exec_driver_sql(
                    f"DELETE FROM recall_fts WHERE rowid IN ({','.join('?' * len(chunk))})", tuple(chunk)
                )

    def _delete_notes(self, conn, ids: list[int]) -> None:
        from sqlalchemy import delete

        from geode.recall.index_tables import notes_t

        self._delete_children(conn, ids)
        if ids:
            conn.execute(delete(notes_t).where(notes_t.c.id.in_(ids)))

    def wipe(self) -> None:
        """Remove every row of the recall index (the vectors are another matter: ``vectors.py``)."""
        from sqlalchemy import delete

        from geode.recall.index_tables import CHILD_TABLES, dirs_t, notes_t

        with self.writer.begin() as conn:
            for table in (*CHILD_TABLES, dirs_t, notes_t):
                conn.execute(delete(table))
            if self.dialect == "sqlite":
                conn.exec_driver_sql("DELETE FROM recall_fts")

    def refresh(self, full: bool = False, progress=None, domains: list[str] | None = None, force: bool = False) -> dict:
        """Bring the index in line with the files. ``full``: re-read every file (content hashes
        decide what changed). ``force``: rewrite every row from its file (``--wipe``), batch by
        batch, so the index keeps answering meanwhile; embedding state of unchanged text is kept
        (the vectors are rebuilt separately). ``progress(done, total)`` is called as files are examined."""
        full = full or force
        t0 = time.perf_counter()
        _team_sync(self.settings)
        counts = {"files": 0, "read": 0, "changed": 0, "added": 0, "removed": 0, "unchanged": 0, "problems": []}
        for domain, root in self.settings.domain_roots():
            if domains is not None and domain not in domains:
                continue
            self._refresh_domain(domain, root, full, counts, progress, force=force)
        self.keep_stats(force=True)
        touched = _touched(counts)
        if touched or force or self.meta(sqlread.WORDS_AT) is None:  # else nothing changed: no write
            from geode.recall.index_tables import keep_word_counts  # the prompt hook's word rarity

            keep_word_counts(self.writer, touched, force=force)
        counts["seconds"] = round(time.perf_counter() - t0, 3)
        self._set_meta("refreshed_at", str(time.time()))
        return counts

    def keep_stats(self, force: bool = False) -> bool:
        """Keep the planner's statistics fresh: ``ANALYZE`` when there are none yet or the number
        of notes moved by more than ``STATS_DRIFT`` since the last one, else (``force``, after a
        full refresh) SQLite's ``PRAGMA optimize``. True when ``ANALYZE`` ran.

        Why: a filter is ``id IN (SELECT note_id FROM recall_tag | recall_fm ...)`` and only the
        statistics tell SQLite that a tag's index selects few rows and a note's (domain, path)
        index one; without them it may drive a read by the wrong index (measured: the hybrid
        search with a 23% tag went from 0.2 s to 7 s). ``ANALYZE`` is bounded by
        ``analysis_limit`` (rows sampled per index), about a second at 100,000 notes."""
        with self.sql.connect() as conn:
            notes = int(conn.scalar("SELECT count(*) FROM recall_note") or 0)
            if self.dialect == "sqlite":
                has = conn.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'")
                seen = conn.scalar("SELECT count(*) FROM sqlite_stat1") if has else 0
            else:
                seen = 1
        last = self.meta("analyzed_notes")
        drift = last is None or abs(notes - int(last)) > STATS_DRIFT * max(int(last), 1)
        if not notes or (seen and not drift and not force):
            return False
        with self.writer.begin() as conn:
            if self.dialect != "sqlite":
                if not drift:
                    return False
                conn.exec_driver_sql("ANALYZE recall_note, recall_tag, recall_fm")
            elif seen and not drift:
                conn.exec_driver_sql("PRAGMA optimize")
                return False
            else:
                conn.exec_driver_sql(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
                conn.exec_driver_sql("ANALYZE")
        self._set_meta("analyzed_notes", str(notes))
        return True

    def _existing(self, domain: str, dirs: set[str] | list[str] | None = None) -> dict:
        with self.sql.connect() as conn:
            rows = conn.all(
                "SELECT id, path, mtime_ns, size, content_hash, root FROM recall_note WHERE domain = :d", {"d": domain}
            )
        out = {}
        for r in map(_Existing._make, rows):
            if dirs is not None and _dir_of(r.path) not in dirs:
                continue
            out[r.path] = r
        return out

    def _refresh_domain(
        self,
        domain: str,
        root: str,
        full: bool,
        counts: dict,
        progress,
        only_dirs: set[str] | None = None,
        force: bool = False,
    ) -> None:
        from geode.kernel.problems import Problem
        from geode.kernel.store import StoreLoad

        existing = self._existing(domain, only_dirs)
        stale_root = [r.id for r in existing.values() if r.root != root]
        if stale_root:  # the domain now names another folder: start it over
            with self.writer.begin() as conn:
                self._delete_notes(conn, stale_root)
            counts["removed"] += len(stale_root)  # touched too: the word counts' tally needs them
            existing = {p: r for p, r in existing.items() if r.root == root}
        paths = []
        load = StoreLoad(root=root, domain=domain)
        dir_mtimes: dict[str, int] = {}
        # each folder's mtime is taken before its files are listed: a file written in between
        # moves the mtime past the recorded one, so the next quick_refresh lists it again
        if only_dirs is None:
            if os.path.isdir(root):
                dir_mtimes = folder_mtimes(root)
                paths = list(iter_note_paths(root, load))
        else:
            for d in only_dirs:
                full_d = os.path.join(root, d) if d else root
                try:
                    mt = os.stat(full_d).st_mtime_ns
                    names = sorted(os.listdir(full_d))
                except OSError:
                    continue
                dir_mtimes[d] = mt
                for name in names:
                    rel = f"{d}/{name}" if d else name
                    if (
                        name.endswith((".md", ".mdc", ".markdown"))
                        and not name.startswith(".")
                        and os.path.isfile(os.path.join(root, rel))
                    ):
                        paths.append(rel)
        counts["problems"].extend(p for p in load.problems)
        pending: list[tuple[int | None, dict]] = []
        total = len(paths)
        seen = set()
        touch: list[tuple[int, int, int]] = []
        for i, rel in enumerate(paths):
            counts["files"] += 1
            seen.add(rel)
            full_path = os.path.join(root, rel)
            try:
                st = os.stat(full_path)
            except OSError:
                continue
            old = existing.get(rel)
            if old is not None and not full and old.mtime_ns == st.st_mtime_ns and old.size == st.st_size:
                counts["unchanged"] += 1
                continue
            counts["read"] += 1
            result = read_note_file(root, rel, self.settings.max_file_bytes, domain)
            if isinstance(result, Problem):  # the skip rule (``skipped_by_reindex``, which status asks too)
                counts["problems"].append(result)
                if old is not None:  # it was a note and is not any more
                    with self.writer.begin() as conn:
                        self._delete_notes(conn, [old.id])
                    counts["removed"] += 1
                continue
            data = note_rows(result, domain, root, st.st_mtime_ns, st.st_size)
            if old is not None and old.content_hash == data["row"]["content_hash"] and not force:
                counts["unchanged"] += 1
                if old.mtime_ns != st.st_mtime_ns or old.size != st.st_size:
                    touch.append((old.id, st.st_mtime_ns, st.st_size))
                continue
            counts["changed" if old is not None else "added"] += 1
            pending.append((old.id if old is not None else None, data))
            if len(pending) >= BATCH:
                self._flush(pending, touch)
                pending, touch = [], []
            if progress is not None and (i % 50 == 0 or i == total - 1):
                progress(i + 1, total)
        self._flush(pending, touch)
        gone = [r.id for p, r in existing.items() if p not in seen]
        if gone:
            with self.writer.begin() as conn:
                self._delete_notes(conn, gone)
            counts["removed"] += len(gone)
        self._store_dirs(domain, dir_mtimes, replace_all=only_dirs is None)
        if progress is not None and total:
            progress(total, total)

    def _flush(self, pending, touch) -> None:
        if not pending and not touch:
            return
        from sqlalchemy import update

        from geode.recall.index_tables import notes_t

        with self.writer.begin() as conn:
            if pending:
                self._write_batch(conn, pending)
            for nid, mt, sz in touch:
                conn.execute(update(notes_t).where(notes_t.c.id == nid).values(mtime_ns=mt, size=sz))

    def _store_dirs(self, domain: str, dir_mtimes: dict, replace_all: bool) -> None:
        from sqlalchemy import delete, insert

        from geode.recall.index_tables import dirs_t

        with self.writer.begin() as conn:
            if replace_all:
                conn.execute(delete(dirs_t).where(dirs_t.c.domain == domain))
            elif dir_mtimes:
                conn.execute(delete(dirs_t).where(dirs_t.c.domain == domain, dirs_t.c.dir.in_(list(dir_mtimes))))
            if dir_mtimes:
                conn.execute(
                    insert(dirs_t), [{"domain": domain, "dir": d, "mtime_ns": m} for d, m in dir_mtimes.items()]
                )

    def _known_dirs(self) -> dict[str, list[tuple[str, str, int]]]:
        """``{domain: [(folder, its full path, recorded mtime)]}`` from ``recall_dir``, kept in
        memory while the table's (count, sum of mtimes modulo a prime) stays the same: one aggregate read per
        search instead of 1,100 rows at 100,000 notes. Any writer (this process or another, a
        refresh or a wipe) changes the aggregate; a stale entry could only make a folder look
        changed (it is then listed again, and nothing is lost)."""
        with self.sql.connect() as conn:
            agg = tuple(conn.all("SELECT count(*), sum(recall_dir.mtime_ns % 2147483647) FROM recall_dir")[0])
            cached = self.__dict__.get("_dirs_cache")
            if cached is not None and cached[0] == agg:
                return cached[1]
            rows = conn.all("SELECT domain, dir, mtime_ns FROM recall_dir")
        roots = dict(self.settings.domain_roots())
        known: dict[str, list[tuple[str, str, int]]] = {}
        for dom, d, m in rows:
            root = roots.get(dom)
            if root is not None:
                known.setdefault(dom, []).append((d, os.path.join(root, d) if d else root, m))
        self.__dict__["_dirs_cache"] = (agg, known)
        return known

    def quick_refresh(self) -> dict:
        """Re-read the files of folders whose mtime changed (one ``stat`` per folder)."""
        _team_sync(self.settings)
        counts = {"files": 0, "read": 0, "changed": 0, "added": 0, "removed": 0, "unchanged": 0, "problems": []}
        known = self._known_dirs()
        stat = os.stat
        for domain, root in self.settings.domain_roots():
            entries = known.get(domain)
            if not entries:  # never indexed (or indexed before folders were recorded): index it all
                self._refresh_domain(domain, root, False, counts, None)
                continue
            # one stat per known folder; a new subfolder changes its parent's mtime, so only
            # the folders that moved are listed again (listing all of them cost 80 ms at 100,000)
            changed, vanished = set(), set()
            for d, full, m in entries:
                try:
                    if stat(full).st_mtime_ns != m:
                        changed.add(d)
                except OSError:
                    vanished.add(d)
            if not changed and not vanished:
                continue
            kd = {d: m for d, _f, m in entries}
            for d in list(changed):
                base = os.path.join(root, d) if d else root
                for sub, _m in folder_mtimes(base, recurse_known=kd, prefix=d).items():
                    if sub not in kd:
                        changed.add(sub)
            self._refresh_domain(domain, root, False, counts, None, only_dirs=changed | vanished)
            if vanished:
                from sqlalchemy import delete

                from geode.recall.index_tables import dirs_t

                with self.writer.begin() as conn:
                    conn.execute(delete(dirs_t).where(dirs_t.c.domain == domain, dirs_t.c.dir.in_(list(vanished))))
        if counts["added"] or counts["changed"] or counts["removed"]:
            self.keep_stats()  # a first build, or a store that grew or shrank by a quarter
            if self.dialect == "sqlite":  # the word counts' tally of touched notes (search._counted_over)
                from geode.recall.index_tables import keep_word_counts

                keep_word_counts(self.writer, _touched(counts), rebuild_ok=False)
        return counts

    # -- embedding state --------------------------------------------------------------
    def pending(self, model_id: str, limit: int | None = None, domains=None) -> list:
        """Notes whose vector is missing or stale for ``model_id`` (id, domain, path, texts)."""
        from sqlalchemy import select

        from geode.recall.index_tables import notes_t

        c = notes_t.c
        q = select(
            c.id, c.domain, c.path, c.title, c.description, c.tags, c.body, c.body_line, c.embed_text_hash
        ).where(
            (c.embed_model.is_(None))
            | (c.embed_model != model_id)
            | (c.embed_hash.is_(None))
            | (c.embed_hash != c.embed_text_hash)
        )
        q = q.where(c.domain.in_(list(domains or self.settings.domains)))
        q = q.order_by(c.id)
        if limit:
            q = q.limit(limit)
        with self.reader.connect() as conn:
            return conn.execute(q).all()

    def mark_embedded(self, done: list[tuple[int, str]], model_id: str) -> None:
        """Record ``(note id, embed_text_hash)`` as embedded by ``model_id`` (compare-and-set:
        a note whose text changed meanwhile stays pending)."""
        if not done:
            return
        from sqlalchemy import update

        from geode.recall.index_tables import notes_t

        with self.writer.begin() as conn:
            for nid, h in done:
                conn.execute(
                    update(notes_t)
                    .where(notes_t.c.id == nid, notes_t.c.embed_text_hash == h)
                    .values(embed_model=model_id, embed_hash=h)
                )

    def clear_embeddings(self) -> None:
        from sqlalchemy import update

        from geode.recall.index_tables import notes_t

        with self.writer.begin() as conn:
            conn.execute(update(notes_t).values(embed_model=None, embed_hash=None))

    def counts(self, model_id: str | None = None) -> dict:
        from sqlalchemy import select, text

        from geode.recall.index_tables import notes_t

        c = notes_t.c
        doms = list(self.settings.domains)
        with self.reader.connect() as conn:
            total = conn.execute(select(text("count(*)")).select_from(notes_t).where(c.domain.in_(doms))).scalar_one()
            done = 0
            if model_id:
                done = conn.execute(
                    select(text("count(*)"))
                    .select_from(notes_t)
                    .where(c.domain.in_(doms), c.embed_model == model_id, c.embed_hash == c.embed_text_hash)
                ).scalar_one()
            newest = conn.execute(select(text("max(mtime_ns)")).select_from(notes_t).where(c.domain.in_(doms))).scalar()
            other = conn.execute(
                select(c.embed_model, text("count(*)"))
                .where(c.domain.in_(doms), c.embed_model.isnot(None))
                .group_by(c.embed_model)
            ).all()
        return {
            "notes": int(total),
            "embedded": int(done),
            "pending": int(total) - int(done),
            "newest_mtime_ns": int(newest or 0),
            "by_model": {m: int(n) for m, n in other},
        }

    # -- meta ---------------------------------------------------------------------------
    def _set_meta(self, k: str, v: str) -> None:
        from sqlalchemy import delete, insert

        from geode.recall.index_tables import meta_t

        with self.writer.begin() as conn:
            conn.execute(delete(meta_t).where(meta_t.c.k == k))
            conn.execute(insert(meta_t).values(k=k, v=v))

    def meta(self, k: str) -> str | None:
        with self.sql.connect() as conn:
            return conn.scalar("SELECT v FROM recall_meta WHERE k = :k", {"k": k})

    # -- reading ------------------------------------------------------------------------
    def notes_by_ids(self, ids) -> dict:
        ids = list(ids)
        out = {}
        with self.sql.connect() as conn:
            for start in range(0, len(ids), 500):
                p: dict = {}
                cond = sqlread.in_list("recall_note.id", ids[start : start + 500], p, "i")
                out.update({r["id"]: r for r in conn.rows(f"{sqlread.NOTE_SELECT} WHERE {cond}", p)})
        return out

    def observations(self, ids) -> dict:
        ids = list(ids)
        out: dict[int, list] = {}
        if not ids:
            return out
        p: dict = {}
        cond = sqlread.in_list("note_id", ids, p, "i")
        with self.sql.connect() as conn:
            rows = conn.all(f"SELECT note_id, line, category, text FROM recall_obs WHERE {cond} ORDER BY line", p)
        for nid, line, category, txt in rows:
            out.setdefault(nid, []).append((line, category, txt))
        return out


_Existing = namedtuple("_Existing", "id path mtime_ns size content_hash root")


def is_retired(status: str) -> bool:
    return (status or "").lower() in RETIRED_STATUSES


def _dir_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""
