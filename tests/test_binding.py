"""Bindings: each weakness of the original product's binding check has a test here
(docs/DESIGN.md, "Lessons from the original product").

The original said "all is well" over typos in ``on:``/``who:``, a quoted ``match:`` value and
a list-valued ``match:``. Here each is handled or reported with its line, and a binding that
is reported as never firing must indeed never fire (checked through the real index and engine).
"""

from __future__ import annotations

from geode.delivery.binding import parse_binding, split_terms, who_matches
from geode.delivery.engine import Delivery
from geode.delivery.index import Index
from geode.kernel.note import parse_note
from tests.helpers import Geode, crystal_text

LINES = {"crystal": 5, "crystal.deliver": 6, "crystal.on": 7, "crystal.match": 8, "crystal.who": 9}


def _codes(b, severity=None):
    return [i.code for i in b.issues if severity is None or i.severity == severity]


def _issue(b, code):
    found = [i for i in b.issues if i.code == code]
    assert found, f"no {code} issue in {b.issues}"
    return found[0]


def _act(g: Geode, text: str, actions=("bash",), agent: str = "main", session: str = "sess") -> dict:
    """Deliver in-process through the real index and engine (no subprocess)."""
    s = g.settings()
    idx = Index(s)
    try:
        idx.ensure()
        idx.refresh()
        d = Delivery(s, session, agent, idx)
        return d.act(tuple(actions), text)
    finally:
        idx.close()


def _delivered(res: dict) -> set[str]:
    return {e["path"] for e in res["delivered"]}


# -- on: ----------------------------------------------------------------------------------


def test_on_typo_is_an_error_with_a_suggestion_and_the_line():
    b = parse_binding({"deliver": "act", "on": "bsah", "match": "| tail"}, LINES)
    issue = _issue(b, "unknown-on")
    assert issue.severity == "error" and issue.line == 7
    assert "did you mean 'bash'" in issue.message
    assert b.on == () and not b.can_fire


def test_on_typo_in_a_list_keeps_the_valid_actions():
    b = parse_binding({"deliver": "act", "on": "bash, comit", "match": "git"}, LINES)
    assert b.on == ("bash",)
    assert "did you mean 'commit'" in _issue(b, "unknown-on").message


def test_missing_on_is_reported():
    b = parse_binding({"deliver": "act", "match": "tail"}, LINES)
    assert _issue(b, "no-on").severity == "error" and not b.can_fire


def test_on_typo_never_fires(tmp_path):
    g = Geode(tmp_path)
    g.crystal("typo.md", "typo essence", on="bsah", match='"| tail"')
    g.crystal("good.md", "good essence", on="bash", match='"| tail"')
    assert _delivered(_act(g, "npm run build | tail -20")) == {"good.md"}


# -- who: ---------------------------------------------------------------------------------


def test_who_typo_is_an_error_with_a_suggestion():
    b = parse_binding({"deliver": "act", "on": "bash", "match": "| tail", "who": "subagnet"}, LINES)
    issue = _issue(b, "unknown-who")
    assert issue.severity == "error" and issue.line == 9
    assert "did you mean 'subagent'" in issue.message
    assert "subagnet" not in b.who


def test_who_typo_reaches_no_agent():
    """The binding says 'no valid who value; the crystal reaches no agent': it must reach none."""
    b = parse_binding({"deliver": "act", "on": "bash", "match": "| tail", "who": "subagnet"}, LINES)
    assert "no-who" in _codes(b, "error")
    for agent in ("main", "subagent", "subagent:Explore"):
        assert not who_matches(b.who, agent), f"a who typo fired for {agent} (who={b.who!r})"


def test_who_typo_never_fires_through_the_engine(tmp_path):
    g = Geode(tmp_path)
    g.crystal("typo.md", "typo essence", match='"| tail"', who="subagnet")
    g.crystal("good.md", "good essence", match='"| tail"', who="subagent")
    assert _delivered(_act(g, "npm run build | tail -20", agent="main")) == set()
    assert _delivered(_act(g, "npm run build | tail -20", agent="subagent")) == {"good.md"}


def test_who_classes_and_agent_types():
    assert who_matches(("all",), "main") and who_matches(("all",), "subagent")
    assert who_matches(("subagent",), "subagent:Explore") and not who_matches(("subagent",), "main")
    assert who_matches(("Explore",), "subagent:Explore") and not who_matches(("Explore",), "subagent:Plan")
    b = parse_binding({"deliver": "act", "on": "bash", "match": "x1", "who": "Explore"}, LINES, ("Explore", "Plan"))
    assert b.who == ("Explore",) and "unknown-who" not in _codes(b)
    b = parse_binding({"deliver": "act", "on": "bash", "match": "x1", "who": "Reviewer"}, LINES, ("Explore",))
    assert b.who == ("Reviewer",) and _issue(b, "unknown-who").severity == "warning"


# -- match: -------------------------------------------------------------------------------


def test_whole_match_value_quoted_inside_the_yaml_string():
    # match: "'| tail, | head'"  -> the YAML value is '| tail, | head' with its quotes
    note = parse_note(crystal_text("e", match="\"'| tail, | head'\""), "q.md")
    assert note.crystal["match"] == "'| tail, | head'"
    b = parse_binding(note.crystal, note.fm_lines)
    assert b.terms == ("| tail", "| head")
    issue = _issue(b, "match-quoted")
    assert issue.severity == "warning" and issue.line == note.line_of("crystal.match") == 5


def test_each_term_quoted_has_its_quotes_removed_and_reported():
    for value in ("'| tail', '| head'", '"| tail", "| head"', "'| tail', \"| head\""):
        terms, issues = split_terms(value, 8)
        assert terms == ["| tail", "| head"], (value, terms)
        assert [i.code for i in issues] == ["match-quoted-term", "match-quoted-term"], (value, issues)
        assert all(i.line == 8 for i in issues)


def test_quoted_terms_fire_without_their_quotes(tmp_path):
    g = Geode(tmp_path)
    g.crystal("q.md", "quoted essence", match="\"'| tail, | head'\"")
    res = _act(g, "npm run build | head -5")
    assert _delivered(res) == {"q.md"} and res["delivered"][0]["term"] == "| head"


def test_list_valued_match_makes_each_item_a_term(tmp_path):
    note = parse_note(
        '---\ncrystal:\n  on: bash\n  match:\n    - "| tail"\n    - npm run build\n---\n'
        "<!-- crystal:essence -->\nx\n<!-- /crystal:essence -->\n",
        "l.md",
    )
    b = parse_binding(note.crystal, note.fm_lines)
    assert b.terms == ("| tail", "npm run build")
    assert _issue(b, "match-list").severity == "info"
    assert b.can_fire
    flow = parse_binding({"on": "bash", "match": ["Docker Build", "kubectl"]}, LINES)
    assert flow.terms == ("Docker Build", "kubectl")
    g = Geode(tmp_path)
    g.write("l.md", note.text)
    assert _delivered(_act(g, "cd web && npm run build")) == {"l.md"}


def test_empty_terms_are_reported_and_dropped():
    terms, issues = split_terms("| tail,, | head,", 8)
    assert terms == ["| tail", "| head"]
    assert [i.code for i in issues] == ["match-empty-term", "match-empty-term"]
    b = parse_binding({"deliver": "act", "on": "bash", "match": " , ,"}, LINES)
    assert b.terms == () and not b.can_fire
    assert "no-match" in _codes(b, "error")
    b = parse_binding({"deliver": "act", "on": "bash", "match": "''"}, LINES)
    assert b.terms == () and "no-match" in _codes(b, "error")


def test_terms_are_kept_as_written_stripped_and_deduplicated_with_words_folded():
    terms, _ = split_terms("  Docker BUILD , docker build,KUBECTL , git branch -D, git branch -d")
    assert terms == ["Docker BUILD", "KUBECTL", "git branch -D", "git branch -d"]


def test_one_character_term_is_flagged_as_too_broad():
    terms, issues = split_terms("|, tail")
    assert terms == ["|", "tail"] and [i.code for i in issues] == ["match-too-broad"]


def test_unknown_binding_key_and_deliver_value_are_errors():
    b = parse_binding({"delivr": "act", "on": "bash", "match": "tail", "deliver": "akt"}, LINES)
    assert "did you mean 'deliver'" in _issue(b, "binding-unknown-key").message
    assert "did you mean 'act'" in _issue(b, "unknown-deliver").message
    assert b.deliver == () and not b.can_fire


def test_boot_and_inject_bindings_fire_without_terms():
    assert parse_binding({"deliver": "boot"}, LINES).can_fire
    assert parse_binding({"deliver": "inject, act", "on": "bash"}, LINES).deliver == ("inject", "act")


# -- no essence -----------------------------------------------------------------------------


def test_crystal_without_essence_is_reported_by_lint():
    from geode.delivery.lint import lint_note
    from geode.kernel.config import load_settings

    note = parse_note(crystal_text(None, name="hollow", match='"| tail"'), "hollow.md")
    assert note.essence is None
    problems = [
        p
        for p in lint_note(note, load_settings(env={"GEODE_HOME": "/nonexistent-geode-home"}))
        if p.code == "no-essence"
    ]
    assert len(problems) == 1
    assert problems[0].severity == "error" and problems[0].line == note.line_of("crystal") == 3


def test_crystal_without_essence_never_delivers(tmp_path):
    g = Geode(tmp_path)
    g.crystal("hollow.md", None, match='"| tail"')
    g.crystal("empty.md", "", match='"| tail"')
    g.crystal("full.md", "full essence", match='"| tail"')
    assert _delivered(_act(g, "make | tail")) == {"full.md"}


def test_short_unicode_and_crlf_crystals_fire(tmp_path):
    g = Geode(tmp_path)
    g.write("crlf.md", crystal_text("CRLF essence.", match='"| tail"').replace("\n", "\r\n"))
    g.crystal("short.md", "Short term essence.", match="rm")
    g.crystal("uni.md", "Unicode essence.", match="Café Build")
    assert _delivered(_act(g, "npm run build | tail -3")) == {"crlf.md"}
    assert _delivered(_act(g, "rm -rf build")) == {"short.md"}
    res = _act(g, "run CAFÉ BUILD now")
    assert _delivered(res) == {"uni.md"} and res["delivered"][0]["term"] == "Café Build"
