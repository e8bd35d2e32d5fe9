"""The server's start-up path never imports the demo package or the demo extra (torch,
transformers, trl): a server install without them must build and start the app."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
from fastapi.testclient import TestClient
from grposcope.app import create_app
from grposcope.cli.main import build_parser
from grposcope.config import Settings
build_parser()
app = create_app(Settings(database_url={url!r}, fit_interval_s=60))
with TestClient(app) as client:
    assert client.get("/api/v1/health").status_code == 200
extra = ("torch", "transformers", "trl", "datasets")
print(json.dumps(sorted(m for m in sys.modules
                        if m.split(".")[0] in extra or m.startswith("grposcope.demo"))))
"""


def test_starting_the_server_imports_no_demo_code(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(url=url)], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
