"""The ingest batch: many steps × many keys in one request."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from grposcope.api.types import INT64_MAX

MetricName = Annotated[str, Field(min_length=1, max_length=300)]
MetricValue = StrictFloat | StrictInt | Literal["NaN", "Infinity", "-Infinity"] | None


class StepRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: Annotated[
        int, Field(ge=0, le=INT64_MAX, strict=True, description="Optimizer step (global_step).")
    ]
    wall_time: float | None = Field(
        None, allow_inf_nan=False, description="Unix seconds; server time if absent."
    )
    metrics: dict[MetricName, MetricValue] = Field(
        min_length=1,
        description='Values: numbers, null, "NaN", "Infinity" or "-Infinity". A number beyond '
        "the double range (1e400, a 400-digit integer) is stored as Infinity or -Infinity.",
    )


class IngestBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[StepRecord] = Field(min_length=1, description="The steps of this batch.")


class IngestResult(BaseModel):
    run_id: int
    inserted: int = Field(description="Values newly stored.")
    duplicates: int = Field(description="Values already stored for (run, key, step): ignored.")
    last_step: int | None
    open_alerts: list[dict] = Field(description="The run's open alerts, for the trainer.")
