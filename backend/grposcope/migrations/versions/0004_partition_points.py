"""points: range-partitioned by run id on Postgres (SQLite unchanged)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Why: one B-tree of billions of points neither stays in memory nor can shed old runs without
DELETE + vacuum (docs/scaling.md §2). Run ids grow with time, so live runs write into the
newest partitions, a run's series reads prune to one partition, and the partitions of old
finished runs can be detached or dropped whole (`grposcope maintain`, docs/deployment.md).

Works on a database with data in it, without copying it: the existing table becomes the
first partition (run ids below the next multiple of 1,000 above the highest run id), attached
after a validating scan; a DEFAULT partition catches run ids no range covers yet, so ingest
never fails for want of a partition. Partitions live in the schema ``points_partitions``
(not the default schema, so the models' metadata and autogenerate see only ``points``).
`grposcope maintain` creates the next ranges ahead of the run ids.
"""
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

SCHEMA = "points_partitions"
FIRST_WIDTH = 1000  # the first range's upper bound is a multiple of this


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    bind = op.get_bind()
    top = bind.exec_driver_sql(
        "SELECT greatest((SELECT coalesce(max(id), 0) FROM runs), "
        "(SELECT coalesce(max(run_id), 0) FROM points))"
    ).scalar()
    upper = (int(top) // FIRST_WIDTH + 1) * FIRST_WIDTH
    op.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    op.execute("ALTER TABLE points RENAME TO points_legacy")
    op.execute("ALTER TABLE points_legacy RENAME CONSTRAINT pk_points TO points_legacy_pkey")
    op.execute(f"ALTER TABLE points_legacy SET SCHEMA {SCHEMA}")
    op.execute(
        "CREATE TABLE points (run_id integer NOT NULL, key_id integer NOT NULL, "
        "step bigint NOT NULL, value double precision, flag smallint NOT NULL, "
        "wall_time double precision, CONSTRAINT pk_points PRIMARY KEY (run_id, key_id, step)) "
        "PARTITION BY RANGE (run_id)"
    )
    op.execute(f"ALTER TABLE points ATTACH PARTITION {SCHEMA}.points_legacy "
               f"FOR VALUES FROM (MINVALUE) TO ({upper})")
    op.execute(f"CREATE TABLE {SCHEMA}.points_default PARTITION OF points DEFAULT")
    op.execute(f"CREATE TABLE {SCHEMA}.points_from_{upper} PARTITION OF points "
               f"FOR VALUES FROM ({upper}) TO ({upper + FIRST_WIDTH})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE TABLE points_unpartitioned (run_id integer NOT NULL, key_id integer NOT NULL, "
        "step bigint NOT NULL, value double precision, flag smallint NOT NULL, "
        "wall_time double precision)"
    )
    op.execute("INSERT INTO points_unpartitioned SELECT * FROM points")
    op.execute("DROP TABLE points")  # and every attached partition with it
    op.execute("ALTER TABLE points_unpartitioned RENAME TO points")
    op.execute("ALTER TABLE points ADD CONSTRAINT pk_points PRIMARY KEY (run_id, key_id, step)")
    # Detached partitions (retention's archive) stay; the schema goes only when empty.
    op.execute(
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = '{SCHEMA}') "
        f"THEN DROP SCHEMA {SCHEMA}; END IF; END $$"
    )
