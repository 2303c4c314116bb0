"""``write_note`` composes a new note's frontmatter from what the agent gave, key by key, with
geode's one frontmatter editor (``geode.kernel.frontmatter_edit.set_key``): whatever it writes
must read back through the reader every room uses (``geode.kernel.note.parse_note``) as the
values given, and a value the format cannot carry (a control character) must come back as a
tool-input error, never as a note that reads differently."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geode.kernel.note import parse_note
from geode.mcp.inputs import ToolInputError
from geode.mcp.write_note import frontmatter_text, read_back, slugify

keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,12}", fullmatch=True)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
scalar = st.one_of(
    text, st.integers(-(10**12), 10**12), st.floats(allow_nan=False, allow_infinity=False), st.booleans()
)
value = st.one_of(scalar, st.lists(scalar, max_size=4))
frontmatter = st.dictionaries(keys, st.one_of(value, st.dictionaries(keys, value, max_size=3)), max_size=6)
UNWRITABLE = {chr(c) for c in range(32) if chr(c) not in "\n\t\0"} | {"\x7f"}


def _strings(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, str):
        yield v


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatter)
def test_what_write_note_writes_reads_back_as_given(data):
    if any(ch in UNWRITABLE for s in _strings(data) for ch in s):
        with pytest.raises(ToolInputError, match="control character"):
            frontmatter_text(data)
        return
    note = parse_note(frontmatter_text(data) + "body\n", "x.md")
    assert note.frontmatter == read_back(data)
    assert note.body.strip() == "body"


@pytest.mark.parametrize(
    "meta, what",
    [
        ({"a.b": 1}, "key 'a.b'"),
        ({"bad key": 1}, "key 'bad key'"),
        ({"x": [{"y": 1}]}, "a list holds"),
        ({"x": {"y": {"z": {"w": 1}}}}, "deeper"),
    ],
)
def test_keys_and_values_a_note_cannot_hold_are_refused(meta, what):
    with pytest.raises(ToolInputError, match=what):
        frontmatter_text(meta)


@pytest.mark.parametrize(
    "title, slug",
    [
        ("Webhook signature rotation", "webhook-signature-rotation"),
        ("Retry-Queue verwirft alte Jobs (Zahlungsdienst)", "retry-queue-verwirft-alte-jobs-zahlungsdienst"),
        ("CI/CD: why `npm ci` & not `npm install`?", "ci-cd-why-npm-ci-not-npm-install"),
        ("Café naïve résumé", "cafe-naive-resume"),
        ("???", "note"),
    ],
)
def test_slug_of_a_title(title, slug):
    assert slugify(title) == slug
