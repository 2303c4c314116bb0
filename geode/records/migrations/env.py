"""Alembic's environment for geode's records database.

Online, the migrations run on the connection ``geode.records.migrations`` passes in
(``config.attributes["connection"]``), inside the transaction that holds the upgrade lock:
there is no ``alembic.ini`` and no URL here. Offline (``python -m geode.records.migrations
sql``), they print the SQL for the dialect named in ``config.attributes["dialect_name"]``.
"""

from __future__ import annotations

from alembic import context

config = context.config

if context.is_offline_mode():
    context.configure(
        dialect_name=config.attributes.get("dialect_name", "postgresql"), literal_binds=True, target_metadata=None
    )
else:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "geode's migrations run through geode.records.migrations.upgrade_to_head(engine), "
            "which passes the connection in; there is no alembic.ini"
        )
    context.configure(connection=connection, target_metadata=None)

with context.begin_transaction():
    context.run_migrations()
