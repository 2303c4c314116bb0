"""One list of hook events (``geode.delivery.events``): the installer writes exactly those events,
with their matchers and timeouts, and the hook answers exactly those (plus the quiet ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geode.delivery import events, hook
from geode.install import hooks as inst


@pytest.mark.parametrize("agent", inst.AGENTS)
def test_the_installer_writes_exactly_the_listed_events(agent: str, tmp_path: Path) -> None:
    project, home = tmp_path / "proj", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    hookmain = tmp_path / "hookmain.py"
    hookmain.write_text("")
    res = inst.install(agent, project=project, home_dir=home, hookmain=hookmain, verify=False)
    written = json.loads(Path(res["path"]).read_text())["hooks"]
    listed = events.BY_AGENT[agent]
    assert listed, "no events listed"
    assert set(written) == {e for e, _m, _t in listed}
    for event, matcher, timeout in listed:
        (group,) = written[event]
        assert group.get("matcher") == matcher
        (handler,) = group["hooks"]
        assert handler["timeout"] == timeout and handler["command"] == res["command"]


def test_the_hook_answers_the_listed_events_and_ignores_others(monkeypatch) -> None:
    opened: list[str] = []

    class Stand:
        def __init__(self, kind, data, env):
            opened.append(data["hook_event_name"])

        def __getattr__(self, name):
            return lambda *a, **k: None

    monkeypatch.setattr(hook, "HookRun", Stand)
    listed = {e for specs in events.BY_AGENT.values() for e, _m, _t in specs} | set(events.QUIET)
    assert listed == events.HANDLED
    recorded: list[str] = []
    monkeypatch.setattr(hook, "_record_only", lambda kind, event, data, env: recorded.append(event) or (0, ""))
    for event in sorted(events.HANDLED):
        assert hook.run("claude", json.dumps({"hook_event_name": event}), env={}) == (0, "")
    for event in ("PostToolBatch", "Notification", "Probe", ""):
        assert hook.run("claude", json.dumps({"hook_event_name": event}), env={}) == (0, "")
    # PostToolUse / PostToolUseFailure only record (docs/CAPTURE.md): no binding index is opened
    assert events.RECORD_ONLY and events.RECORD_ONLY <= events.HANDLED
    assert sorted(recorded) == sorted(events.RECORD_ONLY)
    assert sorted(opened) == sorted(events.HANDLED - events.RECORD_ONLY)
