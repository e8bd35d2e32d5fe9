"""Server settings: one object, built once at start-up and passed down.

Every variable is read with the ``GRPOSCOPE_`` prefix; constructor arguments override the
environment (the CLI passes its flags that way).

The variables (documented for users in docs/configuration.md):

- GRPOSCOPE_DATABASE_URL: SQLAlchemy URL; default ``sqlite:///grposcope.db`` in the working
  directory; Postgres as ``postgresql+psycopg://user@host/db``.
- GRPOSCOPE_HOST, GRPOSCOPE_PORT: where ``serve`` listens (127.0.0.1, 8000).
- GRPOSCOPE_PUBLIC_URL: the base URL printed for login (default ``http://HOST:PORT``).
- GRPOSCOPE_MAX_BATCH_VALUES: values per ingest request (100,000); more is refused with 413.
- GRPOSCOPE_MAX_BODY_BYTES: request body limit after gunzip (64 MiB).
- GRPOSCOPE_FIT_INTERVAL_S: least time between two refits of one run (3 s).
- GRPOSCOPE_EMBEDDED_WORKER: run the fit worker inside the API process (true).
- GRPOSCOPE_STALL_AFTER_S: a running run silent this long is ``stalled`` (300 s).
- GRPOSCOPE_PARTITION_RUNS: run ids per partition of ``points`` on Postgres (1,000).
- GRPOSCOPE_PARTITIONS_AHEAD: partitions ``grposcope maintain`` keeps beyond the newest run (2).
- GRPOSCOPE_RETENTION_DAYS: retire the partitions whose runs all finished this many days ago
  (unset: off, the default).
- GRPOSCOPE_RETENTION_ACTION: ``detach`` (keep the table, out of ``points``) or ``drop``.
- GRPOSCOPE_ADMIN_TOKEN: an admin token to install on start (deployments); without it,
  ``serve`` creates one on first start and prints it once.
- GRPOSCOPE_DASHBOARD: serve the dashboard at ``/`` beside the API (true).
- GRPOSCOPE_TOKEN_CACHE_S: how long a process keeps a token's principal (10 s; 0: off); a
  revoked token keeps working at most this long in other processes.
- GRPOSCOPE_DASHBOARD_URL: where people open the dashboard, for the run links in webhooks
  (default: the public URL, which serves the dashboard unless ``serve`` runs without it).
- GRPOSCOPE_WEBHOOK_BACKOFF_S, GRPOSCOPE_WEBHOOK_BACKOFF_MAX_S, GRPOSCOPE_WEBHOOK_RETRY_S: the
  webhook retry schedule: the first wait after a failed attempt (5 s), doubling up to the cap
  (300 s), for as long as the waits add up to less than the retry span (900 s; 0: one attempt
  only). ``alerts/delivery.py``'s ``RetrySchedule``.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SQLITE_URL = "sqlite:///grposcope.db"


class Settings(BaseSettings):
    """grposcope server configuration."""

    model_config = SettingsConfigDict(env_prefix="GRPOSCOPE_", extra="ignore")

    database_url: str = Field(DEFAULT_SQLITE_URL, description="SQLAlchemy database URL.")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    public_url: str | None = Field(None, description="Base URL users and the dashboard use.")
    max_batch_values: int = Field(100_000, ge=1)
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    fit_interval_s: float = Field(3.0, ge=0.0)
    embedded_worker: bool = True
    stall_after_s: float = Field(300.0, gt=0)
    dashboard: bool = True
    token_cache_s: float = Field(10.0, ge=0.0, description="Token → principal cache TTL.")
    partition_runs: int = Field(1000, ge=1, description="Run ids per points partition.")
    partitions_ahead: int = Field(2, ge=0)
    retention_days: float | None = Field(None, gt=0, description="Retire old partitions.")
    retention_action: Literal["detach", "drop"] = "detach"
    admin_token: str | None = Field(None, min_length=16, description="Admin token to install.")
    dashboard_url: str | None = Field(
        None, description="The dashboard's base URL, for links to run pages (default: base_url)."
    )
    webhook_backoff_s: float = Field(5.0, gt=0, description="First wait before a webhook retry.")
    webhook_backoff_max_s: float = Field(300.0, gt=0, description="Longest wait between retries.")
    webhook_retry_s: float = Field(
        900.0, ge=0, description="Webhook retries stop once their waits add up to this (0: none)."
    )

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, value: str) -> str:
        # A bare postgres:// URL would pick psycopg2, which we do not ship; psycopg 3 is ours.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        # A bare path (`--db /tmp/runs.db`, what "./grposcope.db" in the help suggests) is a
        # SQLite file; SQLAlchemy rejected it with a traceback.
        if value.strip() and "://" not in value and not value.startswith("sqlite:"):
            return "sqlite:///" + str(Path(value).expanduser().resolve())
        return value

    @field_validator("retention_days", mode="before")
    @classmethod
    def _empty_is_off(cls, value: object) -> object:
        # docker-compose passes GRPOSCOPE_RETENTION_DAYS= (empty) when it is not set: off.
        return None if isinstance(value, str) and not value.strip() else value

    @cached_property
    def base_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    @property
    def dashboard_base_url(self) -> str:
        """Where the dashboard's pages are (``/runs/{id}``, …): GRPOSCOPE_DASHBOARD_URL, else
        the public URL, where ``serve`` mounts the dashboard by default."""
        return self.dashboard_url.rstrip("/") if self.dashboard_url else self.base_url

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
