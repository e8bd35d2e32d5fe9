"""Settings resolution and value conversion: what goes over the wire must be valid JSON."""

from __future__ import annotations

import json
import logging
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


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://127.0.0.1:8000", "must use http:// or https://"),
        ("http://127.0.0.1:port", "malformed port"),
        ("http:///api/v1", "names no host"),
        ("  ", "empty"),
    ],
)
def test_a_bad_url_is_explained(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ClientConfig.resolve(url=url)


def test_a_url_without_a_scheme_means_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPOSCOPE_URL", "10.0.0.5:8000/api/v1/")
    assert ClientConfig.resolve().url == "http://10.0.0.5:8000"


def test_stop_on_accepts_known_kinds_and_names_unknown_ones() -> None:
    assert validate_stop_on("reward_hacking") == {"reward_hacking"}
    assert validate_stop_on(()) == frozenset()
    with pytest.raises(ValueError, match="stop_on.*reward_hack"):
        validate_stop_on(["reward_hack"])


@pytest.fixture
def fresh_stop_on_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop_on warning is logged once per process and set of kinds: start afresh."""
    from grposcope_trainer import config

    monkeypatch.setattr(config, "_WARNED_STOP_ON", set())


def _stop_on_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "grposcope_trainer" and "stop_on" in r.getMessage()]  # fmt: skip


def test_stop_on_warns_about_kinds_that_never_stop_training(
    fresh_stop_on_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a critical alert stops training: plateau_reached and run_stalled never are, and
    policy_concentration is not with the default rules. They are accepted (no exception:
    training must go on) with one warning that names them and the kinds that can stop."""
    kinds = ("plateau_reached", "run_stalled", "dynamical_instability")
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        assert validate_stop_on(kinds) == set(kinds)
        assert validate_stop_on(list(kinds)) == set(kinds)  # the same set: not warned again
    (message,) = _stop_on_warnings(caplog)
    named = message.split("will not stop training: ")[1].split(". Only")[0]
    assert "plateau_reached" in named and "run_stalled" in named
    assert "dynamical_instability" not in named
    assert message.endswith(
        "the kinds that can stop it with the default rules are reward_hacking, "
        "advantage_degeneracy, dynamical_instability (to act on the others, read Run.alerts)"
    )

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        validate_stop_on("policy_concentration")
    (message,) = _stop_on_warnings(caplog)
    assert "policy_concentration (critical only where its project lowers critical_drop" in message


def test_stop_on_with_kinds_that_can_stop_says_nothing(
    fresh_stop_on_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        validate_stop_on(("dynamical_instability", "reward_hacking", "advantage_degeneracy"))
        validate_stop_on(())
    assert _stop_on_warnings(caplog) == []


def test_the_callback_warns_once_and_a_failing_warning_never_raises(
    fresh_stop_on_warnings: None, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from grposcope_trainer import GRPOScopeCallback, config

    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        GRPOScopeCallback(stop_on=("plateau_reached",))
    assert len(_stop_on_warnings(caplog)) == 1

    class Broken:
        def warning(self, *args: object) -> None:
            raise RuntimeError("a logging setup that raises")

    monkeypatch.setattr(config, "logger", Broken())
    monkeypatch.setattr(config, "_WARNED_STOP_ON", set())
    assert validate_stop_on(("run_stalled",)) == {"run_stalled"}


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


def test_a_value_that_cannot_be_sent_is_dropped_by_name_and_the_rest_kept() -> None:
    class Broken:
        def __float__(self) -> float:
            raise RuntimeError("device lost")

    dropped: list[tuple[str, str]] = []
    logs = {"reward": 0.5, "huge": 10**400, "text": "n/a", "obj": Broken(), "nul\x00": 1.0,
            "\ud800": 2.0, "": 3.0, "x" * 301: 4.0, 7: 5.0, "nan": float("nan")}  # fmt: skip
    out = clean_metrics(logs, lambda key, why: dropped.append((key, why)))
    assert out == {"reward": 0.5, "7": 5.0, "nan": "NaN"}
    reasons = dict(dropped)
    assert "too large for a float" in reasons["huge"]
    assert "not a number" in reasons["text"]
    assert "device lost" in reasons["obj"]
    assert "NUL" in reasons["nul\x00"] and "surrogate" in reasons["\ud800"]
    assert "0 characters" in reasons[""] and "301 characters" in reasons["x" * 301]
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize(
    ("given", "base", "normal"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/api/v1/", "http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("HTTP://Example.COM:80/", "HTTP://Example.COM:80", "http://example.com"),
        ("https://h.example/grp/api/v1", "https://h.example/grp", "https://h.example/grp"),
        ("http://u:pw@[::1]:9000/x?q=1", "http://u:pw@[::1]:9000/x?q=1", "http://[::1]:9000/x"),
        ("127.0.0.1:8000/api/v1", "http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        (" localhost:8000/ ", "http://localhost:8000", "http://localhost:8000"),
    ],
)
def test_server_urls_are_accepted_with_or_without_api_v1(given, base, normal) -> None:
    from grposcope_trainer.config import normalise_url, server_base

    assert server_base(given) == base
    assert normalise_url(given) == normal


def test_the_spool_is_keyed_by_server_and_token_never_the_token_itself(tmp_path: Path) -> None:
    from grposcope_trainer.spool import keyed_root

    secret = "gs_0123456789abcdef0123456789abcdef"
    root = keyed_root(tmp_path, "http://127.0.0.1:8000", secret)
    assert root.parent.parent == tmp_path and secret not in str(root)
    assert root == keyed_root(tmp_path, "http://127.0.0.1:8000/api/v1/", secret)  # one server
    assert root != keyed_root(tmp_path, "http://127.0.0.1:8001", secret)  # another port
    assert root.parent != keyed_root(tmp_path, "http://10.0.0.5:8000", secret).parent
    assert root != keyed_root(tmp_path, "http://127.0.0.1:8000", secret + "x")  # another token
    assert root.parent == keyed_root(tmp_path, "http://127.0.0.1:8000", "other").parent
    assert keyed_root(tmp_path, "http://127.0.0.1:8000", None).name == "anonymous"


def test_json_safe_keeps_integers_within_64_bits() -> None:
    given = {"a": 2**63 - 1, "b": -(2**63), "c": 2**63, "d": 10**400, "e": -(10**5000)}
    assert json_safe(given) == {
        "a": 2**63 - 1, "b": -(2**63), "c": float(2**63), "d": "Infinity", "e": "-Infinity"
    }  # fmt: skip
