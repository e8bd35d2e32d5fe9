"""Long commands show a progress bar on a terminal and none when piped: `bandit sweep` run with
its stderr on a pseudo-terminal, then on a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios

import pytest

SWEEP = [sys.executable, "-m", "grposcope.cli.main", "bandit", "sweep", "--max-k-ref", "48",
         "--json"]  # fmt: skip


def _run_on_a_terminal(cmd: list[str]) -> tuple[int, str, str]:
    """Run with stderr on a pty (what a person's shell gives) and stdout on a pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            pytest.fail(f"no output on the terminal for 120 s: {seen!r}")
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(60), out, seen.decode(errors="replace")


def test_bandit_sweep_draws_a_progress_bar_on_a_terminal():
    code, out, terminal = _run_on_a_terminal(SWEEP)
    assert code == 0, terminal
    assert "K_ref sweep" in terminal and "%|" in terminal and "step" in terminal, terminal
    assert '"measured_k_ref_threshold"' in out  # the result itself is untouched on stdout


def test_bandit_sweep_draws_none_when_piped():
    result = subprocess.run(SWEEP, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == ""
    assert '"measured_k_ref_threshold"' in result.stdout
