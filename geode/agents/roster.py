"""The built-in maintenance agents: who they are, where each one's class lives, and the order
they run in.

Why a module of its own: upkeep's runner, the Celery app (one task per agent) and the CLI's
help all name the four, and three copies of a list drift apart. Agents added by ``[upkeep]
agents`` run after these, in name order (``geode.agents.upkeep.order``). Standard library
only and no imports: the CLI reads it to build its parsers.
"""

from __future__ import annotations

#: (name, "module:Class"), in the order a night's upkeep runs them; the Corrector comes last
#: because it fixes what the agents before it found in the same run.
ROSTER: tuple[tuple[str, str], ...] = (
    ("librarian", "geode.librarian.agent:Librarian"),
    ("cleaner", "geode.cleaner.agent:Cleaner"),
    ("gardener", "geode.gardener.agent:Gardener"),
    ("corrector", "geode.corrector.agent:Corrector"),
)

#: the built-in agents' names, in their order
NAMES: tuple[str, ...] = tuple(name for name, _spec in ROSTER)
