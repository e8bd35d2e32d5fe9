"""What only a browser shows of the runs table's order and the compare page's limit: a header
click sorts numbers by value (the DataTable asks the server, sort_action="custom"), and a run
picked past the limit leaves the picker again with a note (a callback that writes its own
input). No screenshots: nothing here changes how the pages look."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboard.browser_support import Api, pick, wait_until
from tests.dashboard.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# (name, last step, reward): text order and numeric order differ for both columns
RUNS = [
    ("sort-a", 200, 1.89),
    ("sort-b", 2000, -0.5),
    ("sort-c", 35, 2.65e-4),
    ("sort-d", 1200, 3.69),
]


def _column(page: Any, column: str) -> list[str]:
    cells = page.locator(f'#runs-table td[data-dash-column="{column}"]')
    return [t.strip() for t in cells.all_inner_texts()]


def _sort(page: Any, column: str) -> None:
    page.locator(f'#runs-table th[data-dash-column="{column}"] .column-header--sort').click()


def test_runs_table_sorts_numbers_by_value(dash_server: Any, page: Any) -> None:
    api = Api(dash_server.url, dash_server.token("tables", "writer"))
    for name, last, reward in RUNS:
        run_id = api.create_run("sorting", name)
        api.ingest(run_id, [{"step": last, "metrics": {"reward": reward}}])
    login(page, dash_server, dash_server.admin_token, "/?project=sorting")
    wait_until(lambda: len(_column(page, "last_step")) == len(RUNS), 30, "the four runs listed")
    _sort(page, "last_step")  # ascending
    want = ["35", "200", "1,200", "2,000"]
    wait_until(lambda: _column(page, "last_step") == want, 15, f"last step sorted as {want}")
    _sort(page, "reward")  # ascending: a new sort replaces the last step's
    want = ["−0.5", "2.65e-04", "1.89", "3.69"]
    wait_until(lambda: _column(page, "reward") == want, 15, f"reward sorted as {want}")
    _sort(page, "reward")  # descending
    wait_until(lambda: _column(page, "reward") == want[::-1], 15, "reward sorted descending")
    page.wait_for_timeout(2500)  # a refresh tick (2 s) keeps the order
    assert _column(page, "reward") == want[::-1]


def test_compare_keeps_the_picker_to_the_runs_it_shows(dash_server: Any, page: Any) -> None:
    api = Api(dash_server.url, dash_server.token("tables", "writer"))
    ids = []
    for i in range(22):
        ids.append(api.create_run("limit", f"limit-{i:02d}"))
        api.ingest(ids[-1], [{"step": s, "metrics": {"reward": 0.1 * s}} for s in (1, 2, 3)])
    link = ",".join(str(i) for i in [ids[0], ids[0], *ids[:21]])  # a repeated id, 21 runs
    login(page, dash_server, dash_server.admin_token, f"/compare?runs={link}&metric=kl")
    note = page.locator("#cmp-over")
    note.wait_for()
    assert "Showing the first 20 of the 21 runs the link names" in note.inner_text()
    assert f"Left out: run {ids[20]}." in note.inner_text()
    page.get_by_text("20 selected").wait_for()
    lacking = page.locator("#cmp-lacking")
    failed = page.locator("#cmp-params .alert-danger")
    # twenty runs' series read and drawn: 4 s alone, past 30 s once in the full suite's load.
    # A load that failed (a read past the client's timeout) shows its error instead: say it,
    # rather than wait out the note it will never show.
    lacking.or_(failed).first.wait_for(timeout=90_000)
    assert not failed.count(), f"the comparison failed to load: {failed.inner_text()}"
    # and it stays: the metric no run logged is kept in the picker, which a Dropdown would
    # otherwise clear, calling the page back without it and taking the note away a second on
    page.wait_for_load_state("networkidle")
    assert lacking.is_visible()
    assert page.locator("#cmp-metric").inner_text().strip() == "kl"
    assert "No kl logged by tables/limit-00, tables/limit-01," in lacking.inner_text()
    pick(page, "cmp-runs", "tables / limit / limit-21")  # a 21st run, from the picker
    picked = page.locator("#cmp-over-picked")
    picked.wait_for()
    assert f"Showing the first 20 of the 21 runs picked: a comparison holds at most 20. " \
           f"Left out: run {ids[21]}." == picked.inner_text().strip()  # fmt: skip
    page.get_by_text("20 selected").wait_for()
