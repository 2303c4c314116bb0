"""The shapes of ``geode stats`` and ``geode study``, as the CLI prints them with ``--json`` and
the page and the doctor read them.

TypedDicts, not dataclasses: the result is that very dict at run time (the JSON stays byte for byte
what it was), and mypy checks every key the evidence writes and a surface reads.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Window(TypedDict):
    start: float | None  # None: the ledger is empty and no window was asked for
    end: float
    days: float | None


class TopCrystal(TypedDict):
    crystal_id: str
    deliveries: int


class Half(TypedDict):
    """One half of the window (split at its midpoint in time)."""

    start: float
    end: float
    deliveries: int
    blocked: int
    marked: int
    lookups_per_1000: float | None
    blocked_per_1000: float | None
    blocked_share: float | None  # blocked / (blocked + marked)


class Day(TypedDict):
    """One UTC day of the window: what the Health page's delivery chart draws."""

    day: str  # YYYY-MM-DD, UTC
    deliveries: int
    blocked: int
    marked: int


class Stats(TypedDict):
    """What ``compute_stats`` returns (its docstring says what each figure counts)."""

    window: Window
    examined_events: int
    registered: int
    delivered_at_least_once: int
    delivered_registered: int | None
    deliveries: int
    deliveries_per_day: float | None
    top10: list[TopCrystal]
    top10_share: float | None
    median_fires: float | None
    never_fired: int
    never_fired_ids: list[str] | None
    oversize: int
    truncated_deliveries: int
    blocked_lookups: int
    marked_lookups: int
    followed_up: int  # Reads of the full note a cut delivery pointed to
    daily: list[Day]  # per UTC day, oldest first (the newest stats.DAILY_MAX days)
    halves: list[Half]
    withheld_units: int
    withheld_events: int
    unserved_calls: int  # hook calls the binding index could not serve (index_busy, index_building)
    spool_pending: int
    spool_rejected: int


class StudyPlan(TypedDict):
    """The control plan: as recorded, as configured now, as the hook applies it, and whether it stopped."""

    recorded: dict[str, Any] | None
    current: dict[str, Any]
    in_force: dict[str, Any]
    differs: list[str]
    withheld_units_total: int
    stopped: bool
    stop_reason: str


class Study(TypedDict):
    """What ``compute_study`` returns: per arm (delivered, withheld) the units and the lookups after them."""

    arms: dict[str, dict[str, Any]]  # delivered, withheld, and exempt (never assigned: `control: never`)
    mixed_units: int
    exempt_crystals: int
    sessions: int
    plan: StudyPlan
