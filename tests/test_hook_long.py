"""A 50 MB action through the real hook (issue 15, point 5): matched on its stated head and
tail (``geode.delivery.engine.ACT_HEAD_CHARS`` / ``ACT_TAIL_CHARS``), so the hook finishes and
delivers what the head and the tail match. Behaviour is asserted; the time is recorded in the
test's output (``-s`` or the junit properties), never asserted (speed lives in bench/)."""

from __future__ import annotations

import time

import pytest

from geode.delivery.engine import ACT_HEAD_CHARS, ACT_TAIL_CHARS, clip_action
from tests.helpers import Geode

FIFTY_MB = 50 * 1024 * 1024


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.init_db()
    g.crystal("pipe.md", "Use set -o pipefail.", name="pipe-in-head", match="| tail")
    g.crystal("rsync.md", "rsync --delete removes files.", name="rsync-in-tail", match="rsync --delete")
    g.crystal("middle.md", "Only in the middle.", name="terraform-in-middle", match="terraform destroy")
    return g


def test_clip_keeps_head_and_tail_joined_by_a_shell_operator():
    text = "a" * ACT_HEAD_CHARS + "MIDDLE" + "z" * ACT_TAIL_CHARS
    clipped = clip_action(text)
    assert clipped == "a" * ACT_HEAD_CHARS + "\n" + "z" * ACT_TAIL_CHARS
    short = "x" * (ACT_HEAD_CHARS + ACT_TAIL_CHARS)
    assert clip_action(short) is short


def test_a_50_mb_bash_command_finishes_and_delivers_what_its_head_and_tail_match(g, record_property):
    filler_line = "echo " + "x" * 94 + "\n"
    n = FIFTY_MB // len(filler_line)
    middle = filler_line * (n // 2) + "terraform destroy -auto-approve\n" + filler_line * (n // 2)
    command = "npm run build 2>&1 | tail -20\n" + middle + "rsync --delete src/ dst/\n"
    assert len(command) > FIFTY_MB
    t0 = time.perf_counter()
    res = g.bash(command, timeout=120)
    took = time.perf_counter() - t0
    record_property("hook_seconds_50mb", round(took, 3))
    print(f"\nthe hook on a {len(command) / 1e6:.1f} MB Bash command: {took:.2f} s (stdin transfer included)")
    assert res.rc == 0 and res.errors == "", res
    context = res.json["hookSpecificOutput"]["additionalContext"]
    assert "Use set -o pipefail." in context  # in the head
    assert "rsync --delete removes files." in context  # in the tail
    assert "Only in the middle." not in context  # past the stated head, before the tail: not matched


def test_a_50_mb_write_is_matched_on_its_head(g):
    g.crystal("env.md", "Never commit .env files.", name="env-write", on="write", match=".env")
    res = g.tool("Write", {"file_path": "/tmp/app/.env", "content": "K=V\n" * (FIFTY_MB // 4)}, timeout=120)
    assert res.rc == 0 and res.errors == "", res
    assert "Never commit .env files." in res.json["hookSpecificOutput"]["additionalContext"]
