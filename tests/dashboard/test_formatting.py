"""Number formats are the same everywhere; API strings for non-finite values are understood."""

from __future__ import annotations

from grposcope_dashboard import formatting as fmt


def test_num_handles_api_values() -> None:
    assert fmt.num(0.123456) == "0.123"
    assert fmt.num(-1.5) == "−1.5"
    assert fmt.num(None) == fmt.DASH
    assert fmt.num("NaN") == "NaN"
    assert fmt.num("Infinity") == "+∞"
    assert fmt.num(1.2e-7) == "1.20e-07"


def test_interval_and_step_and_signed() -> None:
    assert fmt.interval(0.8, 0.7, 0.9) == "0.8 [0.7, 0.9]"
    assert fmt.interval(0.8, None, 0.9) == "0.8"
    assert fmt.step(12345.6) == "12,346"
    assert fmt.signed(0.42) == "+0.42"
    assert fmt.signed(-0.1) == "−0.10"


def test_margin_level_marks_the_edge() -> None:
    assert fmt.margin_level(-0.1) == "danger"
    assert fmt.margin_level(0.1) == "warning"
    assert fmt.margin_level(0.8) == "success"
    assert fmt.margin_level(None) == "secondary"


def test_regime_in_plain_words() -> None:
    assert "no overshoot" in fmt.regime("overdamped")
    assert fmt.regime(None) == fmt.DASH
    assert fmt.params(494032768) == "494M"
