"""The routing that travels with the MCP server: when to use which tool, and what each domain holds.

Apart because it is text for the agent, not code: :data:`ROUTING` and the domain list make the
instructions sent on initialize (:func:`instructions`), and the tool descriptions (``*_DOC``) say
the same per tool. ``[domains_about]`` in ``geode.toml`` gives each domain its line, else its top
folders do.
"""

import os

ROUTING = """\
geode holds this project's notes: decisions, runbooks, facts and lessons written down so that
nobody has to rediscover them. Recall them with these tools before you guess, grep or ask.

When to use which tool:
1. A question about how, why or what in this project: call `search` first, with the question in
   plain words. Any language works (a German note answers an English question).
2. A hit's snippet is a pointer, not the answer: call `read_note` on the hit's address before you
   answer from it or act on it.
3. For what holds now, pass status="stable" (it keeps only notes marked stable; notes without a
   status drop out, so use it where the domain marks status). A retired note ranks lower and its
   `superseded_by` names the note that replaced it: read that one.
4. Set `as_of` (a validity window) only when the question names a bounded date ("what applied on
   2025-03-01"), and only on the first search; otherwise leave it out.
5. To follow a hit's neighbourhood (what it relates to, depends on, supersedes, what links to
   it), call `build_context` on its address.
6. "What changed lately": `recent_activity`. Something worth keeping for next time:
   `write_note` (a new note is written at once; a change to an existing note is filed as a
   proposal that a person approves).
"""


# -- domains -----------------------------------------------------------------------------------
def domains_about(settings) -> dict[str, str]:
    """``[domains_about]`` of ``geode.toml`` (``name = "one line on what the domain holds"``),
    checked and read once with the rest of the settings; empty for a one-off store."""
    return dict(getattr(settings, "domains_about", None) or {})


def _top_folders(root: str, n: int = 8) -> list[str]:
    try:
        names = sorted(
            e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False) and not e.name.startswith((".", "_"))
        )
    except OSError:
        return []
    return names[:n] + (["..."] if len(names) > n else [])


def domain_lines(settings) -> list[dict]:
    """One entry per configured domain: its name, one line on what it holds (configured, else its
    top folders), and whether it is the default."""
    about = domains_about(settings)
    out = []
    for name, root in settings.domains.items():
        line = about.get(name, "")
        if not line:
            folders = _top_folders(root)
            line = (
                "folders " + ", ".join(f + "/" for f in folders) if folders else "notes at the top level"
            ) + " (no description: add one under [domains_about] in geode.toml)"
        out.append({"name": name, "about": line, "default": name == settings.default_domain})
    return out


def instructions(settings) -> str:
    """The routing guidance and the domain list, sent to the client on initialize."""
    lines = [ROUTING, "Domains (address notes as geode://<domain>/<permalink>):"]
    for d in domain_lines(settings):
        lines.append(f"- {d['name']}{' (default)' if d['default'] else ''}: {d['about']}")
    return "\n".join(lines) + "\n"


# -- the tools' descriptions ------------------------------------------------------------------
SEARCH_DOC = """\
Search this project's notes by meaning and by words. Call it FIRST for any question about how,
why or what in this project, with the question in plain words (any language).
Returns hits with address, domain, title, score, snippet and line. A snippet is a pointer, not the
answer: call read_note on a hit before you answer from it. Filters (all optional, combined with
AND): domain; type; tag (all must hold); status ("stable" for what holds now; it drops notes
without a status); where (frontmatter: "key=value", "key=[a,b]", "key~value", "key>=value",
"key!=value", or a JSON object like {"tags": {"$contains_any": ["a","b"]}}); as_of (YYYY-MM-DD:
notes valid on that date; only for a question that names a bounded date, and only on the first
search); after (recorded on or after a date); limit; mode (hybrid, text, semantic).
Without a query, lists what the filters select."""

CONTEXT_DOC = """\
The neighbourhood of a note: the notes it links to and that link to it (typed relations such as
relates_to, depends_on, supersedes, and prose links), up to `depth` hops, best first. Use it to
follow a search hit's neighbourhood. `address` is a hit's address (geode://domain/permalink), or
geode://domain/folder/* for every note under a folder. Titles and relations only: read_note the
ones you need."""

READ_DOC = """\
Read one note in full: its file's content, frontmatter, observations, each link resolved (or not)
and who links to it. Call it on a search hit before answering from it. `address` is
geode://domain/permalink (domain:permalink or a bare permalink in the default domain work too).
An unknown address returns the closest addresses."""

RECENT_DOC = """\
What changed lately: notes whose files changed within `period` (day, week, fortnight, month, Nh,
Nd, Nw, or a date YYYY-MM-DD meaning since that date), newest first, across domains or in the
ones named."""

WRITE_DOC = """\
Record something worth keeping for next time (a decision, a fix that worked, a fact about this
project) as a note. Writes a NEW note at <folder>/<title as a file name>.md in the domain, after
linting it; lint errors refuse the write and say what to fix. It never overwrites: when that note
(or one with the same title in the folder) exists, the new text is filed as a proposal in the
approval queue for a person to approve, and the result gives its id. Optional: frontmatter
(description, type, tags, status, ...); crystal (a binding that delivers the note when an action
matches: deliver, on, match) with essence (the text delivered, about 1,500 characters at most)."""
