"""The agents' shared state is an explicit object passed in, not mixins over a host.

Each of the Cleaner, the Gardener and the Corrector keeps one run's state in a dataclass
(``CleanerRun``, ``GardenerRun``, ``CorrectorRun``) that it builds in ``examine`` and hands to
each check; the checks are plain classes (no agent, host or mixin in their bases) that take the
run and read nothing else off the agent. The agent class composes them and holds no per-run
state itself, so two runs of one agent object cannot leak into each other."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect

import pytest

from geode.agents.contract import Agent
from geode.cleaner.agent import Cleaner
from geode.cleaner.caps import FolderCaps
from geode.cleaner.contradictions import Contradictions
from geode.cleaner.duplicates import NearDuplicates
from geode.cleaner.notes import CleanerRun
from geode.corrector.agent import Corrector
from geode.corrector.fixes import CorrectorRun, Fixes
from geode.gardener.agent import Gardener
from geode.gardener.bind import Bind
from geode.gardener.keys import GardenerRun
from geode.gardener.never_fired import NeverFired
from geode.gardener.salience import Salience
from geode.gardener.stubs import Stubs
from geode.kernel.config import SCHEMA, GardenerSettings

CASES = [
    (Cleaner, CleanerRun, (FolderCaps, Contradictions, NearDuplicates)),
    (Gardener, GardenerRun, (Stubs, NeverFired, Bind, Salience)),
    (Corrector, CorrectorRun, (Fixes,)),
]


@pytest.mark.parametrize(("agent", "run", "checks"), CASES, ids=lambda c: getattr(c, "__name__", "checks"))
def test_the_agent_composes_plain_checks_over_one_run_object(agent, run, checks):
    assert dataclasses.is_dataclass(run)
    assert agent.__bases__ == (Agent,), f"{agent.__name__} is built from {agent.__bases__}"
    for check in checks:
        assert check.__bases__ == (object,), f"{check.__name__} inherits {check.__bases__}"
        params = list(inspect.signature(check.__init__).parameters)
        assert params == ["self", "run"], f"{check.__name__}.__init__{params}"
        assert inspect.get_annotations(check.__init__, eval_str=True)["run"] is run
    # the agent itself is none of its checks
    assert not any(issubclass(agent, c) for c in checks)


def test_the_gardener_run_holds_the_gardener_settings_once():
    fields = {f.name: f for f in dataclasses.fields(GardenerRun)}
    assert inspect.get_annotations(GardenerRun, eval_str=True)["cfg"] is GardenerSettings
    assert not set(SCHEMA["gardener"]) & set(fields), "a [gardener] field copied beside the table"
    assert set(Gardener.SETTINGS) == set(SCHEMA["gardener"])
    assert [r for r, _c in Gardener.RULES] == ["stub", "never-fired", "bind", "salience"]


def test_the_cleaner_run_holds_the_cleaner_settings():
    fields = {f.name for f in dataclasses.fields(CleanerRun)}
    assert {"cap", "caps", "archive_dir", "max_archives", "evidence_days", "notes", "links", "touched"} <= fields


def test_gardener_run_files_through_held_and_propose():
    run = GardenerRun("gardener", GardenerSettings(**{k: 1 for k in SCHEMA["gardener"]}))
    run.prior = {"held": {"stub:main:x"}}
    run.rule = "stub"
    assert run.held("stub:main:x")  # pending before
    assert not run.held("stub:main:y")

    class R:
        proposed: list = []

    run.propose(R, "p")
    assert R.proposed == ["p"] and run.mine == ["stub"]
    assert run.held("stub:main:z") and run.capped["stub"] == 1  # max_proposals = 1 reached


def test_corrector_today_default_holds():
    assert Corrector().today is None
    assert Corrector(today=dt.date(2024, 1, 2)).today.isoformat() == "2024-01-02"
    assert CorrectorRun().today is None and CorrectorRun().refs_cache == {}
