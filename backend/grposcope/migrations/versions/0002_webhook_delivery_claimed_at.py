"""webhook deliveries: claimed_at (the claim's lease and the cross-process rate limit)

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

A delivery's ``claimed_at`` is when a worker took it (pending → sending). A row still
``sending`` a lease after that was left by a worker that died and goes back to pending; the
per-webhook rate limit counts the claims of the last minute in the database, so it holds
across worker processes. Rows already ``sending`` when this runs get the migration time, so
the first lease after the upgrade returns them to pending instead of leaving them stuck.
"""
from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index('ix_webhook_deliveries_status_claimed', ['status', 'claimed_at'], unique=False)
        batch_op.create_index('ix_webhook_deliveries_webhook_claimed', ['webhook_id', 'claimed_at'], unique=False)

    deliveries = sa.table(
        'webhook_deliveries',
        sa.column('status', sa.String(20)),
        sa.column('claimed_at', sa.DateTime(timezone=True)),
    )
    op.execute(
        deliveries.update()
        .where(deliveries.c.status == 'sending')
        .values(claimed_at=datetime.now(timezone.utc))
    )


def downgrade() -> None:
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_webhook_claimed')
        batch_op.drop_index('ix_webhook_deliveries_status_claimed')
        batch_op.drop_column('claimed_at')
