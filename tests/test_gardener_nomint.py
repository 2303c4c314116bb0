"""The Gardener never mints knowledge from text it read (issue 5, DESIGN principle 4).

A store full of prose (every note a page of sentences, descriptions that are sentences, the
words of the prose the same words the agents hunt for), and a ledger that exercises all four
rules and even carries the store's sentences itself (a grep for a whole sentence, searches
whose query is a sentence of a note). Every proposal it files is taken apart: the bytes it
adds (a new file whole; for an edit, the lines it adds) must contain no sentence of any note
and no 8-word shingle of any note, once the values copied from the edited note's own
frontmatter (its existing match terms, which a widened match line repeats) are set aside.
"""

from __future__ import annotations

import difflib
import random
import re

from geode.agents.upkeep import run_agent
from geode.kernel.note import parse_note
from tests.test_gardener import DAY, END, Ledger, after_bytes, crystal, filed, make_env

WORDS = (
    "deploy rollback kubectl release staging helm chart cluster pipeline exit code tail build cache "
    "token secret rotate migrate schema index query timeout retry budget queue worker broker lock "
    "session commit branch merge rebase tag publish artifact registry mirror proxy certificate"
).split()
GLUE = "the a when after before because so that if then and or but with into from over under".split()
SHINGLE = 8


def sentence(rng: random.Random) -> str:
    n = rng.randint(7, 16)
    words = [rng.choice(WORDS) if i % 2 == 0 else rng.choice(GLUE) for i in range(n)]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def prose_store(rng: random.Random, n: int = 40) -> dict[str, str]:
    files = {}
    for i in range(n):
        desc = sentence(rng)
        body = "\n\n".join(" ".join(sentence(rng) for _ in range(rng.randint(3, 6))) for _ in range(4))
        if i < 8:  # crystals, with a binding and an essence of sentences
            match = ["make deploy", "helm upgrade", "cargo", "frobnicate", "npm run", "pytest", "go vet", "tsc"][i]
            extra = f"description: {desc}\ntags: [{'deploy' if i == 1 else 'misc'}]\n"
            files[f"crystals/c{i}.md"] = (
                crystal(f"crystal-{i}", f'"{match}"', extra=extra, essence=sentence(rng) + " " + sentence(rng))
                + "\n"
                + body
                + "\n"
            )
        else:
            files[f"pages/p{i:02d}.md"] = f"---\ntitle: Page {i}\ndescription: {desc}\n---\n# Page {i}\n\n{body}\n"
    return files


def prose_of(text: str) -> list[str]:
    """A note's text: its description and every line of prose (the essence and the body);
    frontmatter keys, headings and markers are syntax, not text."""
    note = parse_note(text, "x.md")
    chunks = [str(note.frontmatter.get("description") or "")]
    chunks += [
        ln for ln in text.split("\n") if ln and not ln.startswith(("#", "-", "<!--", "---", " ")) and ":" not in ln[:20]
    ]
    return chunks


def sentences_of(text: str) -> list[str]:
    out = []
    for chunk in prose_of(text):
        for s in re.split(r"(?<=[.!?])\s+", chunk):
            w = words(s)
            if len(w) >= 3:
                out.append(" ".join(w))
    return out


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(ws: list[str], k: int = SHINGLE) -> set[str]:
    return {" ".join(ws[i : i + k]) for i in range(len(ws) - k + 1)}


def own_values(text: str) -> list[str]:
    note = parse_note(text, "x.md")
    vals: list[str] = []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif v is not None:
            vals.append(str(v))

    walk(note.frontmatter)
    vals += [lk.target for lk in note.links]
    return sorted(vals, key=len, reverse=True)


def added_text(before: bytes | None, after: bytes) -> str:
    a = after.decode("utf-8")
    if before is None:
        return a
    old = before.decode("utf-8").splitlines()
    return "\n".join(ln[1:] for ln in difflib.ndiff(old, a.splitlines()) if ln.startswith("+ "))


def test_no_proposal_carries_a_sentence_or_shingle_of_any_note(tmp_path):
    rng = random.Random(5)
    files = prose_store(rng)
    settings, engine, root = make_env(tmp_path, files)
    L = Ledger(settings, root)
    # deliveries: enough ledger for the never-fired rule; c0 unlocks work, c4 never does
    for i in range(24):
        L.delivered(END - 35 * DAY + i * 1.5 * DAY, f"d{i}", "main:crystals/c0.md", term="make deploy")
    for i in range(3):
        L.delivered(END - 2 * DAY + i * 100, f"n{i}", "main:crystals/c4.md", term="npm run")
        L.blocked(END - 2 * DAY + i * 100 + 5, f"n{i}", "grep -rn budget {root}")
    for i in range(2):  # c5..c7 fired, too rarely to judge their salience
        L.delivered(END - 3 * DAY + i * 100, f"q{i}", "main:crystals/c5.md", term="pytest")
        L.delivered(END - 3 * DAY + i * 100, f"r{i}", "main:crystals/c6.md", term="go vet")
        L.delivered(END - 3 * DAY + i * 100, f"t{i}", "main:crystals/c7.md", term="tsc")
    # c1 (tagged deploy) never fired; its topic came up where kubectl and helm chart were hunted
    t = END - 4 * DAY
    L.blocked(t, "k1", "grep -rn deploy {root}")
    L.blocked(t + 10, "k1", "grep -rn kubectl {root}")
    L.blocked(t + 20, "k2", 'rg "kubectl|deploy" {root}')
    # c2 (cargo) and c3 (frobnicate) never fired, no topic: retired
    # the agent grepped for a whole sentence of a note: too long to be a term, nothing taken
    whole = sentences_of(files["pages/p10.md"])[1]
    L.blocked(t + 30, "k3", f'grep -rn "{whole}" {{root}}')
    L.blocked(t + 40, "k4", f'grep -rn "{whole}" {{root}}')
    # pages/p11 found by three searches whose queries are sentences of notes
    for i in range(3):
        s = f"s{i}"
        L.delivered(t + 100 * i + 50, s, "main:crystals/c0.md", term="make deploy")
        L.searched(t + 100 * i + 60, s, sentences_of(files["pages/p11.md"])[i], ["pages/p11.md", "pages/p12.md"])
    L.write()

    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == "ok", report.message
    kinds = sorted((p["kind"], p["paths"][0]) for p in report.proposals)
    assert kinds == [
        ("edit", "crystals/c0.md"),  # salience up: unlocked work
        ("edit", "crystals/c1.md"),  # widened with kubectl
        ("edit", "crystals/c4.md"),  # salience down: a lookup followed every delivery
        ("edit", "pages/p11.md"),  # bound to bash, "make deploy"
        ("edit", "pages/p12.md"),  # found by the same searches: bound the same way
        ("new_note", "stubs/lookup-budget.md"),
        ("new_note", "stubs/lookup-deploy-kubectl.md"),
        ("status", "crystals/c2.md"),  # retired
        ("status", "crystals/c3.md"),
    ]
    assert report.examined["blocked_without_terms"] == 2  # the two sentence greps

    note_sentences = {path: sentences_of(text) for path, text in files.items()}
    note_shingles = set()
    for _path, text in files.items():
        for chunk in prose_of(text):
            note_shingles |= shingles(words(chunk))
    assert sum(len(v) for v in note_sentences.values()) > 700 and len(note_shingles) > 5000

    def violations(add: str) -> list[str]:
        aw = words(add)
        flat = " " + " ".join(aw) + " "
        bad = [s for sents in note_sentences.values() for s in sents if f" {s} " in flat]
        return bad + sorted(shingles(aw) & note_shingles)

    # the check itself catches a copy: one sentence of a note inside an otherwise clean stub
    copied = note_sentences["pages/p20.md"][3]
    assert violations("## Where this came from\n" + copied.capitalize() + ".\n")
    assert violations(" ".join(copied.split()[:SHINGLE]))
    checked = 0
    for p in filed(engine, "r"):
        for _path, before, after in after_bytes(engine, p["id"]):
            add = added_text(before, after)
            if before is not None:  # the edited note's own frontmatter values and link targets
                for v in own_values(before.decode("utf-8")):
                    add = add.replace(v, " ")
            assert add.strip(), p["title"]
            assert not violations(add), (p["title"], violations(add)[:3])
            checked += 1
        assert not violations(p["title"]) and not violations(p["rationale"]), p["title"]
    assert checked == 9
