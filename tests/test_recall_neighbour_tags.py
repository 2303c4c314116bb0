"""The neighbour stage's entity edges (issue 10, speed): only an anchor's rare tags' holders are
read, and the edges are what they were: 1 / (holders - 1) per tag held by 2 to 5 notes."""

from __future__ import annotations

from geode.recall.context import find_note
from geode.recall.index_tables import dispose_engines
from geode.recall.search import index_for, neighbours
from tests.stores import fresh_settings, write


def test_rare_tags_tie_their_holders_and_common_tags_do_not(tmp_path):
    root = tmp_path / "notes"
    notes = {
        "anchor.md": ["zeppelin", "quasar", "common"],
        "z1.md": ["zeppelin"],  # zeppelin: 2 holders (anchor, z1): weight 1
        "q1.md": ["quasar"],  # quasar: 4 holders: weight 1/3 each
        "q2.md": ["quasar", "common"],
        "q3.md": ["quasar"],
    }
    for i in range(8):  # common: 10 holders, more than RARE_TAG_DF (5): no edge
        notes[f"c{i}.md"] = ["common"]
    for rel, tags in notes.items():
        write(root, rel, f"---\ntitle: {rel[:-3]}\ntags: [{', '.join(tags)}]\n---\nbody of {rel}\n")
    settings = fresh_settings(root, tmp_path / "home")
    try:
        idx = index_for(settings)
        idx.refresh()
        dom = settings.default_domain
        ids = {rel: find_note(idx, dom, rel)["id"] for rel in notes}
        got = neighbours(idx, settings, find_note(idx, dom, "anchor.md"))
        assert got == {ids["z1.md"]: 1.0, ids["q1.md"]: 1 / 3, ids["q2.md"]: 1 / 3, ids["q3.md"]: 1 / 3}
        # with a limit of 10 the common tag (10 holders) ties its holders too: 1/9 each
        got5 = neighbours(idx, settings, find_note(idx, dom, "anchor.md"), max_tag_df=10)
        assert got5[ids["c0.md"]] == 1 / 9 and got5[ids["q2.md"]] == 1 / 3 + 1 / 9
    finally:
        dispose_engines()
