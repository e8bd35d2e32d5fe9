"""A Jupyter or Colab notebook (`.ipynb`) saved with its outputs: the Trainer's progress table.

In a notebook, transformers' `NotebookProgressCallback` logs as an HTML table it redraws in
place (`Step | Training Loss | reward | … | rewards / correctness_reward_func / mean`), and
prints no log dicts: for a run trained in Colab with `report_to="none"` (the Unsloth
notebooks' default) that table, saved in the notebook, is the whole log. Before session 38
a user had to copy it to a CSV by hand; a helper's five hackathon notebooks were read as
"none of its printed dicts is a training log dict", or as the wrong lines of text.

- Every output's `text/html` is searched for tables whose first header cell names a step
  (`Step`, as the CSV reader takes it); each is read as that CSV would be (`csvlog`): "No
  Log" cells empty, `rewards / fn` under its logged name `rewards/fn`. The progress bar
  drawn above the last run's table (`<progress value='45' max='500'>`) gives `max_steps`.
- A table the notebook saved more than once as it was redrawn (an earlier display kept
  beside the final one) is the same run: a table whose rows begin another's is left out.
- Tables of different runs (a cell training two agents one after the other) follow one
  another in the file's order: `import` sends each as a run, `fit` reads the last
  (`LogData.keep_last_run`).
- A notebook with no such table (a script cell whose Trainer printed its dicts) is read by
  the console reader from the cells' printed text.

Only the standard library (`json`, `html.parser`).
"""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from typing import Any

from grposcope_trainer.logs import console, csvlog
from grposcope_trainer.logs.data import LogData, LogFormatError

Table = list[list[str]]  # rows of cell texts, the header first


class _Tables(HTMLParser):
    """The tables of an HTML fragment, each a list of rows of cell texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.planned: int | None = None  # the progress bar's total: `<progress max='500'>`
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "progress":
            total = dict(attrs).get("max")
            self.planned = int(total) if total and total.isdigit() else self.planned
        elif tag == "table":
            self._depth += 1
            if self._depth == 1:
                self.tables.append([])
        elif self._depth == 1 and tag == "tr":
            self._row = []
        elif self._depth == 1 and tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._depth = max(0, self._depth - 1)
        elif self._depth == 1 and tag in ("td", "th") and self._cell is not None:
            assert self._row is not None
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif self._depth == 1 and tag == "tr" and self._row is not None:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def looks_like(head: str) -> bool:
    """Whether a file's first bytes are a notebook's JSON (its `cells` list opens it)."""
    return head.lstrip().startswith("{") and '"cells"' in head[:4096]


def read(text: str, where: str) -> LogData:
    """The notebook's progress tables (or, with none, its printed log dicts)."""
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"{where}: not a notebook's JSON ({exc})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise LogFormatError(f"{where}: not a notebook (no 'cells' list)")
    found, printed = _outputs(notebook["cells"])
    runs = _distinct([(t, total) for t, total in found
                      if len(t) > 1 and csvlog.step_column(t[0]) == 0])  # fmt: skip
    if not runs:
        if printed.strip():
            return console.read(printed, where)
        raise LogFormatError(
            f"{where}: no Trainer progress table (a first column 'Step') in its saved outputs, "
            f"and no printed text: save the notebook with its outputs"
        )
    out = LogData("notebook")
    for table, _ in runs:
        part = csvlog.read_csv(_as_csv(table), where)
        out.rows.extend(part.rows)
        out.skipped += part.skipped
        out.first_skipped = out.first_skipped or part.first_skipped
    total = runs[-1][1]  # the last run's bar, drawn beside its table
    if total and total >= max(step for step, _, _ in part.rows):
        out.config["max_steps"] = total
    return out


def _outputs(cells: list[Any]) -> tuple[list[tuple[Table, int | None]], str]:
    """Every HTML table of the cells' outputs, in order, each with the total of the progress
    bar drawn in the same output (the Trainer's planned last step), and their printed text."""
    tables: list[tuple[Table, int | None]] = []
    printed: list[str] = []
    for cell in cells:
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else ():
            if not isinstance(output, dict):
                continue
            data = output.get("data")
            html = data.get("text/html") if isinstance(data, dict) else None
            if html:
                parser = _Tables()
                parser.feed(_joined(html))
                tables += [(t, parser.planned) for t in parser.tables]
            if output.get("output_type") == "stream":
                printed.append(_joined(output.get("text", "")))
    return tables, "".join(printed)


def _joined(value: Any) -> str:
    """A notebook's text field: a string, or a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def _distinct(found: list[tuple[Table, int | None]]) -> list[tuple[Table, int | None]]:
    """The tables (each with its bar's total) less those whose rows begin a later or longer
    one: the same run's table saved at an earlier redraw."""
    return [
        (table, total) for i, (table, total) in enumerate(found)
        if not any(j != i and other[: len(table)] == table and (len(other) > len(table) or j > i)
                   for j, (other, _) in enumerate(found))
    ]  # fmt: skip


def _as_csv(table: Table) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(table)
    return buffer.getvalue()
