"""Page layouts and callbacks called as functions against a fake API: the runs table's order,
what the compare page leaves out and says so, and the run page's summary of a finished run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from grposcope_dashboard import api_client

N_RUNS = 31


def _run(i: int) -> dict[str, Any]:
    keys = ["reward", "kl"] if i % 2 else ["reward"]  # odd runs log kl, even ones do not
    return {"id": i, "name": f"run{i}", "team": "ml", "project": "p", "status": "finished",
            "last_step": 100 * i, "open_alerts": 0, "open_alert_kinds": [],
            "latest": {"value": 0.01 * i}, "fit": None, "metric_keys": keys,
            "reward_key": "reward", "hyperparameters": {}, "config": {}, "alerts": []}  # fmt: skip


class FakeApi:
    """The calls the runs, compare and run pages make, answered from ``runs``."""

    def __init__(self, runs: list[dict[str, Any]], fit: dict[str, Any] | None = None) -> None:
        self.by_id = {r["id"]: r for r in runs}
        self.the_fit = fit
        self.loaded: list[int] = []

    def runs(self, **_: Any) -> dict[str, Any]:
        items = sorted(self.by_id.values(), key=lambda r: r["id"])
        return {"items": items, "total": len(items)}

    def run(self, run_id: int) -> dict[str, Any]:
        self.loaded.append(run_id)
        return dict(self.by_id[run_id])

    def series(self, run_id: int, keys: list[str], **_: Any) -> dict[str, Any]:
        logged = self.by_id[run_id]["metric_keys"]
        return {k: {"steps": [1, 2, 3], "values": [0.0, 0.01, 0.0]} for k in keys if k in logged}

    def fit(self, run_id: int) -> dict[str, Any] | None:
        return self.the_fit

    def fits(self, run_id: int, limit: int = 500) -> list[dict[str, Any]]:
        return []

    def forecast_accuracy(self, run_id: int) -> Any:
        return None

    def teams(self) -> list[dict[str, Any]]:
        return [{"name": "ml"}]

    def projects(self, team: str | None = None) -> list[dict[str, Any]]:
        return [{"name": "p"}]

    def alert_kinds(self) -> list[dict[str, Any]]:
        return []


@pytest.fixture(scope="module")
def pages() -> Any:
    """The pages register themselves with a Dash app, so one is built first (port 9: nothing
    answers there; every call goes to the fake)."""
    from types import SimpleNamespace

    from grposcope_dashboard.app import create_dash

    create_dash("http://127.0.0.1:9")
    from grposcope_dashboard.pages import compare, run, run_slow, runs

    return SimpleNamespace(compare=compare, run=run, run_slow=run_slow, runs=runs)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    api = FakeApi([_run(i) for i in range(1, N_RUNS + 1)])
    monkeypatch.setattr(api_client, "client", lambda token=None: api)
    yield api


def _find(component: Any, id_: str) -> Any:
    """The component with ``id_`` in a layout tree, or None."""
    if getattr(component, "id", None) == id_:
        return component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and not isinstance(child, (str, int, float)):
            found = _find(child, id_)
            if found is not None:
                return found
    return None


# -- runs: sorting ---------------------------------------------------------------------------


def test_the_runs_table_sorts_by_number_in_its_callback(pages: Any, fake: FakeApi) -> None:
    """sort_action="native" compared the cells' text: "1,000" sorted before "200"."""
    table = _find(pages.runs.layout(), "runs-table")
    assert table.sort_action == "custom"
    rows, total, _ = pages.runs.refresh(
        0, None, None, None, None, None, [{"column_id": "last_step", "direction": "asc"}]
    )
    steps = [r["last_step"] for r in rows]
    assert steps[:3] == ["100", "200", "300"] and steps[9:11] == ["1,000", "1,100"]
    rows, _, _ = pages.runs.refresh(0, None, None, None, None, None, None)
    assert [r["id"] for r in rows] == list(range(1, N_RUNS + 1))  # unsorted: the API's order
    assert total == f"{N_RUNS} runs"


# -- compare: the limit, repeated ids, runs without the metric --------------------------------


def test_a_link_past_the_limit_shows_the_first_runs_and_says_so(pages: Any, fake: FakeApi) -> None:
    """``runs=1,…,31`` said "31 selected" and showed 20 without a word."""
    link = ",".join(str(i) for i in range(1, N_RUNS + 1))
    page = pages.compare.layout(runs=link)
    picker = _find(page, "cmp-runs")
    assert picker.value == list(range(1, 21))  # the picker holds what is shown
    note = repr(_find(page, "cmp-over"))
    assert "Showing the first 20 of the 31 runs the link names" in note
    assert "Left out: runs 21, 22," in note


def test_runs_picked_past_the_limit_are_taken_off_the_picker(pages: Any, fake: FakeApi) -> None:
    out = pages.compare.update(list(range(1, 24)), "smoothed", None)
    notes, picker = out[-2], out[-1]
    assert picker == list(range(1, 21)) and sorted(fake.loaded) == list(range(1, 21))
    assert "Showing the first 20 of the 23 runs picked" in repr(notes)
    assert "Left out: runs 21, 22, 23." in repr(notes)
    out = pages.compare.update([1, 2, 3], "smoothed", None)
    assert out[-2] == [] and out[-1] is pages.compare.no_update  # within the limit: as picked


def test_a_repeated_id_is_one_run(pages: Any, fake: FakeApi) -> None:
    """``runs=1,1,1`` said "3 selected" and drew one line three times."""
    assert _find(pages.compare.layout(runs="1,1,1"), "cmp-runs").value == [1]
    out = pages.compare.update([1, 1, 2], "raw", None)
    assert out[-1] == [1, 2] and [t.name for t in out[0].data] == ["ml/run1", "ml/run2"]
    from grposcope_dashboard.components.common import capped

    assert capped([3, 1, 3, 2, 1], 2) == ([3, 1], [2])  # first occurrences, in order


def test_runs_without_the_overlaid_metric_are_named(pages: Any, fake: FakeApi) -> None:
    """Runs that never logged ``metric`` were dropped from the overlay without a word."""
    out = pages.compare.update([1, 2, 3, 4], "raw", "kl")
    assert [t.name for t in out[0].data] == ["ml/run1", "ml/run3"]
    assert "No kl logged by ml/run2, ml/run4: not in the overlay." in repr(out[-2])
    out = pages.compare.update([2, 4], "raw", "kl")
    assert not out[0].data and "None of these runs logged kl" in out[0].layout.annotations[0].text
    assert "ml/run2, ml/run4" in repr(out[-2])
    assert "kl" in out[6]  # kept in the picker's options, or the Dropdown clears it (and the note)
    from grposcope_dashboard.components.common import lacking_note, over_limit_note

    assert lacking_note([], "kl") is None and "No reward logged" in repr(lacking_note(["a"], None))
    assert over_limit_note([1], [], "picked", "x") is None


# -- run page: a finished run's summary ------------------------------------------------------

ENDED_FIT = {
    "step": 200,
    "plateau": {"value": 2.65e-4, "lo": -0.0384, "hi": 0.0389},
    "steps_to_plateau": 0.0,
    "compute": {"wasted_so_far": 176.0},
    "phases": {"slow_start_end": 10.0, "plateau_start": 24.0},
    "forecast": {"step": [0, 100, 200], "mean": [0.0, 0.0, 0.0], "lo": [-0.04] * 3,
                 "hi": [0.04] * 3},
}  # fmt: skip


def test_a_finished_run_page_reads_as_the_runs_table(
    pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run page said "0 / 176 steps past it" and "[0, 0.0389]" where the runs table (and
    the API) said "—" and "[−0.0384, 0.0389]"."""
    plateau = {"id": 1, "kind": "plateau_reached", "severity": "info", "state": "open",
               "opened_step": 24, "evidence": {}}  # fmt: skip
    run = {**_run(1), "alerts": [plateau], "open_alert_kinds": ["plateau_reached"]}
    api = FakeApi([run], ENDED_FIT)
    monkeypatch.setattr(api_client, "client", lambda token=None: api)
    summary = repr(_find(pages.run.layout(run_id="1"), "run-summary"))
    assert "2.65e-04 [−0.0384, 0.0389]" in summary
    assert "steps past it" not in summary and "children='—'" in summary
    # the slow tick redraws the summary when the run ends, so a page left open follows
    state = {"run_id": 1, "reward_key": "reward", "fit_step": 200, "latest": 0.0,
             "last": {"reward": 3}, "max_steps": None}  # fmt: skip
    slow_state = {"status": "running", "alerts": repr([(1, "open", "info")]), "fit_step": 200}
    out = pages.run_slow.slow(1, state, slow_state)
    assert "children='—'" in repr(out[1]) and "steps past it" not in repr(out[1])
