"""The crystal registry: which notes are bound crystals, and which of them the delivery budget
cuts. ``geode stats`` and the page's health view count delivery figures against it, so both say
the same number of crystals.
"""

from __future__ import annotations

from typing import NamedTuple

from geode.kernel.config import Settings


class CrystalRegistry(NamedTuple):
    """Crystal ids (``domain:path``) of the bound notes, and those whose essence exceeds the
    budget (a tuple: ``ids, oversize = registered_crystals(settings)``)."""

    ids: list[str]
    oversize: list[str]


def registered_crystals(settings: Settings) -> CrystalRegistry:
    """Every bound note of the configured domains, read from the files."""
    from geode.delivery.pack import Item, render
    from geode.kernel.store import load_store

    ids: list[str] = []
    oversize: list[str] = []
    for domain, root in settings.domain_roots():
        for n in load_store(root, domain, settings.max_file_bytes).notes:
            if isinstance(n.frontmatter.get("crystal"), dict):
                cid = f"{domain}:{n.path}"
                ids.append(cid)
                if (
                    n.essence
                    and len(render(Item(cid, domain, n.path, n.path, n.name, "x" * 12, n.essence), "bash"))
                    > settings.budget
                ):
                    oversize.append(cid)
    return CrystalRegistry(ids, oversize)
