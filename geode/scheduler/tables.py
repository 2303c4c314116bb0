"""The scheduler's table (SQLModel): ``upkeep_night``, one row per night whose upkeep was
enqueued, so that two schedulers (or a restart) never enqueue the same night twice.

Apart from ``geode.scheduler.nightly`` because the CLI imports that module to read the schedule
and must not pay for SQLModel; ``nightly.night_table()`` imports this on first use. The records
migrations (``geode.records.migrations``) create it.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, String, Text
from sqlmodel import Field, SQLModel

from geode.records.models import table_of


class UpkeepNight(SQLModel, table=True):
    """A night that was enqueued: its run id (the primary key a second enqueue collides on)."""

    __tablename__ = "upkeep_night"

    run_id: str = Field(sa_column=Column(String(120), primary_key=True))
    due: str = Field(sa_column=Column(Text, nullable=False))
    enqueued_at: float = Field(sa_column=Column(Float, nullable=False))
    pid: str = Field(sa_column=Column(String(20), nullable=False))


NIGHT = table_of(UpkeepNight)
