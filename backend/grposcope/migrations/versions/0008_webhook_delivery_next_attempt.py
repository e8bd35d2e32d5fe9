"""webhook deliveries: next_attempt_at (retries spread over minutes, kept across restarts)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

A delivery used to make all its attempts inside one claim, within 3.5 s, and then
say ``failed``: a receiver down for a minute never got the alert. Now each claim makes one
attempt; a failed one puts the row back to ``pending`` with ``next_attempt_at`` set by the
retry schedule (alerts/delivery.py), and workers claim only rows that are due. The schedule
lives in the database, so a worker or API restart carries on with it. Nullable: NULL is
"due now", which is what every row already pending is.
"""
import sqlalchemy as sa
from alembic import op


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (nullable, no default): instant on Postgres, no table rebuild.
    op.add_column(
        'webhook_deliveries', sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    # Rows waiting for a retry become due at once for an older worker, which retries them its
    # own way: nothing is lost. A plain DROP COLUMN (SQLite >= 3.35), as 0007.
    op.drop_column('webhook_deliveries', 'next_attempt_at')
