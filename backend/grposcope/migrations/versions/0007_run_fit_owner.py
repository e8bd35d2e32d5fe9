"""runs.fit_owner: the worker process that claimed the run last

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

A worker keeps rolling state per run in its own process (the rules' memos, the series tails
it has read): a refit costs the points since *that process* last saw the run. With several
worker processes claiming oldest-first, a run went to either, so each refit paid for the
points of the last two (four, with four workers). The claim now prefers the process that
claimed the run last (worker/claim.py); this column records it. Nullable: existing runs have
no owner and go to whichever worker claims them first.
"""
import sqlalchemy as sa
from alembic import op


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('runs', sa.Column('fit_owner', sa.String(length=100), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite >= 3.35): a batch rebuild of `runs` would drop the table,
    # and with it, through ON DELETE CASCADE, every run's points and metrics.
    op.drop_column('runs', 'fit_owner')
