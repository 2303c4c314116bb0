"""The one frontmatter editor (``geode.kernel.frontmatter_edit``): a key's whole value replaced
(block scalars, block and flow lists over several lines, continuation lines), every other byte
kept (comments, CRLF, BOM, the body), a frontmatter added where there is none, nested crystal
keys, and a refusal naming the file and the key whenever the result would not read back as that
one change. The property test sets random values on random documents and reads them back with
the delivery parser."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from geode.kernel.crystal import split_frontmatter
from geode.kernel.frontmatter import FrontmatterError, parse_frontmatter
from geode.kernel.frontmatter_edit import FrontmatterEditError, remove_key, set_key, value_form
from geode.kernel.frontmatter_values import Quoted
from geode.kernel.note import parse_note

BOM = b"\xef\xbb\xbf"


def fm_of(data: bytes) -> dict:
    return parse_note(data.decode("utf-8-sig"), "n.md").frontmatter


# -- the bug that started it ----------------------------------------------------------------------
def test_a_folded_status_is_replaced_whole():
    before = b"---\nname: x\nstatus: >\n  active\ntags: [a]\n---\n# X\n"
    after = set_key(before, "status", "archived", path="x.md")
    assert after == b"---\nname: x\nstatus: archived\ntags: [a]\n---\n# X\n"
    assert fm_of(after) == {"name": "x", "status": "archived", "tags": ["a"]}  # not "archived active"


def test_a_literal_block_with_blank_lines_and_keep_chomping_is_replaced_whole():
    before = b"---\nstatus: |+\n  one\n\n  two\n\nname: x\n---\nB\n"
    after = set_key(before, "status", "archived")
    assert fm_of(after) == {"status": "archived", "name": "x"}
    assert b"one" not in after and b"two" not in after


# -- lists ----------------------------------------------------------------------------------------
def test_block_lists_stay_block_lists_with_their_indentation():
    before = b"---\nsupersedes:\n  - a\n  - b\nname: x\n---\nB\n"
    assert set_key(before, "supersedes", ["a", "c"]) == b"---\nsupersedes:\n  - a\n  - c\nname: x\n---\nB\n"
    assert set_key(before, "supersedes", []) == b"---\nsupersedes: []\nname: x\n---\nB\n"
    flush = b"---\ntags:\n- a\n- b\nname: x\n---\nB\n"  # items at the key's own indentation
    assert set_key(flush, "tags", ["b"]) == b"---\ntags:\n- b\nname: x\n---\nB\n"
    assert value_form(flush, "tags") == "block-list"


def test_comments_inside_a_block_list_go_with_it_and_the_keys_line_comment_stays():
    before = b"---\ntags:  # old ones\n  - a\n  # about b\n  - b\n# about name\nname: x\n---\nB\n"
    after = set_key(before, "tags", [])
    assert after == b"---\ntags: []  # old ones\n# about name\nname: x\n---\nB\n"


def test_a_flow_list_over_several_lines_is_replaced_whole():
    before = b"---\ntags: [alpha,\n  beta,\n  gamma]\nname: x\n---\nB\n"
    after = set_key(before, "tags", ["delta"])
    assert after == b"---\ntags: [delta]\nname: x\n---\nB\n"
    assert fm_of(after) == {"tags": ["delta"], "name": "x"}


def test_list_items_that_need_quotes_get_them():
    after = set_key(b"---\ntags: [a]\n---\nB\n", "tags", ["a, b", "[[x]]", "true", "", "ok"])
    assert after == b'---\ntags: ["a, b", "[[x]]", "true", "", ok]\n---\nB\n'
    assert fm_of(after)["tags"] == ["a, b", "[[x]]", "true", "", "ok"]


# -- scalars --------------------------------------------------------------------------------------
def test_quoted_values_keep_their_quotes_and_plain_text_is_quoted_only_when_it_must_be():
    assert set_key(b"---\nd: 'it''s'\n---\nB\n", "d", "it's new") == b"---\nd: 'it''s new'\n---\nB\n"
    assert set_key(b'---\nd: "x"\n---\nB\n', "d", 'say "hi"') == b'---\nd: "say \\"hi\\""\n---\nB\n'
    plain = b"---\nd: x\n---\nB\n"
    assert set_key(plain, "d", "y") == b"---\nd: y\n---\nB\n"
    for value, written in [
        ("true", b'"true"'),
        ("12", b'"12"'),
        ("a: b", b'"a: b"'),
        ("# no", b'"# no"'),
        ("**/*.py", b'"**/*.py"'),
        ("two\nlines", b'"two\\nlines"'),
        (" pad", b'" pad"'),
    ]:
        after = set_key(plain, "d", value)
        assert after == b"---\nd: " + written + b"\n---\nB\n", value
        assert fm_of(after)["d"] == value
    assert set_key(plain, "d", Quoted("y")) == b'---\nd: "y"\n---\nB\n'


def test_numbers_booleans_null_and_dates_read_back_with_their_types():
    import datetime as dt

    base = b"---\nname: x\n---\nB\n"
    for value, text in [
        (0.55, b"0.55"),
        (1, b"1"),
        (1e-07, b"0.0000001"),
        (True, b"true"),
        (None, b""),
        (dt.date(2024, 6, 1), b"2024-06-01"),
    ]:
        after = set_key(base, "v", value)
        assert after == b"---\nname: x\nv:" + (b" " + text if text else b"") + b"\n---\nB\n"
    assert fm_of(set_key(base, "v", 1e-07))["v"] == 1e-07
    assert fm_of(set_key(base, "v", True))["v"] is True
    assert fm_of(set_key(base, "v", dt.date(2024, 6, 1)))["v"] == "2024-06-01"  # dates stay text


def test_the_lenient_crystal_memory_form_is_kept_when_it_still_reads_back():
    before = b"---\ncrystal:\n  on: bash\n  match: | tail, |tail\n---\nB\n"
    assert value_form(before, "crystal.match") == "lenient"
    after = set_key(before, "crystal.match", "| tail, |tail, | head")
    assert after == b"---\ncrystal:\n  on: bash\n  match: | tail, |tail, | head\n---\nB\n"


# -- comments, continuation lines -----------------------------------------------------------------
def test_a_comment_after_the_value_stays_and_other_comments_are_untouched():
    before = (
        b"---\n# who wrote this\nname: x  # the slug\nstatus: stable   # deprecated | superseded\n"
        b"\n# trailing\n---\nB\n"
    )
    after = set_key(before, "status", "archived")
    assert after == before.replace(b"status: stable ", b"status: archived ")
    assert set_key(before, "name", "y") == before.replace(b"name: x ", b"name: y ")
    assert set_key(b'---\nd: "a # b"  # c\n---\nB\n', "d", "z") == b'---\nd: "z"  # c\n---\nB\n'


def test_continuation_lines_of_a_plain_scalar_are_part_of_its_value():
    # (a comment ends a plain scalar in YAML: it may only close the last line)
    before = b"---\ndescription: one\n  two\n  three # c\nname: x\n---\nB\n"
    assert fm_of(before)["description"] == "one two three"
    assert set_key(before, "description", "new") == b"---\ndescription: new\nname: x\n---\nB\n"


# -- bytes around the frontmatter -----------------------------------------------------------------
def test_crlf_files_stay_crlf_and_the_bom_and_a_non_utf8_body_are_kept():
    before = BOM + b"---\r\nname: x\r\nstatus: >\r\n  active\r\n---\r\nbody \xff\xfe not utf-8\r\n"
    after = set_key(before, "status", "archived", path="x.md")
    assert after == BOM + b"---\r\nname: x\r\nstatus: archived\r\n---\r\nbody \xff\xfe not utf-8\r\n"
    added = set_key(before, "salience", 0.7)
    assert (
        added == BOM + b"---\r\nname: x\r\nstatus: >\r\n  active\r\nsalience: 0.7\r\n---\r\nbody \xff\xfe not utf-8\r\n"
    )
    assert added.count(b"\n") == added.count(b"\r\n")
    nested = set_key(before, "crystal", {"deliver": "act", "match": Quoted("a, b")})
    assert nested.count(b"\n") == nested.count(b"\r\n") and b'  match: "a, b"\r\n' in nested


def test_a_file_with_no_frontmatter_gets_one_in_its_own_line_endings():
    assert set_key(b"# Title\nbody\n", "status", "draft") == b"---\nstatus: draft\n---\n# Title\nbody\n"
    assert set_key(BOM + b"# T\r\nb\r\n", "status", "draft") == BOM + b"---\r\nstatus: draft\r\n---\r\n# T\r\nb\r\n"
    assert set_key(b"", "a", 1) == b"---\na: 1\n---\n"
    assert remove_key(b"# T\n", "status") == b"# T\n"


def test_an_added_key_goes_at_the_end_or_right_after_the_named_one():
    before = b"---\nname: x\nlast_verified: 2020-01-01\ntags: [a]\n---\nB\n"
    assert (
        set_key(before, "review_due", "2020-03-31", after="last_verified")
        == b"---\nname: x\nlast_verified: 2020-01-01\nreview_due: 2020-03-31\ntags: [a]\n---\nB\n"
    )
    assert (
        set_key(before, "review_due", "2020-03-31")
        == b"---\nname: x\nlast_verified: 2020-01-01\ntags: [a]\nreview_due: 2020-03-31\n---\nB\n"
    )
    assert set_key(before, "review_due", "2020-03-31", after="absent") == set_key(before, "review_due", "2020-03-31")
    last = b"---\nlast_verified: 2020-01-01\n---\nno final newline"
    assert (
        set_key(last, "review_due", "2020-01-31", after="last_verified")
        == b"---\nlast_verified: 2020-01-01\nreview_due: 2020-01-31\n---\nno final newline"
    )


def test_setting_the_value_it_has_changes_nothing():
    before = b"---\nstatus:   stable  # x\ntags:\n  - a\n---\nB\n"
    assert set_key(before, "status", "stable") is before
    assert set_key(before, "tags", ["a"]) is before


# -- nested crystal keys ----------------------------------------------------------------------------
CRYSTAL = b'---\nname: x\ncrystal:\n  deliver: act\n  on: bash\n  match: "| tail"\n  who: all\n---\nB\n'


def test_nested_crystal_keys_are_set_added_and_removed_in_place():
    after = set_key(CRYSTAL, "crystal.match", "| tail, | head")
    assert after == CRYSTAL.replace(b'"| tail"', b'"| tail, | head"')
    assert set_key(CRYSTAL, "crystal.match", ["| tail", "| head"]) == CRYSTAL.replace(
        b'"| tail"', b'["| tail", "| head"]'
    )
    added = set_key(CRYSTAL, "crystal.agent", "main")
    assert added == CRYSTAL.replace(b"  who: all\n", b"  who: all\n  agent: main\n")
    assert remove_key(CRYSTAL, "crystal.who") == CRYSTAL.replace(b"  who: all\n", b"")
    assert fm_of(remove_key(b"---\ncrystal:\n  match: x\n---\nB\n", "crystal.match"))["crystal"] == {}
    made = set_key(b"---\nname: x\n---\nB\n", "crystal.match", "npm publish")
    assert made == b"---\nname: x\ncrystal:\n  match: npm publish\n---\nB\n"
    assert fm_of(set_key(b"---\ncrystal:\n---\nB\n", "crystal.on", "bash"))["crystal"] == {"on": "bash"}
    flow = set_key(b"---\ncrystal: {on: bash, match: x}\n---\nB\n", "crystal.who", "all")
    assert fm_of(flow)["crystal"] == {"on": "bash", "match": "x", "who": "all"}


def test_a_new_crystal_block_is_written_as_the_gardener_writes_it():
    block = {"deliver": "act", "on": "bash", "match": Quoted("npm publish, release"), "who": "all"}
    assert set_key(b"---\nname: x\n---\nB\n", "crystal", block) == (
        b'---\nname: x\ncrystal:\n  deliver: act\n  on: bash\n  match: "npm publish, release"\n  who: all\n---\nB\n'
    )


def test_removing_a_key_takes_all_its_lines():
    before = b"---\nname: x\ncrystal:\n  on: bash\n  match:\n    - a\n    - b\ntags: [t]\n---\nB\n"
    assert remove_key(before, "crystal") == b"---\nname: x\ntags: [t]\n---\nB\n"
    assert remove_key(before, "crystal.match") == b"---\nname: x\ncrystal:\n  on: bash\ntags: [t]\n---\nB\n"
    assert remove_key(before, "absent") is before


# -- refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data, key, value, line, words",
    [
        (b"---\nname: x\nbody without a fence\n", "status", "a", 1, "never closed"),
        (b"---\ntags: [a\n---\nB\n", "status", "a", 2, "does not parse"),
        (b"---\nname: \xff\n---\nB\n", "status", "a", 2, "not UTF-8"),
        (b"---\ncrystal: yes\n---\nB\n", "crystal.match", "x", 0, "not a mapping"),
        (b"---\nname: x\n---\nB\n", "name", "bell\x07", 2, "control character"),
        (b"---\nname: x\n---\nB\n", "v", float("nan"), 0, "cannot be written"),
    ],
)
def test_an_unsafe_edit_raises_naming_the_file_and_the_key(data, key, value, line, words):
    with pytest.raises(FrontmatterEditError) as err:
        set_key(data, key, value, path="notes/n.md")
    e = err.value
    assert (e.path, e.key, e.line) == ("notes/n.md", key, line)
    assert str(e).startswith(f"notes/n.md{':' + str(line) if line else ''}: frontmatter key {key!r}: ")
    assert words in e.message


def test_a_duplicate_key_is_refused_where_the_edit_would_not_read_back():
    with pytest.raises(FrontmatterEditError, match="would not read back as meant"):
        remove_key(b"---\na: 1\na: 2\n---\nB\n", "a", path="dup.md")


# -- the property ---------------------------------------------------------------------------------
KEYS = ["name", "status", "tags", "valid_to", "crystal", "salience", "x-y", "notes"]
text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), whitelist_characters="\n\t"), max_size=20)
scalars = st.one_of(
    text,
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["true", "12", "a: b", "| x", "**/*", "- y", "#", ""]),
)
small_key = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.dictionaries(small_key, st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=3),
)


@st.composite
def documents(draw) -> tuple[bytes, dict]:
    """A note whose frontmatter holds some of ``KEYS`` written in varied forms, and the body."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    lines = []
    for key in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=6)):
        form = draw(
            st.sampled_from(
                [
                    "plain",
                    "double",
                    "single",
                    "folded",
                    "literal",
                    "flow",
                    "flow2",
                    "block",
                    "flush",
                    "map",
                    "empty",
                    "comment",
                ]
            )
        )
        word = draw(st.from_regex(r"[a-z][a-z0-9 .-]{0,10}[a-z0-9]", fullmatch=True))
        lines += {
            "plain": [f"{key}: {word}"],
            "double": [f'{key}: "{word}"'],
            "single": [f"{key}: '{word}'"],
            "folded": [f"{key}: >", f"  {word}", "  more"],
            "literal": [f"{key}: |-", f"  {word}", "", "  more"],
            "flow": [f"{key}: [{word}, b]"],
            "flow2": [f"{key}: [{word},", "  b]"],
            "block": [f"{key}:", f"  - {word}", "  # between", "  - b"],
            "flush": [f"{key}:", f"- {word}", "- b"],
            "map": [f"{key}:", f"  on: {word}", "  match:", "    - a"],
            "empty": [f"{key}:"],
            "comment": [f"{key}: {word}  # why"],
        }[form]
        if draw(st.booleans()):
            lines.append("# a comment between keys")
    body = draw(st.binary(max_size=40))
    bom = BOM if draw(st.booleans()) else b""
    data = bom + ("---" + nl + "".join(ln + nl for ln in lines) + "---" + nl).encode() + body
    return data, body


def _parsed(data: bytes) -> dict:
    """The frontmatter as ``parse_note`` reads it (the body may be any bytes)."""
    fm, _first, _body, _line = split_frontmatter(data.decode("utf-8", "surrogateescape"), "p.md")
    return parse_frontmatter(fm).data if fm is not None else {}


def _canon(v) -> str:
    return json.dumps(v, sort_keys=True)


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=documents(),
    key=st.one_of(st.sampled_from(KEYS), st.sampled_from(["crystal.match", "crystal.who"])),
    value=values,
)
@example(doc=(b"---\nstatus: >\n  active\nname: x\n---\nB", b"B"), key="status", value="archived")
def test_setting_a_key_reads_back_as_the_value_and_changes_no_other_key(doc, key, value):
    data, body = doc
    try:
        old = _parsed(data)
    except FrontmatterError:
        assume(False)
    parts = key.split(".")
    if len(parts) == 2 and parts[0] in old and not isinstance(old[parts[0]], (dict, type(None))):
        with pytest.raises(FrontmatterEditError, match="not a mapping"):
            set_key(data, key, value, path="p.md")
        return
    after = set_key(data, key, value, path="p.md")
    assert after.endswith(body) and after.startswith(BOM) == data.startswith(BOM)
    if data.removeprefix(BOM).startswith(b"---\r\n"):  # a CRLF file stays CRLF
        head = after[: len(after) - len(body)]
        assert head.count(b"\n") == head.count(b"\r\n")
    new = _parsed(after)
    want = dict(old)
    if len(parts) == 1:
        want[key] = value
    else:
        want[parts[0]] = dict(old.get(parts[0]) or {}, **{parts[1]: value})
    assert _canon(new) == _canon(want)
    # and removing it again leaves every other key as it was
    gone = _parsed(remove_key(after, key, path="p.md"))
    if len(parts) == 1:
        want.pop(key)
    else:
        want[parts[0]].pop(parts[1])
    assert _canon(gone) == _canon(want)
