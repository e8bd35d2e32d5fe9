"""A hand-written loop's printed step lines: `step:12 | loss=0.31 | mean_reward=0.45`.

Loops that print rather than log write one line a step with their numbers as `name=value` or
`name: value` pairs, separated by `|`, `,`, `;` or spaces, often behind a logging prefix
(`2026-04-09 04:12:55 INFO …`). A line is a step line when one of its fields is a step
(`step`, `global_step`, `iteration` or `iter`, any case, followed by `=`, `:` or a space and a
whole number: `step=12`, `Step 12/500`) and at least one other field is a number; every other
line (banners, progress bars, warnings, a sample's text) is skipped. A Monarch GRPO loop's
console (`step:0 | policy_loss=… | mean_reward=…`) could not be read at all before (harvest74,
session 34). A line with no step word may start with a counter instead, `N/M |` (behind
`[tag]`s at most): `[gsm8k] 12/100 | loss=-4.6 | reward=0.625`, a Tinker loop's prints (harvest122,
session 38, refused before). A step's planned total (`Step 2/500`, `12/100 |`), the same on
every line, is the run's `max_steps`: the forecast weighs its curves by the run's progress.
verl's own `step:N - key:value` lines are read by the `verl` reader, which is tried first.
"""

from __future__ import annotations

import re

from grposcope_trainer.logs.data import LogData, LogFormatError
from grposcope_trainer.logs.verl import clean

STEP_NAMES = ("global_step", "iteration", "step", "iter")  # longest first, for the pattern
# the step: `step=12`, `step: 12`, `Step 12`, `[step 12/500]`
_STEP = re.compile(
    rf"(?<![\w./@-])(?:{'|'.join(STEP_NAMES)})\s*[:=#]?\s*(\d+)(?![\w.])(?:\s*/\s*(\d+))?",
    re.IGNORECASE,
)
# a leading counter, `12/100 |`, behind bracketed tags at most: no other field names the step
_COUNTER = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*(\d+)\s*/\s*(\d+)\s*\|")
# name=value or name: value; the name starts with a letter, the value is a plain number (or
# nan / inf) that does not run on into a word or a time of day (`12:30`)
_FIELD = re.compile(
    r"(?<![\w./@-])([A-Za-z_][\w./@-]*)\s*(?:=|:)\s*"
    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))(?![\w.:])",
    re.IGNORECASE,
)


def parse_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, metrics) of a step line, None for any other line."""
    got = parse_step_line(line)
    return None if got is None else got[:2]


def parse_step_line(line: str) -> tuple[int, dict[str, float], int | None] | None:
    """(step, metrics, the step's planned total or None) of a step line."""
    text = clean(line)
    step = _STEP.search(text) or _COUNTER.search(text)
    if step is None:
        return None
    metrics = {k: float(v) for k, v in _FIELD.findall(text) if k.lower() not in STEP_NAMES}
    total = int(step.group(2)) if step.group(2) else None
    return (int(step.group(1)), metrics, total) if metrics else None


def read(text: str, where: str) -> LogData:
    """A whole log of step lines; a LogFormatError when it holds none."""
    out = LogData("kv")
    totals: set[int | None] = set()
    for line in text.splitlines():
        got = parse_step_line(line)
        if got is not None:
            for key, value in got[1].items():
                out.add(got[0], key, value)
            totals.add(got[2])
    if not out.rows:
        raise LogFormatError(
            f"{where} has no step line (`step=N name=value …`, `step:N | name=value | …` or "
            f"`N/M | name=value | …`)"
        )
    if len(totals) == 1 and (total := totals.pop()) and total >= max(s for s, _, _ in out.rows):
        out.config["max_steps"] = total  # one planned total, never passed
    return out
