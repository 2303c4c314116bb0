"""One ledger row per search: kind ``searched``, the hits in ``detail`` (and one ``read`` row per
note read on demand, below).

Why: a note found by search again and again is a note that should have arrived on its own.
The Gardener reads these rows (with the rows just before them in the same session) and
proposes binding such a note to the action that came before the searches.

Standard library only, and the hook's lean subset of it (``fastjson``, not ``json``): ``geode
search`` and prompt-time recall in the hook both call it. It never breaks a search: a ledger that cannot be written loses this row, not the answer.

Row: ``kind = "searched"``, ``session``, ``action = "search"``, ``channel = "rag"``, ``domain``
(when every hit is in one domain), ``detail = {"query": the query (cut to 300 characters),
"hits": ["domain:path", ...] (at most 20, in rank order; the ledger's ``crystal_id`` form)}``.
"""

from __future__ import annotations

from geode.delivery import ledger
from geode.kernel import fastjson

KIND = "searched"
MAX_QUERY_CHARS = 300
MAX_HITS = 20
#: detail stays well inside one spool line (``ledger.MAX_LINE_BYTES``)
MAX_DETAIL_CHARS = 3000


def _address(hit: dict) -> str:
    domain = str(hit.get("domain") or "")
    path = str(hit.get("path") or "")
    if path:
        return f"{domain}:{path}"
    addr = str(hit.get("address") or "")
    if addr.startswith("geode://"):  # geode://domain/permalink: the permalink, not the file path
        rest = addr[len("geode://") :]
        dom, _, perm = rest.partition("/")
        return f"{dom}:{perm}"
    return addr


def search_event(query: str, hits: list[dict], session: str = "") -> dict:
    """The ledger row for one search (not written)."""
    addresses: list[str] = []
    for h in hits or []:
        if isinstance(h, dict):
            a = _address(h)
            if a and a not in addresses:
                addresses.append(a)
        if len(addresses) >= MAX_HITS:
            break
    detail = {"query": str(query or "")[:MAX_QUERY_CHARS], "hits": addresses}
    text = fastjson.dumps(detail)
    while len(text) > MAX_DETAIL_CHARS and detail["hits"]:
        detail["hits"] = detail["hits"][:-1]
        text = fastjson.dumps(detail)
    domains = {a.split(":", 1)[0] for a in detail["hits"]}
    return ledger.new_event(
        KIND,
        session=str(session or ""),
        action="search",
        channel="rag",
        domain=domains.pop() if len(domains) == 1 else "",
        detail=text,
    )


def record_search(settings, query: str, hits: list[dict], session: str = "") -> None:
    """Append one ``searched`` row for this search; never raises."""
    try:
        ledger.append(settings, [search_event(query, hits, session)])
    except (OSError, ValueError):  # what ``ledger.append`` raises when the database and the spool both fail
        pass  # search must answer even when the ledger cannot be written


#: A note read in full on demand (``geode read``, the MCP ``read_note`` tool): use of that note,
#: which the Cleaner counts (``USE_KINDS``) before it proposes archiving a note nobody uses.
READ_KIND = "read"


def read_event(domain: str, path: str, address: str = "", session: str = "", via: str = "") -> dict:
    """The ledger row for one note read (not written): ``crystal_id`` in the ledger's
    ``domain:path`` form, ``action = "read"``, ``detail = {"address", "via"}``."""
    detail = fastjson.dumps({"address": str(address or "")[:MAX_QUERY_CHARS], "via": str(via or "")})
    return ledger.new_event(
        READ_KIND,
        session=str(session or ""),
        domain=str(domain or ""),
        crystal_id=f"{domain}:{path}",
        path=str(path or ""),
        action="read",
        channel="rag",
        detail=detail,
    )


def record_read(settings, domain: str, path: str, address: str = "", session: str = "", via: str = "") -> None:
    """Append one ``read`` row; never raises (the note is returned whatever the ledger does)."""
    try:
        ledger.append(settings, [read_event(domain, path, address, session, via)])
    except (OSError, ValueError):  # what ``ledger.append`` raises when the database and the spool both fail
        pass
