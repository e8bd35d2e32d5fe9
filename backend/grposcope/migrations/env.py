"""Alembic environment: one history for SQLite and Postgres.

``render_as_batch`` lets ALTERs run on SQLite (which rebuilds the table); ``compare_type``
makes autogenerate notice column type changes, so the model/migration agreement test is strict.
"""

from __future__ import annotations

from alembic import context

from grposcope import models  # noqa: F401  (registers every table on the metadata)
from grposcope.db import Base, make_engine

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
