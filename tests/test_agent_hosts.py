"""The host classes (``CleanerHost``, ``GardenerHost``, ``CorrectorHost``) only declare, for the
type checker, what an agent's mixins read off the final agent class. At run time none of their
stubs may be what a name resolves to on the agent: each must be shadowed by the real method (of
the agent class, a mixin or ``Agent``), and no annotation may have become a class-level value."""

from __future__ import annotations

import inspect

import pytest

from geode.cleaner.agent import Cleaner
from geode.cleaner.notes import CleanerHost
from geode.corrector.agent import Corrector
from geode.corrector.fixes import CorrectorHost
from geode.gardener.agent import Gardener
from geode.gardener.keys import GardenerHost

CASES = [(Cleaner, CleanerHost), (Gardener, GardenerHost), (Corrector, CorrectorHost)]


@pytest.mark.parametrize(("agent", "host"), CASES, ids=lambda c: c.__name__)
def test_every_stub_is_shadowed_by_a_real_method(agent, host):
    stubs = [n for n, v in vars(host).items() if inspect.isfunction(v) or isinstance(v, staticmethod)]
    for name in stubs:
        owner = next(k for k in agent.__mro__ if name in vars(k))
        assert owner is not host, f"{agent.__name__}.{name} resolves to the stub in {host.__name__}"
    # the host sits below every mixin and the agent class in the MRO
    assert agent.__mro__.index(host) > agent.__mro__.index(agent)
    assert host in agent.__mro__


@pytest.mark.parametrize(("agent", "host"), CASES, ids=lambda c: c.__name__)
def test_declared_attributes_are_annotations_only(agent, host):
    declared = set(host.__annotations__)
    assert declared, f"{host.__name__} declares nothing"
    assert not declared & set(vars(host)), f"{host.__name__} sets a value on the class"
    # a declared name the agent gives a value (``name``) still reads the agent's value
    assert agent.name == agent.__name__.lower()


def test_cleaner_stubs_are_cleaners_methods():
    for name in ("resolve", "_age", "_bytes", "_archived", "_free", "_status_proposal"):
        assert name in vars(Cleaner), name


def test_gardener_stubs_are_gardeners_methods():
    assert {"_held", "_propose"} <= set(vars(Gardener))


def test_corrector_today_default_holds():
    assert Corrector().today is None
    assert Corrector(today=__import__("datetime").date(2024, 1, 2)).today.isoformat() == "2024-01-02"
