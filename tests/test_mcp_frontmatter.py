"""``write_note`` writes frontmatter with its own small emitter (``geode.mcp.server.yaml_lines``):
a differential test against geode's own reader (``geode.delivery.note.parse_note``), which every
room uses. Whatever the emitter writes must read back as the values it was given, or the emitter
must refuse the value with a message (a control character no escape of the reader can carry)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geode.mcp.server import ToolInputError, _normal, slugify, yaml_lines
from geode.delivery.note import parse_note

keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,12}", fullmatch=True)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
scalar = st.one_of(text, st.integers(-10**12, 10**12), st.floats(allow_nan=False, allow_infinity=False),
                   st.booleans())
value = st.one_of(scalar, st.lists(scalar, max_size=4))
frontmatter = st.dictionaries(keys, st.one_of(value, st.dictionaries(keys, value, max_size=3)), max_size=6)
UNWRITABLE = {chr(c) for c in range(0x20) if chr(c) not in "\n\t"} | {"\x7f", "\x85", "\u2028", "\u2029"}


def _strings(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, str):
        yield v


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatter)
def test_what_write_note_writes_reads_back_as_given(data):
    if any(ch in UNWRITABLE for s in _strings(data) for ch in s):
        with pytest.raises(ToolInputError, match="control character"):
            yaml_lines(data)
        return
    text_ = "---\n" + "\n".join(yaml_lines(data)) + "\n---\nbody\n"
    note = parse_note(text_, "x.md")
    assert not note.fm_warnings, (text_, note.fm_warnings)
    assert note.frontmatter == _normal(data), text_


@pytest.mark.parametrize("title, slug", [
    ("Webhook signature rotation", "webhook-signature-rotation"),
    ("Retry-Queue verwirft alte Jobs (Zahlungsdienst)", "retry-queue-verwirft-alte-jobs-zahlungsdienst"),
    ("CI/CD: why `npm ci` & not `npm install`?", "ci-cd-why-npm-ci-not-npm-install"),
    ("Café naïve résumé", "cafe-naive-resume"),
    ("???", "note"),
])
def test_slug_of_a_title(title, slug):
    assert slugify(title) == slug
