"""The ``reading`` check of ``geode doctor``: can geode read the constructs this store's links
are written in? When most uses of one construct do not resolve (``geode.links.plausible``), the
Librarian's findings about it would be false, so doctor fails, naming the construct, the count
and a sample, instead of calling a run green whose findings are a misreading.

Apart from ``geode.services.doctor`` (one check per module, each branch its own): it reads the
Librarian's report of an upkeep run just made when there is one, else reads the store's links now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def reading_check(settings, reports: Mapping[str, Any] | None = None) -> tuple[bool, dict[str, Any], str]:
    """``(ok, examined, message)``: ok when every construct of every domain reads plausibly."""
    said: list[str] = []
    flavours: list[str] = []
    rep = (reports or {}).get("librarian")
    if rep is not None:
        said = [f"{f.domain}: {f.message}" for f in rep.findings if f.kind == "cannot-read"]
    else:
        from geode.kernel.store import load_store
        from geode.links.plausible import audit
        from geode.links.resolver import StoreLinks

        for domain, root in settings.domain_roots():
            try:
                load = load_store(root, domain, settings.max_file_bytes)
            except OSError:
                continue  # the store check says why it cannot be read
            if not load.notes:
                continue
            links = StoreLinks(load, flavour=settings.upkeep.flavour, git_moves=False)
            flavours.append(f"{domain}: {links.flavour.said}")
            uses = (
                (n.path, r, res.status, bool(res.suggestion))
                for n in load.notes
                for r in links.refs(n)
                for res in (links.resolve(n, r),)
            )
            said += [f"{domain}: {u.message}" for u in audit(uses).values()]
    examined = {"constructs_unreadable": len(said)}
    if said:
        return False, examined, "; ".join(said)
    return (
        True,
        examined,
        "every construct the links use reads plausibly" + (f" ({', '.join(flavours)})" if flavours else ""),
    )
