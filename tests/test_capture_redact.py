"""No secret from an error reaches a draft (issue 27): tokens of common formats in the failing
command's output and in the command line itself, through the real hook and ``geode drafts``.

Also: the `` unless:`` part of a match term (what makes a draft fire on the failing form and
not on the fix), the pair rules on their own, and the raw lines' retention window."""

from __future__ import annotations

import json
import time

import pytest

from geode.delivery import capture, ledger
from geode.delivery.match import term_matches, term_problems
from geode.gardener import capture as gcapture
from geode.gardener.redact import redact_lines
from geode.records.models import init_db
from tests.helpers import Geode
from tests.test_capture_session import _cli, _geode

#: tokens of common formats (the well-known documentation examples, never live keys)
SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack": "xoxb-123456789012-1234567890123-abcdefghijABCDEFGHIJklmn",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "key body": "MIIEowIBAAKCAQEA7bq9Xk2Vh0rD3jK8s5f0Zq1wLmN4pQrStUvWxYz",
    "password": "hunter2-correct-horse",
}
ERROR_TEXT = "\n".join(
    [
        "Exit code 1",
        f"deploy failed: AWS_ACCESS_KEY_ID={SECRETS['aws']} rejected",
        f"remote: invalid token {SECRETS['github']}",
        f"slack webhook auth {SECRETS['slack']} revoked",
        f"Authorization: Bearer {SECRETS['jwt']}",
        "-----BEGIN RSA PRIVATE KEY-----",
        SECRETS["key body"],
        "-----END RSA PRIVATE KEY-----",
        f'psql: FATAL: password="{SECRETS["password"]}" authentication failed',
    ]
)


def test_redaction_removes_each_format_and_keeps_the_rest():
    lines = ERROR_TEXT.splitlines()
    out = "\n".join(redact_lines(lines))
    for kind, value in SECRETS.items():
        assert value not in out, kind
    assert SECRETS["jwt"].split(".")[2] not in out  # the signature, which the detector leaves out of its value
    assert "deploy failed" in out and "authentication failed" in out  # the message itself stays
    assert out.count("[redacted]") >= 6


def test_no_secret_reaches_the_draft(tmp_path):
    g = _geode(tmp_path)
    failing = f"./deploy.sh --token {SECRETS['github']}"
    for cmd, err in ((failing, ERROR_TEXT), (failing + " --region eu-west-1", None)):
        assert g.bash(cmd, session="sec").rc == 0
        if err is None:
            fields = {"tool_response": {"stdout": "ok", "stderr": "", "interrupted": False}}
            event = "PostToolUse"
        else:
            fields = {"error": err, "is_interrupt": False}
            event = "PostToolUseFailure"
        post = g.run(event, "sec", tool_name="Bash", tool_input={"command": cmd}, tool_use_id="t", **fields)
        assert post.rc == 0 and not post.errors, post
    raw = [json.loads(r["detail"]) for r in g.rows("shell_run", session="sec")]
    assert SECRETS["aws"] in json.dumps(raw)  # the raw lines are in the local ledger only
    stop = g.run("Stop", "sec", stop_hook_active=False)
    assert stop.json["decision"] == "block"
    for value in SECRETS.values():
        assert value not in stop.stdout  # the Stop message shows commands as their shape, never an argument
    assert "deploy.sh --token [1 argument]" in stop.stdout
    r = _cli(g, "drafts", "--json")
    assert r.returncode == 0, r.stderr
    drafts = json.loads(r.stdout)["drafts"]
    assert len(drafts) == 1
    from geode.queue import review

    engine = init_db(g.settings())
    try:
        diff = review.diff(engine, drafts[0]["id"])
        from geode.queue import proposals

        full = proposals.get(engine, drafts[0]["id"])
    finally:
        engine.dispose()
    shown = diff + json.dumps(full, default=str)
    assert "deploy failed" in diff and "[redacted]" in diff
    for kind, value in SECRETS.items():
        assert value not in shown, kind


def test_an_unless_part_keeps_the_term_silent_on_the_fix():
    term = "npm test unless:--runInBand"
    assert term_problems(term, "bash") == []
    assert term_matches(term, ("bash",), "npm test")
    assert term_matches(term, ("bash",), "cd web && npm test 2>&1 | tail -5")
    assert not term_matches(term, ("bash",), "npm test -- --runInBand")
    assert not term_matches("npm test unless:npm", ("bash",), "npm test")
    assert [c for c, _s, _m in term_problems("npm test unless:npm", "bash")] == ["match-never"]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # a variant of the failing command: a pair
        ([("f", "npm test", 1, ""), ("t", "", None, "/p/a.js"), ("f", "npm test -- -i", 0, "")], 1),
        # the same command again, nothing touched: flaky, no pair
        ([("f", "npm test", 1, ""), ("f", "npm test", 0, "")], 0),
        # the same command again after an edit of the file the error named: a pair
        ([("f", "npm test", 1, ""), ("t", "", None, "/p/jest.config.js"), ("f", "npm test", 0, "")], 1),
        # another command word succeeding closes nothing
        ([("f", "npm test", 1, ""), ("f", "git status", 0, "")], 0),
        # no failure at all
        ([("f", "npm test", 0, ""), ("f", "npm test -- -i", 0, "")], 0),
    ],
)
def test_pairs(rows, expected):
    out = []
    for i, (kind, cmd, code, path) in enumerate(rows, 1):
        if kind == "t":
            out.append((i, float(i), capture.TOUCH_KIND, path, ""))
            continue
        d = {"command": cmd, "exit": code, **capture.shape(cmd)}
        if code:
            d["error"] = ["FAIL at jest.config.js:3:5"]
        out.append((i, float(i), capture.RUN_KIND, "", json.dumps(d)))
    assert len(capture.pairs(out)) == expected


def test_raw_error_lines_are_blanked_after_the_retention_window(tmp_path):
    g = Geode(tmp_path)
    g.init_db()
    settings = g.settings()
    old = time.time() - (capture.RETENTION_DAYS + 1) * 86400
    rows = [
        ledger.new_event(capture.RUN_KIND, ts=ts, session="r", detail={"command": "make", "exit": 2, "error": ["E1"]})
        for ts in (old, time.time())
    ]
    assert ledger.append(settings, rows) == "db"
    engine = init_db(settings)
    try:
        assert gcapture.expire_raw(engine) == 1
    finally:
        engine.dispose()
    details = [json.loads(r["detail"]) for r in g.rows(capture.RUN_KIND)]
    assert [d["error"] for d in details] == [[], ["E1"]]
    assert details[0]["error_expired"] is True
