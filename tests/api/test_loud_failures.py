"""A broken install fails at start-up: a missing router or worker module is an error, never a
server that quietly runs without those endpoints or without its fit worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Each case hides one module (sys.modules[name] = None makes importing it raise ImportError),
# then builds the app and runs its start-up, as `grposcope serve` does.
SCRIPT = """
import sys
sys.modules[{module!r}] = None
from fastapi.testclient import TestClient
from grposcope.app import create_app
from grposcope.config import Settings
app = create_app(Settings(database_url={url!r}, dashboard=False, fit_interval_s=60))
with TestClient(app) as client:
    print("started", client.get("/api/v1/health").status_code)
"""


@pytest.mark.parametrize(
    "module",
    ["grposcope.fits.endpoints", "grposcope.alerts.endpoints", "grposcope.worker.embedded"],
)
def test_a_missing_module_fails_start_up(module: str, tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(module=module, url=url)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode != 0 and "started" not in out.stdout, out.stdout
    assert "ImportError" in out.stderr or "ModuleNotFoundError" in out.stderr, out.stderr[-2000:]
    assert module in out.stderr


def test_with_every_module_present_it_starts(tmp_path) -> None:
    """The control: the same script with an unrelated module hidden starts and answers."""
    url = f"sqlite:///{tmp_path / 'g.db'}"
    script = SCRIPT.format(module="grposcope_not_a_module", url=url)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "started 200"
