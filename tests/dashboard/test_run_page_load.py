"""What the run page draws and reads on opening: capped alert lines and list, and a
diagnostics half that reads only the series it shows (no second read of the run)."""

from __future__ import annotations

from typing import Any

from grposcope_dashboard import figures
from grposcope_dashboard.components import run_panels
from grposcope_dashboard.pages import run_data


def alert(i: int, state: str = "resolved") -> dict[str, Any]:
    return {"id": i, "kind": "policy_concentration", "state": state, "severity": "warning",
            "opened_step": 10 * i, "resolved_step": 10 * i + 5, "message": "m"}  # fmt: skip


def test_alert_lines_are_capped_and_open_alerts_always_drawn() -> None:
    alerts = [alert(i) for i in range(300)] + [alert(3, state="open")]
    shown = figures.shown_alerts(alerts)
    assert len(shown) == figures.MAX_ALERT_LINES
    assert shown[0]["state"] == "open" and shown[0]["opened_step"] == 30
    assert [a["opened_step"] for a in shown[1:4]] == [2990, 2980, 2970]  # then the latest
    shapes = figures.fit_shapes(None, (0, 3000), alerts)
    assert sum(s["name"].startswith("alert") for s in shapes) == figures.MAX_ALERT_LINES


def test_alert_list_shows_the_newest_and_says_how_many_are_left_out() -> None:
    listed = run_panels.alert_timeline([alert(i) for i in range(80)])
    items = listed.children
    assert len(items) == run_panels.MAX_ALERT_ITEMS + 1
    assert "step 790" in repr(items[0]) and "60 older alerts" in repr(items[-1])
    short = run_panels.alert_timeline([alert(i) for i in range(3)])
    assert len(short.children) == 3


class RecordingApi:
    """Answers series reads and records every call; a run read would be a failure."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def series(self, run_id: int, keys: list[str], **kw: Any) -> dict[str, Any]:
        self.calls.append(("series", (run_id, tuple(keys), kw.get("max_points"))))
        return {k: {"steps": [1, 2, 3], "values": [0.1, 0.2, 0.3]} for k in keys}

    def run(self, run_id: int) -> dict[str, Any]:
        raise AssertionError("the diagnostics must not read the run again")


def test_diagnostics_read_their_series_from_the_page_digest_only() -> None:
    keys = ["reward", "entropy", "kl", "frac_reward_zero_std"]
    hyper = {"num_generations": 8, "lr": 1e-6}
    run = {"id": 7, "metric_keys": keys, "reward_key": "reward", "hyperparameters": hyper}
    init = run_data.diag_init(run)
    assert init == {"id": 7, "metric_keys": run["metric_keys"], "reward_key": "reward",
                    "roles": {}, "hyperparameters": {"num_generations": 8}}  # fmt: skip
    api = RecordingApi()
    xy = {"steps": [1, 2, 3], "smooth": [0.1, 0.2, 0.3]}
    built = run_data.build_diagnostics(api, init, xy)  # type: ignore[arg-type]
    assert api.calls == [("series", (7, ("entropy", "frac_reward_zero_std", "kl"), 800))]
    assert figures.IID in built["state"]["trace_keys"]  # the group size came from the digest
    assert built["state"]["last"] == {"entropy": 3, "frac_reward_zero_std": 3, "kl": 3}


class EmptyRunApi:
    """A run that exists and has logged nothing yet (or no reward): no series, no fit."""

    def series(self, run_id: int, keys: list[str], **kw: Any) -> dict[str, Any]:
        return {k: {"steps": [], "values": []} for k in keys}

    def fit(self, run_id: int) -> None:
        return None


def test_a_run_without_points_gets_its_page_not_a_bad_id_message() -> None:
    api = EmptyRunApi()
    fresh = {"id": 12, "metric_keys": [], "reward_key": None, "status": "running"}
    built = run_data.build_reward(api, fresh)  # type: ignore[arg-type]
    assert built["xy"] == {"steps": [], "smooth": []} and built["latest"] is None
    assert built["fig"].layout.annotations[0].text == run_data.WAITING
    # A reward key the run has registered but no point of it yet: the page draws, empty.
    started = {"id": 13, "metric_keys": ["reward"], "reward_key": "reward", "status": "running"}
    assert run_data.build_reward(api, started)["xy"]["steps"] == []  # type: ignore[arg-type]


def test_a_run_with_no_reward_series_says_which_keys_it_has() -> None:
    run = {"id": 10, "metric_keys": ["kl", "loss"], "reward_key": None, "status": "finished"}
    fig = run_data.build_reward(EmptyRunApi(), run)["fig"].layout.annotations[0].text  # type: ignore[arg-type]
    assert "No reward series among this run's 2 keys (kl, loss)" in fig
    assert run_data.WAITING not in fig


def test_a_compare_link_naming_a_missing_run_says_so() -> None:
    from grposcope_dashboard.components.common import missing_note

    assert missing_note([]) is None
    note = missing_note([999, 1000])
    assert "No run 999, 1000: left out of the comparison." in repr(note)


def test_the_chart_spans_an_epoch_sized_runs_planned_total() -> None:
    """TRL sizes a run by num_train_epochs with max_steps = -1; the callback sends the total
    the trainer computed as planned_steps, and the chart's x-axis reaches it (the server
    reads the same keys in the same order)."""
    from grposcope_dashboard.pages.run_data import max_steps_of

    running = {"status": "running", "last_step": 40}
    assert max_steps_of({**running, "config": {"max_steps": -1, "planned_steps": 320}}) == 320
    assert max_steps_of({**running, "config": {"max_steps": 200}}) == 200
    assert max_steps_of({**running, "config": {"max_steps": -1}}) is None
    assert max_steps_of({"status": "finished", "last_step": 90, "config": {}}) == 90
