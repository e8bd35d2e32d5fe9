"""A series first fitted with many points (an imported log) gets the fit history a live run
would have had, and its past is judged with it: the alerts an import records are the ones the
same run streamed live raises (bench/alert_replay.py), not artefacts of one fit at the end."""

from __future__ import annotations

import numpy as np
import pytest

from grposcope.fits import refit
from grposcope.fits.repository import grid_steps
from grposcope.logfiles import read_log
from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


def _get(api, path, **params):
    return api.client.get(f"/api/v1{path}", params=params, headers=api.headers(api.viewer))


def test_a_first_fit_of_many_points_adds_its_prefixes_fits(api) -> None:
    steps, values = learning_curve(n=200, seed=5)
    run = make_run(api, api.alpha)
    send(api, api.alpha, run["id"], steps, reward=values)
    assert drain(worker_for(api)) == 1
    items = _get(api, f"/runs/{run['id']}/fits", limit=100).json()["items"]
    got = sorted(item["step"] for item in items)
    shares = np.arange(1, 20) * refit.HISTORY_SHARE
    assert got == [int(round(f * 200)) for f in shares] + [200]  # every 5 %, then the whole
    # a series that starts small (a live run) gets no history: one snapshot a refit
    live = make_run(api, api.alpha, name="live", run_key="live")
    send(api, api.alpha, live["id"], steps[:40], reward=values[:40])
    assert drain(worker_for(api)) == 1
    assert len(_get(api, f"/runs/{live['id']}/fits").json()["items"]) == 1


def test_the_grid_keeps_older_fits_stable_from_refit_to_refit() -> None:
    assert grid_steps(446) == list(range(32, 447, 32))
    assert grid_steps(479) == grid_steps(446)[:14] + [448]  # the same points, one more
    assert grid_steps(700) == list(range(64, 701, 64))  # the stride doubles with the run
    assert 10 < len(grid_steps(9751)) <= 20 and grid_steps(5) == [1, 2, 3, 4, 5]


@pytest.mark.usefixtures("real_logs")
def test_an_imported_run_that_sat_flat_then_rose_reads_no_stop_after_the_fact(
    api, real_logs
) -> None:
    """onlyjokers' Gemma 3 1B run is flat (KL ~6e-4) for its first 160 steps and then climbs
    from 0.4 to 6.3: streamed live (the replay), no plateau_reached opens, because each early
    fit sees gain left. Imported with one fit at the end, the early checkpoints had no fit,
    and two "not learning" warnings (60-99, 134-188) were recorded after the fact."""
    path = real_logs / "extra" / "onlyjokers_gemma3_1b_gsm8k_G4_446steps.csv"
    if not path.exists():
        pytest.skip(f"{path.name} is not in the real logs")
    series = read_log(path)
    steps = sorted({int(s) for s, _ in zip(*series["reward"], strict=True)})
    columns = {}
    for key, (s, v) in series.items():
        if key in ("reward", "kl"):
            by_step = dict(zip(s.astype(int).tolist(), v.tolist(), strict=True))
            columns[key] = [by_step.get(step, float("nan")) for step in steps]
    run = make_run(api, api.alpha)
    send(api, api.alpha, run["id"], steps, **columns)
    assert drain(worker_for(api)) == 1
    alerts = _get(api, "/alerts", run_id=run["id"]).json()["items"]
    assert [a for a in alerts if a["kind"] == "plateau_reached"] == []
