"""The Librarian and the note page judge a link the same way (issue 24): the page (``read_note``,
behind ``geode read`` and the web note page) counted ``[c](c.md)`` as resolved, by a name lookup
anywhere in the store, while the Librarian called it broken (no ``c.md`` beside the note). Both
now take a markdown link's path from ``geode.kernel.linkpath``."""

from __future__ import annotations

from geode.agents.upkeep import run_agent
from geode.recall.context import read_note

LINKS = {
    # target: resolved?
    "[c](c.md)": False,  # no c.md beside a.md: a path, not a name (the contradiction)
    "[c2](sub/c.md)": True,
    "[d](d)": True,  # no suffix: d.md
    "[g](guide)": True,  # a folder: its README.md
    "[[sub/c]]": True,
    "[[c]]": True,  # a wikilink names a note: sub/c.md's stem
    "[[Bee]]": True,  # b-note's name
    "[[B Note]]": True,  # its title
    "[[nowhere]]": False,
}


def test_the_librarian_and_the_note_page_agree_on_every_link(geode_env):
    body = "\n".join(f"Line {i}: {lk}." for i, lk in enumerate(LINKS))
    geode_env.files(
        {
            "a.md": f"---\ntitle: A\n---\n{body}\n",
            "b-note.md": "---\ntitle: B Note\nname: bee\n---\nbody\n",
            "sub/c.md": "---\ntitle: C\n---\nc\n",
            "d.md": "---\ntitle: D\n---\nd [[A]]\n",
            "guide/README.md": "---\ntitle: Guide\n---\ng\n",
        }
    )
    settings, engine, _root = geode_env
    report = run_agent(settings, engine, "r", "librarian")
    broken = {f.target for f in report.findings if f.path == "a.md" and f.kind.startswith("broken")}
    page = read_note(settings, f"geode://{settings.default_domain}/a")
    unresolved = {lk["target"] for lk in page["links"] if not lk["resolved"]}
    assert len(page["links"]) == len(LINKS)  # examined every one
    want = {lk.split("(")[-1].rstrip(")").strip("[]") for lk, ok in LINKS.items() if not ok}
    assert broken == want
    assert unresolved == want
