"""Matching through the real index and engine: the index never hides a match, specificity
orders what fits the budget, and only the crystals that fit are read from disk."""

from __future__ import annotations

import os

from bench.match_eval import engine_fires
from geode.delivery.engine import Delivery
from geode.delivery.index import Index
from geode.delivery.match import term_matches
from tests.helpers import Geode
from tests.matching_cases import load_cases


def test_the_engine_fires_exactly_where_the_rule_does_on_the_labelled_set():
    """The index's prefilter (gram keys, ``instr`` on the normalised text) must never hide a
    match: the engine's verdict equals ``match.term_matches`` on every labelled case."""
    cases, _ = load_cases()
    fired = engine_fires(cases)
    direct = [term_matches(c.term, (c.action,), c.text) for c in cases]
    wrong = [(c, f, d) for c, f, d in zip(cases, fired, direct, strict=False) if f != d]
    assert not wrong, wrong[:5]
    assert sum(fired) > 200


def test_the_engine_fires_exactly_where_the_rule_does_on_the_grammar_set():
    """The same on the grammar's agent-shaped set: a grammar term is keyed by one of its words
    (they are no longer side by side), and that key must still never hide a match; every label
    of the set is met (no false fire, no miss)."""
    cases, _ = load_cases(os.path.join(os.path.dirname(__file__), "fixtures", "matching_cases_grammar.txt"))
    assert len(cases) >= 150
    fired = engine_fires(cases)
    direct = [term_matches(c.term, (c.action,), c.text) for c in cases]
    wrong = [(c, f, d) for c, f, d in zip(cases, fired, direct, strict=False) if f != d]
    assert not wrong, wrong[:5]
    mislabelled = [c for c, f in zip(cases, fired, strict=False) if f != c.fire]
    assert not mislabelled, mislabelled[:5]


def _act(g: Geode, text: str, session: str = "s", settings=None):
    s = settings or g.settings()
    idx = Index(s)
    try:
        idx.ensure()
        idx.refresh()
        d = Delivery(s, session, "main", idx)
        res = d.act(("bash",), text)
        d.close()
        return res
    finally:
        idx.close()


def test_the_longer_rarer_term_goes_first_and_says_it_selected_the_crystal(tmp_path):
    g = Geode(tmp_path, config="[delivery]\nbudget = 900\n")
    essence = "e" * 500  # one note fits the budget, not two
    g.crystal("broad.md", "broad " + essence, name="broad", match='"git commit"')
    for i in range(6):  # `git commit` is carried by many crystals of the store: it is not rare
        g.crystal(f"other{i}.md", f"other {i}", name=f"other{i}", on="write", match='"git commit"')
    g.crystal("narrow.md", "narrow " + essence, name="narrow", match='"git commit --amend"')
    res = _act(g, "git commit --amend --no-edit")
    assert [e["name"] for e in res["delivered"]] == ["narrow"]
    assert [e["name"] for e in res["skipped"]] == ["broad"]
    assert res["delivered"][0]["term"] == "git commit --amend"
    assert 'matched "git commit --amend"' in res["text"]


def test_salience_still_outranks_specificity(tmp_path):
    g = Geode(tmp_path, config="[delivery]\nbudget = 900\n")
    essence = "e" * 500
    g.crystal("broad.md", "broad " + essence, name="broad", match='"git commit"', salience=0.9)
    g.crystal("narrow.md", "narrow " + essence, name="narrow", match='"git commit --amend"')
    res = _act(g, "git commit --amend")
    assert [e["name"] for e in res["delivered"]] == ["broad"]


class _Spy:
    """Counts the files read for their essence and the files parsed (by a refresh or a reload)."""

    def __init__(self, monkeypatch):
        from geode.delivery import index as index_mod

        self.essence, self.reload, self.parsed = [], [], []
        orig_essence, orig_reload, orig_parse = Index.essence_of, Index.reload, index_mod.parse_crystal_text

        def parse(text, path):
            self.parsed.append(path)
            return orig_parse(text, path)

        monkeypatch.setattr(index_mod, "parse_crystal_text", parse)

        def essence_of(idx, row):
            self.essence.append(row.path)
            return orig_essence(idx, row)

        def reload(idx, domain, rel):
            self.reload.append(rel)
            return orig_reload(idx, domain, rel)

        monkeypatch.setattr(Index, "essence_of", essence_of)
        monkeypatch.setattr(Index, "reload", reload)


def test_only_the_crystals_that_fit_are_read(tmp_path, monkeypatch):
    g = Geode(tmp_path)
    for i in range(60):
        g.crystal(f"c{i:02d}.md", f"note {i:02d} " + "x" * 800, name=f"c{i:02d}", match='"git push"')
    _act(g, "ls", session="warm")  # builds the index
    spy = _Spy(monkeypatch)
    res = _act(g, "git push origin main")
    n = len(res["delivered"])
    assert 1 <= n <= 5 and len(res["skipped"]) == 60 - n
    assert sorted(spy.essence) == sorted(e["path"] for e in res["delivered"])  # read: what was delivered, only
    assert spy.reload == [] and spy.parsed == []  # nothing parsed: every file was as indexed
    # the skipped ones' ledger rows still carry the hash of their essence, from the index
    assert all(len(e["path"]) and e["reason"] for e in res["skipped"])

    # a skipped crystal edited on disk: the next call parses that file alone
    victim = res["skipped"][0]["path"]
    p = g.store / victim
    p.write_text(p.read_text().replace("x" * 800, "y" * 801))
    spy.essence.clear()
    res2 = _act(g, "git push origin main", session="other")
    assert spy.parsed == [victim]
    assert sorted(spy.essence) == sorted(e["path"] for e in res2["delivered"])


def test_an_edit_with_the_same_size_and_mtime_is_still_delivered_fresh(tmp_path):
    """The essence read without a parse is checked against the index's hash; a mismatch means
    the file changed under an unchanged stat, and it is parsed and delivered in its new form."""
    g = Geode(tmp_path)
    p = g.crystal("a.md", "alpha text", name="a", match='"git push"')
    assert "alpha text" in _act(g, "git push")["text"]
    st = os.stat(p)
    p.write_text(p.read_text().replace("alpha text", "omega text"))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size
    res = _act(g, "git push", session="s2")
    assert "omega text" in res["text"] and "alpha text" not in res["text"]


def test_the_stop_template_suggests_terms_that_pass_lint(tmp_path):
    from geode.delivery.match import term_problems

    g = Geode(tmp_path)
    g.init_db()
    for cmd in [
        "ls",
        "ls -la",
        "cd app",
        "git commit -m 'a'",
        "git commit -m 'b'",
        "git commit -am c",
        "npm test",
        "npm test",
        "false",
        "pytest tests/test_x.py -x",
    ]:
        assert g.bash(cmd, session="st").rc == 0
    reason = g.run("Stop", session="st", stop_hook_active=False, last_assistant_message="Done.").json["reason"]
    line = next(ln for ln in reason.splitlines() if ln.strip().startswith("match:"))
    terms = [t.strip() for t in line.split(":", 1)[1].strip().strip('"').split(",")]
    assert terms == ["git commit", "npm test", "pytest"], terms
    for t in terms:
        assert [p for p in term_problems(t, "bash") if p[1] != "info"] == [], t


def test_the_control_arm_decides_only_for_crystals_that_would_be_delivered(tmp_path):
    """A common command matching many crystals: the control arm is asked only about those that
    fit the budget (a crystal that would not have been delivered was never exposed, so it is
    no unit of the study), a withheld one frees its room for the next, and nothing skipped for
    the budget is ever recorded as withheld."""
    g = Geode(tmp_path, config="[delivery]\nbudget = 1200\n")
    for i in range(60):  # each block is about 450 characters: two fit the budget
        g.crystal(f"c{i:02}.md", f"note {i} " + "x" * 400, name=f"c{i:02}", match='"npm test"')
    settings = g.settings(withhold="0.5")
    res = _act(g, "npm test", session="sess-control", settings=settings)
    delivered = [e["name"] for e in res["delivered"]]
    withheld = [e["name"] for e in res["withheld"]]
    skipped = [e["name"] for e in res["skipped"]]
    assert len(delivered) == 2, res["text"][:300]
    assert withheld, "with half the units withheld, the first crystals asked include withheld ones"
    assert len(delivered) + len(withheld) + len(skipped) == 60
    assert not set(withheld) & set(skipped)
    # asked in packing order and only until the budget was full: far fewer than 60 decisions
    assert len(withheld) < 20, withheld
    from geode.delivery import control

    plan = control.load_plan(settings, None)
    for e in res["withheld"] + res["delivered"]:  # each decision is the unit's fixed assignment
        in_withheld_arm = control.assignment(plan["salt"], "sess-control", e["crystal_id"]) < 0.5
        assert in_withheld_arm == (e in res["withheld"]), e
