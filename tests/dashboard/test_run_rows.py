"""The runs table's order: numeric columns sort by their numbers, not their text."""

from __future__ import annotations

from typing import Any

from grposcope_dashboard.components.run_rows import COLUMNS, SORT_KEYS, run_row, sort_rows


def _item(i: int, name: str, **kw: Any) -> dict[str, Any]:
    fit = {k: kw.pop(k) for k in ("plateau", "steps_to_plateau", "margin_exact") if k in kw}
    latest = {"value": kw.pop("reward")} if "reward" in kw else None
    return {"id": i, "name": name, "team": "ml", "project": "p", "status": "running",
            "latest": latest, "fit": fit, **kw}  # fmt: skip


ROWS = [
    run_row(_item(1, "b", last_step=200, reward=1.89, plateau=0.5, open_alerts=2)),
    run_row(_item(2, "A", last_step=2000, reward=-0.5, plateau=-1.2, open_alerts=10)),
    run_row(_item(3, "c", last_step=None, reward=2.65e-4, plateau=None, open_alerts=0)),
    run_row(_item(4, "d", last_step=35, reward=3.69, plateau=0.05, open_alerts=1)),
    run_row(_item(5, "e", last_step=1200, plateau=12.0, open_alerts=0)),  # no reward yet
]


def _order(column: str, direction: str = "asc") -> list[int]:
    return [r["id"] for r in sort_rows(ROWS, [{"column_id": column, "direction": direction}])]


def test_numeric_columns_sort_by_value_and_keep_their_text() -> None:
    """DataTable's native sort compared the cells' text: "2,000" before "200", negatives
    last, "2.65e-04" between 1.89 and 3.69."""
    assert [r["last_step"] for r in ROWS] == ["200", "2,000", "—", "35", "1,200"]
    assert [r["reward"] for r in ROWS] == ["1.89", "−0.5", "2.65e-04", "3.69", "—"]
    assert _order("last_step") == [4, 1, 5, 2, 3]  # 35, 200, 1,200, 2,000, then "—"
    assert _order("last_step", "desc") == [2, 5, 1, 4, 3]  # "—" last either way
    assert _order("reward") == [2, 3, 1, 4, 5]  # −0.5, 2.65e-04, 1.89, 3.69, —
    assert _order("reward", "desc") == [4, 1, 3, 2, 5]
    assert _order("plateau") == [2, 4, 1, 5, 3]  # −1.2, 0.05, 0.5, 12, —
    assert _order("alerts", "desc") == [2, 1, 4, 3, 5]  # 10 before 2; ties keep API order
    assert _order("run") == [2, 1, 3, 4, 5]  # by name, ignoring case, not by the link text
    assert _order("where") == [1, 2, 3, 4, 5]  # a text column: ties keep the API's order
    assert sort_rows(ROWS, []) == ROWS and sort_rows(ROWS, None) == ROWS


def test_steps_to_plateau_and_margin_sort_by_number_and_dashes_go_last() -> None:
    rows = [
        run_row(_item(1, "a", steps_to_plateau=1500.0, margin_exact=0.42)),
        run_row(_item(2, "b", steps_to_plateau=200.0, margin_exact=-0.1)),
        run_row(_item(3, "c", steps_to_plateau=0.0)),  # "not confirmed": a fitted 0
        run_row(_item(4, "d", steps_to_plateau=80.0, status="finished")),  # ended: "—"
        run_row(_item(5, "e", margin_exact=1.0)),
    ]
    assert [r["to_plateau"] for r in rows] == ["1,500", "200", "not confirmed", "—", "—"]
    by = [r["id"] for r in sort_rows(rows, [{"column_id": "to_plateau", "direction": "asc"}])]
    assert by == [3, 2, 1, 4, 5]
    by = [r["id"] for r in sort_rows(rows, [{"column_id": "margin", "direction": "asc"}])]
    assert by == [2, 1, 5, 3, 4]  # −0.10, +0.42, +1.00, then the runs without a margin


def test_every_numeric_column_has_a_number_to_sort_by() -> None:
    ids = {c for c, _, _ in COLUMNS}
    assert {"last_step", "reward", "plateau", "to_plateau", "margin", "alerts"} <= set(SORT_KEYS)
    assert set(SORT_KEYS) <= ids
    row = run_row(_item(1, "a", last_step=5, reward=0.1, plateau=0.5, steps_to_plateau=9.0,
                        margin_exact=0.3, open_alerts=1))  # fmt: skip
    assert all(isinstance(row[SORT_KEYS[c]], (int, float)) for c in SORT_KEYS if c != "run")
