"""Alembic migrations of the job database, shipped with the package and configured in code (no
``alembic.ini``): see :mod:`optiflow.persistence.migrate` for ``upgrade`` / ``current_revision`` /
``ensure_migrated`` and ``optiflow db upgrade``.

To add a migration (a developer's task, against a database at the previous head)::

    from alembic import command
    from optiflow.persistence.migrate import alembic_config

    command.revision(alembic_config("sqlite:///dev.db"), "what changes", autogenerate=True,
                     rev_id="0002")

then set :data:`HEAD` to the new revision (a test checks they agree) and describe the change in
the new file's docstring.
"""

from __future__ import annotations

from pathlib import Path

HEAD = "0003"
"""The newest revision, known without importing Alembic (checked by a test)."""

VERSION_TABLE = "optiflow_alembic_version"
"""Our own version table, so a database shared with another Alembic project keeps both."""

LOCATION = Path(__file__).resolve().parent
