"""geode: crystal memory for coding agents.

The one import name everything geode installs lives under. The rooms are subpackages
(``geode.delivery``, ``geode.recall``, ``geode.agents``, the four agents, ``geode.scheduler``,
``geode.cli``); see docs/ARCHITECTURE.md. Nothing is imported here: the hook imports
``geode.delivery.hook`` with the standard library only, and this file runs first.
"""
