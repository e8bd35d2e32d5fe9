"""docs/alerts.md lists every rule parameter with its default and range: the table a project
admin reads before overriding one must be the one the server enforces."""

from __future__ import annotations

import re
from pathlib import Path

from grposcope.diagnostics.params import RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "alerts.md"


def _fmt(x: float) -> str:
    """As the table writes numbers: whole floats as integers, everything else in %g."""
    return str(int(x)) if isinstance(x, float) and x.is_integer() else f"{x:g}"


def test_every_parameter_is_documented_with_its_default_and_range() -> None:
    text = DOC.read_text()
    section = text[text.index("## Defaults and ranges") :]
    for kind, spec in RULES.items():
        block = section[section.index(f"**{kind}**") :]
        block = block[: block.index("\n\n", block.index("|"))]
        rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", block, flags=re.M))
        assert set(rows) == set(spec), kind
        for name, p in spec.items():
            assert rows[name].strip() == _fmt(p.default), f"{kind}.{name}"
            assert f"[{_fmt(p.lo)}, {_fmt(p.hi)}]" in block, f"{kind}.{name} range"
