"""The binding index finds exactly the crystals whose terms occur in the action's text, and
keys each term by its rarest piece, so terms sharing a prefix do not all come back."""

from __future__ import annotations

import json

from geode.delivery.index import Index, text_keys
from tests.helpers import Geode, crystal_text

NPM = ["npm install", "npm ci", "npm test", "npm run lint", "npm publish", "npm audit", "npm run build"]


def test_terms_sharing_a_prefix_are_not_fetched_for_each_other(tmp_path):
    g = Geode(tmp_path)
    for i in range(60):
        term = NPM[i % len(NPM)]
        g.write(f"c{i:02d}.md", crystal_text(f"advice {i}", name=f"c{i:02d}", match=f'"{term}, unique{i:02d}x"'))
    idx = Index(g.settings())
    idx.build()
    text = "npm run build 2>&1 | tail -20"
    found = idx.candidates(("bash",), text)
    expected = {f"c{i:02d}.md" for i in range(60) if NPM[i % len(NPM)] == "npm run build"}
    assert {row.path for row, _t in found} == expected and len(expected) == 8
    assert {t for _r, t in found} == {"npm run build"}
    # the crystals the key lookup brings back before SQLite's instr() check: the matches, not every
    # "npm " term; each term has at most two keys (its side-by-side form's and the grammar's)
    rows, crystals = idx.conn.execute(
        "SELECT COUNT(*), COUNT(DISTINCT crystal) FROM grams WHERE action='bash' AND key IN (SELECT value FROM json_each(?))",
        (json.dumps(text_keys(text, idx.key_lengths())),),
    ).fetchone()
    idx.close()
    assert crystals == len(expected) and rows <= 2 * len(expected), (rows, crystals)


def test_a_term_added_after_the_build_is_found(tmp_path):
    g = Geode(tmp_path)
    g.write("a.md", crystal_text("a", name="a", match='"npm install"'))
    g.init_db()
    assert g.bash("npm ci && make").stdout == ""  # builds the index; nothing matches
    g.write("b.md", crystal_text("Clean installs.", name="b", match='"npm ci"'))
    res = g.bash("npm ci && make")
    assert "Clean installs." in res.context
