"""The filing gate's header check: a draft that changes a header its own tool reads (a Cursor
rule's lines, Hugo's TOML, Logseq's properties) is never filed, whichever agent made it.

Why here and not only in the agents: the promise "geode never quotes a Cursor rule's globs" is
about the queue; an agent added later, or a fix path no one thought of, gets it without knowing
it exists. What counts as the same header is ``geode.kernel.header_format``'s to say.
"""

from __future__ import annotations

import hashlib
import os

from geode.kernel.header_format import tool_header_change

#: the reason counted for drafts kept out, and the finding a person reads
WOULD_CHANGE_HEADER = "would-change-header"
HEADER_FINDING = "proposal-would-change-header"


def header_harms(root: str, draft) -> list[str]:
    """Why approving ``draft`` would change how a note's tool reads its header (empty: it would
    not). A file that cannot be read, or has changed since the draft was made, is filing's
    (apply's) to refuse, not this check's."""
    why: list[str] = []
    for c in draft.changes:
        if c.before_sha is None or c.after is None:
            continue
        try:
            with open(os.path.join(root, c.path), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() != c.before_sha:
            continue
        before = data.decode("utf-8", "replace")
        after = bytes(c.after).decode("utf-8", "replace")
        reason = tool_header_change(c.path, before, after)
        if reason:
            why.append(f"{c.path}: {reason}")
    return why
