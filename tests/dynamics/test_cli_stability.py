"""`grposcope stability`: the verdict at a curvature measured before a run, as JSON and for
people, and one-line errors with exit code 2."""

from __future__ import annotations

import dataclasses
import json

import pytest

from grposcope.cli.main import main
from grposcope.dynamics.continuum import Hyper
from grposcope.dynamics.exact import exact_stability

# The softmax bandit lr 0.2, μ 0.9, β 0.5: Hessian K 0.105, stale share 1.52, threshold K_ref 9
BANDIT = ["--curvature", "0.105", "--lr", "0.2", "--optimizer", "sgd", "--momentum", "0.9",
          "--stale-fraction", "1.52"]  # fmt: skip


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_past_the_edge_with_its_edges(capsys) -> None:
    assert main(["stability", *BANDIT, "--k-ref", "18", "--json"]) == 0
    out = _json(capsys)
    assert out["margin_exact"] == pytest.approx(-1.150, abs=1e-3) and out["lag_applies"]
    assert out["k_ref_critical_exact"] == 9 and out["stale_share"] == 1.52
    h = Hyper(lr=0.2, optimizer="sgd", momentum=0.9, k_ref=18, stale_fraction=1.52)
    edge = dataclasses.replace(h, lr=out["lr_critical_exact"])
    assert exact_stability(edge, 0.105).margin == pytest.approx(0.0, abs=1e-6)
    assert main(["stability", *BANDIT, "--k-ref", "3"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("K=0.105 lr=0.2 sgd") and "\nstable: margin exact=" in text
    assert "unstable from K_ref 9" in text
    assert main(["stability", *BANDIT, "--k-ref", "8"]) == 0  # one short of the threshold
    assert "\nnear the edge: margin exact=0.005" in capsys.readouterr().out


def test_a_corrected_run_has_no_k_ref_edge(capsys) -> None:
    args = ["stability", "--curvature", "3800", "--lr", "1e-6", "--k-ref", "4"]
    assert main([*args, "--correction", "is_clipped", "--json"]) == 0
    out = _json(capsys)
    assert out["k_ref_critical_exact"] is None and out["lag_applies"] is False
    assert out["margin_exact"] > 0.99


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--curvature", "0", "--lr", "1e-6"], "--curvature must be"),
        (["--curvature", "nan", "--lr", "1e-6"], "--curvature must be"),
        (["--curvature", "1", "--lr", "-1"], "lr must be"),
        (["--curvature", "1", "--lr", "1e-6", "--momentum", "1.5"], "momentum"),
        (["--curvature", "1", "--lr", "1e-6", "--stale-fraction", "-1"], "stale_fraction"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys) -> None:
    assert main(["stability", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1
