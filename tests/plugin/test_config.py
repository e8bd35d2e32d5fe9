"""Settings resolution and value conversion: what goes over the wire must be valid JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from grposcope_trainer.config import (
    ClientConfig,
    clean_metrics,
    json_safe,
    metric_value,
    validate_stop_on,
)


def test_arguments_override_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GRPOSCOPE_URL", "http://127.0.0.1:1/")
    monkeypatch.setenv("GRPOSCOPE_TOKEN", "env-token")
    monkeypatch.setenv("GRPOSCOPE_PROJECT", "env-project")
    monkeypatch.setenv("GRPOSCOPE_RUN_NAME", "env-run")
    monkeypatch.setenv("GRPOSCOPE_SPOOL_DIR", str(tmp_path / "env-spool"))
    env = ClientConfig.resolve()
    assert env == ClientConfig(
        "http://127.0.0.1:1", "env-token", "env-project", "env-run", tmp_path / "env-spool"
    )
    args = ClientConfig.resolve("http://127.0.0.1:2", "t", "p", "r", tmp_path / "s")
    assert args == ClientConfig("http://127.0.0.1:2", "t", "p", "r", tmp_path / "s")


def test_defaults_without_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("URL", "TOKEN", "PROJECT", "RUN_NAME", "SPOOL_DIR"):
        monkeypatch.delenv(f"GRPOSCOPE_{var}", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = ClientConfig.resolve()
    assert (cfg.url, cfg.token, cfg.project, cfg.run_name) == (
        "http://127.0.0.1:8000",
        None,
        "default",
        None,
    )
    assert cfg.spool_dir == tmp_path / "grposcope" / "spool"


def test_bad_url_names_the_argument() -> None:
    with pytest.raises(ValueError, match="url"):
        ClientConfig.resolve(url="127.0.0.1:8000")


def test_stop_on_accepts_known_kinds_and_names_unknown_ones() -> None:
    assert validate_stop_on("reward_hacking") == {"reward_hacking"}
    assert validate_stop_on(()) == frozenset()
    with pytest.raises(ValueError, match="stop_on.*reward_hack"):
        validate_stop_on(["reward_hack"])


def test_metric_values_follow_the_api_number_rules() -> None:
    np = pytest.importorskip("numpy")
    assert metric_value(1) == 1.0 and isinstance(metric_value(1), float)
    assert metric_value(np.float32(0.5)) == 0.5
    assert metric_value(True) == 1.0
    assert metric_value(None) is None
    assert metric_value(math.nan) == "NaN"
    assert metric_value(-math.inf) == "-Infinity"
    assert metric_value(np.float64("inf")) == "Infinity"
    with pytest.raises((TypeError, ValueError)):
        metric_value("text")


def test_clean_metrics_keeps_numbers_and_drops_the_rest() -> None:
    logs = {"reward": 0.5, "note": "hello", "hist": [1, 2], "x" * 301: 1.0, "grad_norm": math.nan}
    assert clean_metrics(logs) == {"reward": 0.5, "grad_norm": "NaN"}


def test_json_safe_makes_any_config_serialisable() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    value = {"a": (1, 2.5, math.inf), "b": {3: Opaque()}, "c": {1, 2}, "d": None}
    safe = json_safe(value)
    json.dumps(safe, allow_nan=False)  # would raise on NaN/Infinity or unknown objects
    assert safe["a"] == [1, 2.5, "Infinity"]
    assert safe["b"] == {"3": "opaque"}
