"""Speed benchmark of geode's PreToolUse hook at 1,000 / 10,000 / 100,000 crystals.

What it does, per store size:

1. generates (or reuses from ``bench/out/stores/``) a store of realistic crystal files:
   frontmatter with ``name``, ``description`` and a ``crystal:`` binding (``deliver: act``,
   ``on: bash``, 3-6 comma-separated ``match`` terms, ``who: all``), an essence of 300-1,500
   characters, ~100 files per folder in nested folders. Exactly ``MATCHING`` crystals match
   the benchmark's Bash command; every other crystal is checked at generation time not to;
2. makes a fresh ``GEODE_HOME`` whose ``geode.toml`` names the store, builds the binding index
   once (timed: the one-off build cost), creates the SQLite ledger (``models.init_db``) so the
   hook writes rows there and not to the spool, and byte-compiles ``geode/delivery/``;
3. times whole processes, interleaved round by round (the order rotates every round):
   ``<python> -c pass`` (the bar's baseline), ``<python> -S -c pass`` (information),
   the exact installed hook command (``install.hook_command('claude', home=...)``) with a
   PreToolUse event for a matching command, and the same for a command nothing matches;
   every command goes through ``/bin/sh -c``, as the agent runs it;
4. checks every matching run's output (JSON, the expected crystals, by name), that the
   no-match runs print nothing, that the ledger got the rows (not the spool), and that an
   edit to a matching crystal's essence is delivered on the very next call.

Run: ``PYTHONPATH=. .venv/bin/python bench/hook_speed.py [--sizes 1000,10000,100000]
[--runs 40] [--out FILE] [--quick] [--check] [--profile]``. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

OUT_DIR = os.path.join(REPO, "bench", "out")
STORE_CACHE = os.path.join(OUT_DIR, "stores")
GEN_VERSION = "1"  # bump when the generator's output changes: the cache key includes it

MATCH_COMMAND = "npm run build 2>&1 | tail -20"
NOMATCH_COMMAND = "ls -la"
SESSION = "bench-session"
MATCHING = 3
# The common-command store (``--common N``): N crystals, spread over the store, carry one of
# COMMON_TERMS, all of which occur in COMMON_COMMAND, so one everyday command matches N
# crystals and most of them cannot fit the budget (the issue measured 240 of 10,000).
COMMON_COMMAND = 'git commit -m "fix: parser" && git push'
COMMON_TERMS = ("git commit", "git push", "git commit -m")
FILES_PER_DIR = 100
# The bar (from the issue): the hook's median at 10,000 crystals is at most this many
# interpreter starts, and the 100,000 median is within this fraction of the 10,000 one.
BAR_RATIO = 2.0
BAR_SCALE = 0.10

# Terms each of the MATCHING crystals carries that occur in MATCH_COMMAND (one each, longest first
# wins the "matched" label), plus synthetic terms that do not.
MATCH_TERMS = ("| tail", "npm run build", "2>&1")

# Plausible command fragments a real store binds to. Filtered at start-up: any fragment that
# occurs in MATCH_COMMAND or NOMATCH_COMMAND is dropped (only the MATCHING crystals may fire).
# Some of the kept ones share a 3-character prefix with the match command ("npm install",
# "tail -f", "| tee"): they are the index's near misses, as in a real store.
VOCAB = (
    "| tail",
    "| head",
    "| grep -v",
    "| xargs",
    "| sort -u",
    "| tee",
    "| less",
    "tail -f",
    "head -n",
    "> /dev/null",
    "2>/dev/null",
    "&> /dev/null",
    "2>&1",
    "git add -a",
    "git push --force",
    "git reset --hard",
    "git rebase -i",
    "git commit --amend",
    "git stash drop",
    "git clean -fdx",
    "git checkout --",
    "git cherry-pick",
    "git submodule update",
    "pkill -f",
    "kill -9",
    "killall",
    "rm -rf",
    "chmod 777",
    "chown -r",
    "sudo ",
    "docker compose",
    "docker build",
    "docker run --rm",
    "docker system prune",
    "docker push",
    "docker exec -it",
    "kubectl delete",
    "kubectl apply",
    "kubectl rollout",
    "kubectl port-forward",
    "helm upgrade",
    "helm install",
    "terraform apply",
    "terraform destroy",
    "terraform plan",
    "npm install",
    "npm ci",
    "npm publish",
    "npm audit fix",
    "npm run build",
    "npm run dev",
    "npm test",
    "yarn add",
    "yarn build",
    "pnpm install",
    "npx prisma migrate",
    "pip install",
    "pip install -e",
    "uv pip",
    "poetry lock",
    "python -m pytest",
    "pytest -x",
    "pytest -k",
    "tox -e",
    "mypy",
    "ruff check",
    "cargo build --release",
    "cargo test",
    "cargo publish",
    "go test ./...",
    "go mod tidy",
    "make clean",
    "make install",
    "cmake --build",
    "sed -i",
    "find . -name",
    "find / -delete",
    "rsync --delete",
    "scp ",
    "ssh -i",
    "curl -x post",
    "curl | sh",
    "wget -o",
    "psql -c",
    "pg_dump",
    "pg_restore",
    "mysql -u",
    "redis-cli flushall",
    "mongo --eval",
    "alembic upgrade",
    "alembic downgrade",
    "manage.py migrate",
    "rails db:migrate",
    "systemctl restart",
    "systemctl stop",
    "journalctl -u",
    "crontab -e",
    "ulimit -n",
    "nohup",
    "tmux kill-server",
    "aws s3 rm",
    "aws s3 sync",
    "gcloud deploy",
    "gh pr create",
    "gh release",
    "openssl req",
    "ssh-keygen",
    "gpg --sign",
    "ffmpeg -i",
    "tar -xzf",
    "tar -czf",
    "unzip -o",
    "zip -r",
    "jq .",
    "yq -i",
    "envsubst",
    "source .env",
    "dd if=",
    "mkfs",
    "mount -o",
    "umount -l",
    "next build",
    "vite build",
    "webpack --mode",
    "tsc --noemit",
    "eslint --fix",
    "prettier --write",
    "jest --watch",
    "vitest run",
    "ls -la",
    "ls -r",
)

_SYL = (
    "ka",
    "ro",
    "vi",
    "ne",
    "tu",
    "lo",
    "mi",
    "sa",
    "de",
    "po",
    "qu",
    "ze",
    "fa",
    "gi",
    "bo",
    "xe",
    "ly",
    "wu",
    "ja",
    "hu",
    "co",
    "re",
    "ti",
    "na",
)
_SYN_FORMS = (
    "make {w}",
    "./scripts/{w}.sh",
    "{w} --sync",
    "just {w}",
    "invoke {w}",
    "{w}ctl reload",
    "bin/{w}",
    "task {w}",
)
_WORDS = (
    "the",
    "build",
    "cache",
    "runner",
    "fails",
    "silently",
    "when",
    "the",
    "lock",
    "file",
    "is",
    "stale",
    "check",
    "exit",
    "status",
    "before",
    "trusting",
    "output",
    "pipe",
    "hides",
    "error",
    "migration",
    "rollback",
    "needs",
    "flag",
    "container",
    "restarts",
    "port",
    "already",
    "bound",
    "token",
    "expires",
    "after",
    "one",
    "hour",
    "retry",
    "with",
    "backoff",
    "never",
    "force",
    "push",
    "shared",
    "branch",
    "deploy",
    "script",
    "reads",
    "env",
    "from",
    "wrong",
    "folder",
    "use",
    "absolute",
    "paths",
    "tests",
    "pass",
    "locally",
    "but",
    "CI",
    "uses",
    "another",
    "python",
    "version",
    "pin",
    "it",
    "in",
    "config",
    "and",
    "rebuild",
    "image",
    "volume",
    "keeps",
    "old",
    "data",
    "so",
    "wipe",
    "first",
    "log",
    "rotates",
    "at",
    "midnight",
)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class BenchFailure(SystemExit):
    """A check failed: the benchmark would be measuring the wrong thing. Exit status 2."""

    def __init__(self, msg: str):
        _log(f"\nBENCHMARK CHECK FAILED: {msg}")
        super().__init__(2)


# -- the store -----------------------------------------------------------------------------


def _vocab(common: int = 0) -> list[str]:
    cmds = (MATCH_COMMAND.lower(), NOMATCH_COMMAND.lower()) + ((COMMON_COMMAND.lower(),) if common else ())
    return [t for t in VOCAB if not any(t.strip() in c for c in cmds)]


def _essence(rng: random.Random, length: int) -> str:
    out: list[str] = []
    n = 0
    while n < length:
        words = rng.choices(_WORDS, k=rng.randint(6, 16))
        s = " ".join(words).capitalize() + ". "
        out.append(s)
        n += len(s)
        if rng.random() < 0.15:
            out.append("\n\n")
    return "".join(out).strip()[:length].rstrip() + "."


def _synthetic(rng: random.Random, i: int, k: int) -> str:
    word = "".join(rng.choice(_SYL) for _ in range(3)) + f"{i:x}{k}"
    return rng.choice(_SYN_FORMS).format(w=word)


def _crystal_text(i: int, name: str, terms: list[str], essence: str) -> str:
    match = ", ".join(terms)
    return (
        "---\n"
        f"name: {name}\n"
        f"description: Benchmark crystal {i}, what looks like success but is not\n"
        "type: feedback\n"
        "last_verified: 2026-01-15\n"
        "crystal:\n"
        "  deliver: act\n"
        "  on: bash\n"
        f'  match: "{match}"\n'
        "  who: all\n"
        "---\n"
        "<!-- crystal:essence -->\n"
        f"{essence}\n"
        "<!-- /crystal:essence -->\n\n"
        "## Where this came from\n"
        f"Generated by bench/hook_speed.py (crystal {i}).\n"
    )


def _rel_path(i: int, n: int) -> str:
    leaf = i // FILES_PER_DIR
    if n <= 10 * FILES_PER_DIR:
        return f"topic-{leaf:04d}/note-{i:06d}.md"
    return f"area-{leaf // 10:03d}/topic-{leaf:04d}/note-{i:06d}.md"


def matching_indices(n: int) -> list[int]:
    """Spread over the store (not all in the first folder): n/7, n/2, n-5."""
    out = sorted({n // 7, n // 2, max(0, n - 5)})
    assert len(out) == MATCHING, out
    return out


def common_indices(n: int, common: int) -> list[int]:
    """Every (n // common)-th crystal, offset so that none is a MATCHING crystal."""
    if common <= 0:
        return []
    skip = set(matching_indices(n))
    step = max(1, n // common)
    out = []
    i = step // 3
    while len(out) < common and i < n:
        if i not in skip:
            out.append(i)
        i += step
    return out


def store_key(n: int, seed: int, vocab_per_crystal: int, common: int = 0) -> str:
    parts = [GEN_VERSION, n, seed, vocab_per_crystal, MATCH_COMMAND, NOMATCH_COMMAND, VOCAB, FILES_PER_DIR]
    if common:  # the default store keeps its key (and its cache)
        parts += [common, COMMON_COMMAND, COMMON_TERMS]
    ident = json.dumps(parts, sort_keys=True)
    tag = f"-c{common}" if common else ""
    return f"n{n}-seed{seed}-v{vocab_per_crystal}{tag}-{hashlib.sha256(ident.encode()).hexdigest()[:10]}"


def generate_store(n: int, seed: int, vocab_per_crystal: int, common: int = 0) -> dict:
    """The store's manifest; generated once, then reused from ``bench/out/stores/<key>``."""
    base = os.path.join(STORE_CACHE, store_key(n, seed, vocab_per_crystal, common))
    manifest_path = os.path.join(base, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            m = json.load(fh)
        m["cached"] = True
        return m
    if os.path.exists(base):
        shutil.rmtree(base)  # an interrupted generation
    root = os.path.join(base, "store")
    rng = random.Random(seed * 1_000_003 + n)
    vocab = _vocab(common)
    cmds = (MATCH_COMMAND.lower(), NOMATCH_COMMAND.lower()) + ((COMMON_COMMAND.lower(),) if common else ())
    matching = set(matching_indices(n))
    commons = {i: j for j, i in enumerate(common_indices(n, common))}
    common_files = []
    t0 = time.perf_counter()
    made_dirs: set[str] = set()
    match_files = []
    total_bytes = 0
    for i in range(n):
        rel = _rel_path(i, n)
        d = os.path.dirname(rel)
        if d not in made_dirs:
            os.makedirs(os.path.join(root, d), exist_ok=True)
            made_dirs.add(d)
        k = rng.randint(3, 6)
        if i in matching:
            j = len(match_files)
            name = f"bench-match-{j + 1}"
            terms = [MATCH_TERMS[j % len(MATCH_TERMS)]] + [_synthetic(rng, i, x) for x in range(k - 1)]
            essence = _essence(rng, 700)  # three of them fit the 4,000-character budget whole
            match_files.append({"index": i, "path": rel, "name": name})
        else:
            name = f"bench-{i:06d}"
            nv = min(vocab_per_crystal, k)
            terms = rng.sample(vocab, nv) + [_synthetic(rng, i, x) for x in range(k - nv)]
            rng.shuffle(terms)
            for t in terms:  # only the matching crystals may fire on either command
                if any(t.strip().lower() in c for c in cmds):
                    raise AssertionError(f"generator bug: term {t!r} of crystal {i} occurs in a bench command")
            essence = _essence(rng, rng.randint(300, 1500))
            if i in commons:  # one everyday term more: the common command matches this crystal
                name = f"bench-common-{i:06d}"
                terms.insert(rng.randint(0, len(terms)), COMMON_TERMS[commons[i] % len(COMMON_TERMS)])
                common_files.append({"index": i, "path": rel, "name": name})
        text = _crystal_text(i, name, terms, essence)
        with open(os.path.join(root, rel), "w", encoding="utf-8") as fh:
            fh.write(text)
        total_bytes += len(text)
    m = {
        "n": n,
        "seed": seed,
        "vocab_per_crystal": vocab_per_crystal,
        "root": root,
        "matching": match_files,
        "common": common_files,
        "folders": len(made_dirs),
        "bytes": total_bytes,
        "generated_s": round(time.perf_counter() - t0, 2),
        "gen_version": GEN_VERSION,
    }
    with open(manifest_path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(m, fh, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)  # written last: its presence means complete
    m["cached"] = False
    return m


# -- the hook ------------------------------------------------------------------------------


def event_json(command: str, cwd: str) -> bytes:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": os.path.join(cwd, "transcript.jsonl"),
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "benchmark"},
        }
    ).encode()


def hook_env(home: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env["GEODE_WITHHOLD_RATE"] = "0"  # the control arm would withhold some of the expected crystals
    env["GEODE_HOME"] = home  # the command carries it too; this keeps hookmain's error log there
    return env


def run_sh(cmd: str, stdin: bytes, env: dict, cwd: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    p = subprocess.run(["/bin/sh", "-c", cmd], input=stdin, capture_output=True, env=env, cwd=cwd)
    return (time.perf_counter() - t0) * 1000.0, p


def delivered_names(stdout: bytes, where: str) -> list[str]:
    """The crystal names in a PreToolUse answer; fails loudly on anything but a delivery."""
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        raise BenchFailure(f"{where}: the hook printed nothing; it delivered no crystal")
    try:
        data = json.loads(text)
        ctx = data["hookSpecificOutput"]["additionalContext"]
        assert data["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    except (ValueError, KeyError, TypeError, AssertionError) as exc:
        raise BenchFailure(f"{where}: unexpected hook output ({exc!r}): {text[:300]}") from exc
    names = []
    for line in ctx.split("\n"):
        if line.startswith("◆ "):
            names.append(line[2:].split(" (matched", 1)[0])
    return names


def check_delivery(p: subprocess.CompletedProcess, expected: list[str], where: str) -> str:
    if p.returncode != 0:
        raise BenchFailure(f"{where}: hook exited {p.returncode}: {p.stderr.decode()[-500:]}")
    names = delivered_names(p.stdout, where)
    if sorted(names) != sorted(expected):
        raise BenchFailure(f"{where}: delivered {names}, expected exactly {expected}")
    return json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]


def check_common(p: subprocess.CompletedProcess, names: set, where: str) -> int:
    """A call of the common command: a delivery of at least one crystal, every one of them a
    common crystal, within the budget. Returns how many were delivered."""
    if p.returncode != 0:
        raise BenchFailure(f"{where}: hook exited {p.returncode}: {p.stderr.decode()[-500:]}")
    got = delivered_names(p.stdout, where)
    if not got or not set(got) <= names:
        raise BenchFailure(f"{where}: delivered {got}, expected some of the {len(names)} common crystals")
    ctx = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    if len(ctx) > 4000:
        raise BenchFailure(f"{where}: {len(ctx)} characters delivered, over the 4,000 budget")
    return len(got)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs: list[float]) -> dict:
    return {
        "median_ms": round(statistics.median(xs), 2),
        "p95_ms": round(percentile(xs, 0.95), 2),
        "min_ms": round(min(xs), 2),
        "n": len(xs),
    }


# -- one size ------------------------------------------------------------------------------


def bench_size(n: int, args) -> dict:
    from geode.delivery.index import Index, text_keys
    from geode.install import hooks as install
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    m = generate_store(n, args.seed, args.vocab_per_crystal, args.common)
    _log(
        f"[{n:,}] store {'reused' if m['cached'] else 'generated in {:.1f} s'.format(m['generated_s'])}: "
        f"{m['root']} ({m['folders']} folders)"
    )
    expected = [f["name"] for f in m["matching"]]
    tmp = tempfile.mkdtemp(prefix=f"geode-bench-{n}-")
    try:
        home = os.path.join(tmp, "home")
        cwd = os.path.join(tmp, "project")
        os.makedirs(home)
        os.makedirs(cwd)
        with open(os.path.join(home, "geode.toml"), "w", encoding="utf-8") as fh:
            fh.write(f"[domains]\nmain = {json.dumps(m['root'])}\n")
        env = hook_env(home)
        settings = load_settings(home=home, env={"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0"})
        if settings.domains != {"main": os.path.realpath(m["root"])}:
            raise BenchFailure(f"settings name the wrong store: {settings.domains}")

        # the one-off index build (what the first hook call after an install would pay)
        t0 = time.perf_counter()
        idx = Index(settings)
        built = idx.ensure()
        build_s = time.perf_counter() - t0
        counts = idx.counts()
        near_misses = len(idx.candidates(("bash",), MATCH_COMMAND.lower()))
        # rows the gram query fetches before the Python-side substring check
        fetched = idx.conn.execute(
            "SELECT COUNT(DISTINCT crystal) FROM grams WHERE action='bash' AND key IN (SELECT value FROM json_each(?))",
            (json.dumps(text_keys(MATCH_COMMAND.lower(), idx.key_lengths())),),
        ).fetchone()[0]
        idx.close()
        if not built or counts["crystals"] != n:
            raise BenchFailure(f"index build: built={built}, counts={counts}, expected {n} crystals")
        if near_misses != MATCHING:
            raise BenchFailure(f"the index finds {near_misses} crystals for the match command, expected {MATCHING}")
        _log(
            f"[{n:,}] index built in {build_s:.2f} s ({n / build_s:,.0f} notes/s); "
            f"{fetched:,} candidate rows for the match command, {near_misses} match"
        )
        init_db(settings)  # the ledger, so the hook writes rows to SQLite, not the spool

        cmd_hook = install.hook_command("claude", home=home)
        py = sys.executable
        arms = {
            "python -c pass": (f"{py} -c pass", b""),
            "python -S -c pass": (f"{py} -S -c pass", b""),
            "hook (match)": (cmd_hook, event_json(MATCH_COMMAND, cwd)),
            "hook (no match)": (cmd_hook, event_json(NOMATCH_COMMAND, cwd)),
        }
        common_names = {f["name"] for f in m.get("common", [])}
        if args.common:
            if len(common_names) != args.common:
                raise BenchFailure(f"[{n:,}] the store has {len(common_names)} common crystals, expected {args.common}")
            arms["hook (common)"] = (cmd_hook, event_json(COMMON_COMMAND, cwd))
        for name, (c, _) in arms.items():
            if not c.startswith(py) and not c.startswith("GEODE_HOME="):
                raise BenchFailure(f"unexpected command for {name}: {c}")

        # warm-up: page cache, the first refresh, the session's first rows
        for _ in range(args.warmup):
            for c, stdin in arms.values():
                run_sh(c, stdin, env, cwd)
        _, p = run_sh(*arms["hook (match)"], env, cwd)
        check_delivery(p, expected, f"[{n:,}] warm-up")

        times: dict[str, list[float]] = {k: [] for k in arms}
        names = list(arms)
        outputs = []
        for r in range(args.runs):
            order = names[r % len(names) :] + names[: r % len(names)]  # rotate: no arm always first
            if r % 2:
                order.reverse()
            for name in order:
                c, stdin = arms[name]
                ms, p = run_sh(c, stdin, env, cwd)
                times[name].append(ms)
                if name.startswith("hook"):
                    outputs.append((name, p))
        common_delivered = []
        for name, p in outputs:  # every timed hook run, checked after the timing
            if name == "hook (match)":
                check_delivery(p, expected, f"[{n:,}] timed run")
            elif name == "hook (common)":
                common_delivered.append(check_common(p, common_names, f"[{n:,}] timed common run"))
            elif p.returncode != 0 or p.stdout.strip():
                raise BenchFailure(f"[{n:,}] no-match run printed {p.stdout[:200]!r} (exit {p.returncode})")

        # ledger: rows in SQLite, nothing left in the spool
        import sqlite3

        with sqlite3.connect(str(settings.records_file)) as con:
            rows = con.execute("SELECT COUNT(*) FROM ledger_event WHERE kind='delivered'").fetchone()[0]
        spool = os.path.join(settings.spool_dir, "events.jsonl")
        spooled = os.path.getsize(spool) if os.path.exists(spool) else 0
        min_rows = MATCHING * (args.runs + 1)
        if rows < min_rows or spooled:
            raise BenchFailure(
                f"[{n:,}] ledger has {rows} delivered rows (expected >= {min_rows}), spool {spooled} bytes"
            )
        err_log = os.path.join(home, "hook-errors.log")
        if os.path.exists(err_log):
            raise BenchFailure(f"[{n:,}] the hook logged errors: {open(err_log).read()[-800:]}")

        fresh = freshness(m, arms["hook (match)"], env, cwd, expected, n)
        inproc = in_process(home, n, args.runs)
        steps = phases(home, args.runs)

        res = {
            "crystals": n,
            "folders": m["folders"],
            "store_bytes": m["bytes"],
            "index_build_s": round(build_s, 2),
            "index_notes_per_s": round(n / build_s),
            "candidate_rows": fetched,
            "matching": MATCHING,
            "arms": {k: summary(v) for k, v in times.items()},
            "ledger_delivered_rows": rows,
            "freshness": fresh,
            "in_process": inproc,
            "steps": steps,
            "hook_command": cmd_hook,
        }
        if args.common:
            res["common"] = {
                "crystals": args.common,
                "command": COMMON_COMMAND,
                "delivered_per_call": round(statistics.median(common_delivered), 1),
            }
            res["ratio_common"] = round(
                res["arms"]["hook (common)"]["median_ms"] / res["arms"]["python -c pass"]["median_ms"], 2
            )
        base = res["arms"]["python -c pass"]["median_ms"]
        res["ratio_match"] = round(res["arms"]["hook (match)"]["median_ms"] / base, 2)
        res["ratio_nomatch"] = round(res["arms"]["hook (no match)"]["median_ms"] / base, 2)
        if args.profile and n == max(args.sizes):
            res["profile"] = profile(home, args.profile_calls)
        return res
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            _log(f"[{n:,}] kept {tmp}")


def freshness(m: dict, hook_arm, env, cwd, expected, n, edits: int = 5) -> dict:
    """Edit one matching crystal's essence between two calls: the next call delivers the new text.

    Done ``edits`` times (a different token each time); the call right after each edit is timed."""
    target = os.path.join(m["root"], m["matching"][0]["path"])
    with open(target, encoding="utf-8") as fh:
        original = fh.read()
    times = []
    try:
        for k in range(edits):
            token = f"FRESHNESS-CHECK-{os.getpid()}-{k}-{time.time_ns()}"
            _, before = run_sh(*hook_arm, env, cwd)
            ctx = check_delivery(before, expected, f"[{n:,}] freshness, before edit {k + 1}")
            if token in ctx:
                raise BenchFailure("freshness token present before the edit")
            edited = original.replace("\n<!-- /crystal:essence -->", f" {token}\n<!-- /crystal:essence -->", 1)
            assert edited != original
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(edited)
            ms, after = run_sh(*hook_arm, env, cwd)
            times.append(ms)
            ctx = check_delivery(after, expected, f"[{n:,}] freshness, after edit {k + 1}")
            if token not in ctx:
                raise BenchFailure(f"[{n:,}] the call right after edit {k + 1} did not deliver the edited essence")
            with open(target, "w", encoding="utf-8") as fh:  # the cached store stays as generated
                fh.write(original)
    finally:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(original)
    _, restored = run_sh(*hook_arm, env, cwd)
    ctx2 = check_delivery(restored, expected, f"[{n:,}] freshness, after the restore")
    if "FRESHNESS-CHECK-" in ctx2:
        raise BenchFailure(f"[{n:,}] the call after restoring the file still delivered the edited essence")
    _log(
        f"[{n:,}] freshness: {edits} of {edits} edits delivered on the very next call "
        f"(median {statistics.median(times):.1f} ms), the restored text on the call after"
    )
    return {
        "edited_text_delivered_next_call": True,
        "edits": edits,
        "call_after_edit_ms": round(statistics.median(times), 2),
        "all_ms": [round(t, 2) for t in times],
    }


def phases(home: str, runs: int) -> dict:
    """Medians of the hook's steps in this process, each on a fresh ``Index`` as a hook call has."""
    from geode.delivery.index import Index
    from geode.kernel.config import load_settings

    env = {"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0"}
    s = load_settings(env=env)
    text = MATCH_COMMAND.lower()

    def med(f) -> float:
        xs = []
        for _ in range(max(10, runs // 2)):
            t0 = time.perf_counter()
            f()
            xs.append((time.perf_counter() - t0) * 1000)
        return round(statistics.median(xs), 2)

    def step(name):
        def f():
            i = Index(s)
            try:
                if name == "short":
                    i.key_lengths()
                elif name == "refresh":
                    i.refresh()
                else:
                    i.key_lengths()  # computed first, so only the candidates query is timed
                    t0 = time.perf_counter()
                    i.candidates(("bash",), text)
                    cand_t.append((time.perf_counter() - t0) * 1000)
            finally:
                i.conn.close()

        return f

    cand_t: list[float] = []
    med(step("candidates"))
    return {
        "load_settings_ms": med(lambda: load_settings(env=env)),
        "key_lengths_ms": med(step("short")),
        "refresh_ms": med(step("refresh")),
        "candidates_ms": round(statistics.median(cand_t), 2),
    }


def in_process(home: str, n: int, runs: int) -> dict:
    """``hook.run`` inside this process (no interpreter start, no imports): the hook's own work."""
    from geode.delivery import hook

    env = {"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0"}
    raw = event_json(MATCH_COMMAND, home).decode()
    raw_no = event_json(NOMATCH_COMMAND, home).decode()
    hook.run("claude", raw, env)
    xs, ys = [], []
    for _ in range(max(10, runs)):
        t0 = time.perf_counter()
        code, out = hook.run("claude", raw, env)
        xs.append((time.perf_counter() - t0) * 1000)
        if not out:
            raise BenchFailure(f"[{n:,}] in-process hook.run delivered nothing")
        t0 = time.perf_counter()
        hook.run("claude", raw_no, env)
        ys.append((time.perf_counter() - t0) * 1000)
    return {"match": summary(xs), "no_match": summary(ys)}


def profile(home: str, calls: int) -> str:
    import cProfile
    import io
    import pstats

    from geode.delivery import hook

    env = {"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0"}
    raw = event_json(MATCH_COMMAND, home).decode()
    hook.run("claude", raw, env)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        hook.run("claude", raw, env)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    return f"cProfile of {calls} in-process hook.run calls (sorted by own time)\n" + s.getvalue()


# -- the report ----------------------------------------------------------------------------


def verdicts(results: dict[int, dict]) -> list[tuple[str, str, bool | None]]:
    out: list[tuple[str, str, bool | None]] = []
    at = 10_000 if 10_000 in results else (max(results) if results else None)
    if at is not None:
        r = results[at]
        base = r["arms"]["python -c pass"]["median_ms"]
        hk = r["arms"]["hook (match)"]["median_ms"]
        label = f"hook median at {at:,} <= {BAR_RATIO} x interpreter start"
        if at != 10_000:
            label += " (10,000 not measured; largest size used)"
        out.append(
            (
                label,
                f"{hk:.1f} ms vs {BAR_RATIO} x {base:.1f} = {BAR_RATIO * base:.1f} ms (x{hk / base:.2f})",
                hk <= BAR_RATIO * base,
            )
        )
        if "hook (common)" in r["arms"]:
            hc = r["arms"]["hook (common)"]["median_ms"]
            out.append(
                (
                    f"hook median at {at:,}, common command ({r['common']['crystals']} matches), <= {BAR_RATIO} x "
                    "interpreter start",
                    f"{hc:.1f} ms vs {BAR_RATIO * base:.1f} ms (x{hc / base:.2f})",
                    hc <= BAR_RATIO * base,
                )
            )
    if 10_000 in results and 100_000 in results:
        a = results[10_000]["arms"]["hook (match)"]["median_ms"]
        b = results[100_000]["arms"]["hook (match)"]["median_ms"]
        out.append(
            (
                f"hook median at 100,000 within {BAR_SCALE:.0%} of 10,000",
                f"{b:.1f} ms vs {a:.1f} ms ({(b / a - 1):+.1%})",
                b <= a * (1 + BAR_SCALE),
            )
        )
    else:
        out.append((f"hook median at 100,000 within {BAR_SCALE:.0%} of 10,000", "n/a (sizes not measured)", None))
    return out


def table(results: dict[int, dict]) -> str:
    head = (
        f"{'crystals':>9} | {'python -c pass':>15} | {'python -S -c pass':>17} | {'hook, match':>15} | "
        f"{'hook, no match':>15} | {'ratio':>5} | {'ratio nm':>8} | {'in-proc':>7} | {'edit call':>9} | "
        f"{'cand.':>6} | {'index build':>19}"
    )
    if any("hook (common)" in r["arms"] for r in results.values()):
        head += f" | {'hook, common':>15} | {'ratio c':>7}"
    lines = [head, "-" * len(head)]
    for n in sorted(results):
        r = results[n]
        a = r["arms"]

        def mp(k, a=a):
            return f"{a[k]['median_ms']:.1f} / {a[k]['p95_ms']:.1f}"

        lines.append(
            f"{n:>9,} | {mp('python -c pass'):>15} | {mp('python -S -c pass'):>17} | {mp('hook (match)'):>15} | "
            f"{mp('hook (no match)'):>15} | {r['ratio_match']:>5.2f} | {r['ratio_nomatch']:>8.2f} | "
            f"{r['in_process']['match']['median_ms']:>7.1f} | {r['freshness']['call_after_edit_ms']:>9.1f} | "
            f"{r['candidate_rows']:>6,} | {r['index_build_s']:>6.1f} s {r['index_notes_per_s']:>7,}/s"
            + (f" | {mp('hook (common)'):>15} | {r['ratio_common']:>7.2f}" if "hook (common)" in a else "")
        )
    lines.append(
        "times in ms, median / p95 of whole processes through /bin/sh -c; ratio = hook median / "
        "`python -c pass` median; in-proc = median of hook.run() inside one process; edit call = the "
        "call right after an essence edit; cand. = gram-index rows fetched for the match command "
        f"({MATCHING} of them match)"
        + (
            "; hook, common = the common command, which matches the store's common crystals"
            if any("hook (common)" in r["arms"] for r in results.values())
            else ""
        )
    )
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated store sizes")
    ap.add_argument("--runs", type=int, default=40, help="timed rounds per size (each round runs every arm once)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--vocab-per-crystal",
        type=int,
        default=1,
        help="how many of a crystal's 3-6 terms come from the shared command vocabulary (rest synthetic)",
    )
    ap.add_argument(
        "--common",
        type=int,
        default=0,
        help="a store where this many crystals match one everyday command (a third hook arm)",
    )
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="CI smoke run: sizes 200,1000 and 8 rounds")
    ap.add_argument("--check", action="store_true", help="exit 1 when a bar is not met")
    ap.add_argument("--profile", action="store_true", help="cProfile in-process hook calls at the largest size")
    ap.add_argument("--profile-calls", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the temporary GEODE_HOME folders")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.runs, args.warmup = "200,1000", 8, 2
    args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]

    # The environment may set PYTHONDONTWRITEBYTECODE=1; an uncompiled hook would then compile
    # every module on every call. pip compiles installed packages, so this is the real case.
    # Every room the hook loads (geode/kernel and geode/delivery since the rooms moved: compiling
    # delivery alone left the kernel to be recompiled on every call, about 15 ms).
    from geode.delivery.hookmain import HOOK_ROOMS

    for room in HOOK_ROOMS:
        room_dir = os.path.join(REPO, "geode", room)
        if not os.path.isdir(room_dir) or not compileall.compile_dir(room_dir, quiet=1, maxlevels=0):
            raise BenchFailure(f"compileall failed on {room_dir}")
    if not compileall.compile_file(os.path.join(REPO, "geode", "__init__.py"), quiet=1):
        raise BenchFailure("compileall failed on geode/__init__.py")
    os.makedirs(OUT_DIR, exist_ok=True)

    _log(f"machine: {machine()}")
    results: dict[int, dict] = {}
    for n in args.sizes:
        results[n] = bench_size(n, args)

    print()
    print(f"geode hook speed, {time.strftime('%Y-%m-%d')}, {machine()}")
    print(
        f"command: {MATCH_COMMAND!r} (match, {MATCHING} crystals delivered), {NOMATCH_COMMAND!r} (no match); "
        f"{args.runs} interleaved rounds"
    )
    if args.common:
        print(
            f"common: {COMMON_COMMAND!r} matches {args.common} crystals of the store "
            + ", ".join(
                f"({n:,}: {r['common']['delivered_per_call']:g} delivered per call)" for n, r in sorted(results.items())
            )
        )
    print(table(results))
    print()
    print("hook steps in process (medians, ms; each on a fresh Index as in a hook call):")
    print(f"{'crystals':>9} | {'load_settings':>13} | {'key_lengths':>15} | {'refresh':>7} | {'candidates':>10}")
    for n in sorted(results):
        st = results[n]["steps"]
        print(
            f"{n:>9,} | {st['load_settings_ms']:>13.2f} | {st['key_lengths_ms']:>15.2f} | "
            f"{st['refresh_ms']:>7.2f} | {st['candidates_ms']:>10.2f}"
        )
    print()
    ok = True
    for label, detail, passed in verdicts(results):
        tag = "n/a " if passed is None else ("PASS" if passed else "FAIL")
        print(f"{tag}  {label}: {detail}")
        ok = ok and passed is not False
    print(
        "PASS  every timed match run delivered exactly the expected crystals; no-match runs printed nothing; "
        "ledger rows in SQLite; the edited essence was delivered on the next call"
    )
    for n in sorted(results):
        if "profile" in results[n]:
            print()
            print(f"[{n:,}] {results[n]['profile']}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    "machine": machine(),
                    "args": {k: v for k, v in vars(args).items()},
                    "verdicts": [{"criterion": a, "detail": b, "pass": c} for a, b, c in verdicts(results)],
                    "results": {str(k): v for k, v in results.items()},
                },
                fh,
                indent=1,
            )
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
