"""runs: curvature and stale_fraction supplied with the hyperparameters

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

A run may carry a curvature K measured before it started (a pilot run's constrained fit, a
curvature probe, the softmax bandit's Hessian) and the measured share of K that lags. The
predicted stability margin then applies from the run's first step, before its own fit can
read K off the reward curve.
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('curvature', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('stale_fraction', sa.Float(), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMNs (SQLite >= 3.35): a batch rebuild of `runs` drops the table, which
    # with foreign keys on deletes every run's points, metrics, fits and alerts (cascade).
    op.drop_column('runs', 'stale_fraction')
    op.drop_column('runs', 'curvature')
