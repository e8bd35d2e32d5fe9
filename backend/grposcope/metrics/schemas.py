"""Response bodies of the series API. Values are numbers, null, or the strings "NaN",
"Infinity" and "-Infinity" (the API's convention for non-finite values, docs/api.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

SeriesValue = float | str | None


class SeriesData(BaseModel):
    steps: list[int]
    values: list[SeriesValue]
    n_total: int = Field(description="Points stored (before downsampling).")
    downsampled: bool


class SeriesOut(BaseModel):
    run_id: int
    series: dict[str, SeriesData] = Field(description="Per key asked for (empty when unknown).")


class MetricKeyOut(BaseModel):
    key: str
    last_step: int
    last_value: float | str | None


class MetricKeyList(BaseModel):
    keys: list[MetricKeyOut]
