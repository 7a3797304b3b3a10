"""Alembic environment: runs on the connection (and inside the transaction) that
:func:`optiflow.persistence.migrate.upgrade` opened and locked."""

from __future__ import annotations

from alembic import context

from optiflow.persistence.engine import make_engine, writing
from optiflow.persistence.migrations import VERSION_TABLE
from optiflow.persistence.tables import metadata

config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    context.configure(
        url=config.attributes.get("url") or config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    _run(config.attributes["connection"])
else:  # e.g. ``command.revision(alembic_config(url), ..., autogenerate=True)``
    engine = make_engine(config.attributes.get("url") or config.get_main_option("sqlalchemy.url") or "")
    try:
        with writing(engine) as conn:
            _run(conn)
    finally:
        engine.dispose()
