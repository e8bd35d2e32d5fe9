"""`pip install` of the built wheels (not an editable install) into a fresh venv gives a working
`grposcope serve` and `grposcope demo`, without torch, transformers or trl.

This is the CI check that the migrations travel as package data, that `grposcope_trainer`
comes from its own distribution (trainer_plugin/), and that nothing on the server's start-up
path imports the demo extra. The venv has no system site-packages; pip resolves the
dependencies from the indexes configured on the machine (pip.conf), as a user's pip would.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.server import free_port

REPO = Path(__file__).resolve().parents[2]
# What a clean checkout has: build leftovers (build/, *.egg-info) could hide a missing file.
IGNORE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", "*.db*", ".ruff_cache", ".venv",
    ".hypothesis", ".pytest_cache", ".mypy_cache", ".import_linter_cache", "test-artifacts",
    "docs", "bench", "tests",
)  # fmt: skip
DEMO_EXTRA = ("torch", "transformers", "trl")
# The venv's processes must see only the venv: a PYTHONPATH (a developer's checkout) would
# let the sources stand in for the installed wheel.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

pytestmark = pytest.mark.slow


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=CLEAN_ENV,
                         **kwargs)  # fmt: skip
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the two wheels built from a copy of the sources installed in it."""
    root = tmp_path_factory.mktemp("wheel")
    src, wheels, env = root / "src", root / "wheels", root / "venv"
    shutil.copytree(REPO, src, ignore=IGNORE)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
          str(src / "trainer_plugin"), str(src)])  # fmt: skip
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert [name.split("-")[0] for name in built] == ["grposcope", "grposcope_trainer"], built
    _run([sys.executable, "-m", "venv", "--without-pip", str(env)])
    # The venv borrows this interpreter's pip to install into itself (no ensurepip download).
    _run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install",
          "-q", *map(str, wheels.glob("*.whl"))])  # fmt: skip
    yield env


def test_the_wheel_has_the_migrations_and_not_the_plugin(venv: Path) -> None:
    code = (
        "import grposcope.db as d, grposcope_trainer, importlib.util as u;"
        "print(d.MIGRATIONS_DIR);"
        "print(sorted(p.name for p in (d.MIGRATIONS_DIR / 'versions').glob('0*.py'))[0]);"
        f"print([m for m in {DEMO_EXTRA!r} if u.find_spec(m)])"
    )
    out = _run([str(venv / "bin" / "python"), "-c", code], cwd=venv).stdout.split("\n")
    assert out[0].startswith(str(venv)) and "site-packages" in out[0], out  # not the checkout
    assert out[1:3] == ["0001_initial_schema.py", "[]"], out
    files = "import importlib.metadata as m; print(sorted({f.parts[0] for f in m.files(%r)}))"
    tops = [_run([str(venv / "bin" / "python"), "-c", files % name]).stdout.strip()
            for name in ("grposcope", "grposcope-trainer")]  # fmt: skip
    # One distribution owns the plugin's module: the root wheel no longer bundles it.
    assert "grposcope_trainer'" not in tops[0] and "'grposcope_trainer'" in tops[1], tops


def test_serve_from_the_wheel_migrates_and_answers_health(venv: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    cmd = [str(venv / "bin" / "grposcope"), "serve", "--db", f"sqlite:///{tmp_path / 'w.db'}",
           "--port", str(port), "--no-worker"]  # fmt: skip
    with _process(cmd, log, tmp_path) as proc:
        health = _wait(lambda: _get(f"http://127.0.0.1:{port}/api/v1/health"), proc, log)
        assert isinstance(health, dict) and health["status"] == "ok", health
        assert "?token=" in log.read_text()  # migrated, so the first admin could be stored


def test_demo_without_the_extra_streams_the_bandits_and_says_how_to_add_trl(
    venv: Path, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "demo.log"
    cmd = [str(venv / "bin" / "grposcope"), "demo", "--port", str(port)]
    with _process(cmd, log, tmp_path) as proc:
        token = _wait(lambda: _token(log), proc, log)
        headers = {"Authorization": f"Bearer {token}"}
        url = f"http://127.0.0.1:{port}/api/v1/runs"
        names = _wait(lambda: _bandit_names(url, headers), proc, log)
        assert len(names) == 3, names
        text = log.read_text()
        hints = [line for line in text.splitlines() if "tiny GRPOTrainer run is skipped" in line]
        assert len(hints) == 1, text
        assert ".[demo]" in hints[0] and "download.pytorch.org/whl/cpu" in hints[0]


class _process:
    """A server process whose output goes to ``log``, interrupted (Ctrl-C) on exit."""

    def __init__(self, cmd: list[str], log: Path, cwd: Path) -> None:
        self.cmd, self.log, self.cwd = cmd, log, cwd

    def __enter__(self) -> subprocess.Popen:
        self.out = open(self.log, "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(self.cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     cwd=self.cwd, env=CLEAN_ENV)  # fmt: skip
        return self.proc

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.out.close()


def _get(url: str, headers: dict[str, str] | None = None) -> object | None:
    try:
        reply = httpx.get(url, headers=headers, timeout=2)
    except httpx.HTTPError:
        return None
    return reply.json() if reply.status_code == 200 else None


def _token(log: Path) -> str | None:
    text = log.read_text()
    return text.split("?token=", 1)[1].split()[0] if "?token=" in text else None


def _bandit_names(url: str, headers: dict[str, str]) -> list[str] | None:
    body = _get(url, headers)
    if not isinstance(body, dict):
        return None
    names = sorted(r["name"] for r in body["items"] if r["name"].startswith("bandit-"))
    return names if len(names) == 3 else None


def _wait(probe, proc: subprocess.Popen, log: Path, timeout: float = 120):  # type: ignore[no-untyped-def]
    """Poll ``probe`` until it returns something; fail with the log if the process dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (got := probe()) is not None:
            return got
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.3)
    raise AssertionError(f"timed out; log:\n{log.read_text()[-3000:]}")
