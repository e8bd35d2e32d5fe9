"""The CLI's client commands as a new user meets them, against a real `grposcope serve`:
tokens made by the server, URLs as people type them, pipes closed early, an unset
GRPOSCOPE_URL, and the fit's numbers in `runs list --json`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.server import LiveServer


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
        drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run `grposcope ARGS` in a subprocess; `drop` removes variables from the environment."""
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in drop}
    return subprocess.run([sys.executable, "-m", "grposcope.cli.main", *args], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def me(url: str, token: str) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})


def test_token_create_asks_the_server_named_by_grposcope_url(server: LiveServer, tmp_path: Path):
    workdir = tmp_path / "training"  # where a user runs it: it must stay empty
    workdir.mkdir()
    env = {"GRPOSCOPE_URL": server.url, "GRPOSCOPE_TOKEN": server.admin_token or ""}
    made = cli("token", "create", "--team", "ml", "--role", "writer", "--name", "trainer",
               env=env, cwd=workdir, drop=("GRPOSCOPE_DATABASE_URL",))  # fmt: skip
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert me(server.url, token).json() == {"team": "ml", "role": "writer", "name": "trainer"}
    assert list(workdir.iterdir()) == []  # no grposcope.db appeared in the working directory

    # a writer token cannot make tokens: the server says so, and the CLI names the server
    refused = cli("token", "create", "--team", "ml", "--role", "admin",
                  env={**env, "GRPOSCOPE_TOKEN": token}, cwd=workdir)  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "403" in refused.stderr and "admin" in refused.stderr and server.url in refused.stderr


def test_token_create_writes_a_database_only_when_asked(live_server: LiveServer, tmp_path: Path):
    made = cli("token", "create", "--db", live_server.db_url, "--team", "t", "--role", "viewer")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert me(live_server.url, token).json()["role"] == "viewer"  # the server knows it

    workdir = tmp_path / "training"
    workdir.mkdir()
    missing = workdir / "elsewhere" / "grposcope.db"
    for db_args in (["--db", f"sqlite:///{missing}"], ["--db"]):  # --db alone: the env's or default
        refused = cli("token", "create", *db_args, "--team", "t", "--role", "writer",
                      cwd=workdir, drop=("GRPOSCOPE_DATABASE_URL",))  # fmt: skip
        assert refused.returncode == 2, refused.stdout
        assert "no database at" in refused.stderr and "Traceback" not in refused.stderr
    assert list(workdir.iterdir()) == []  # neither file was created


def test_urls_are_taken_as_people_type_them(live_server: LiveServer):
    env = {"GRPOSCOPE_TOKEN": live_server.admin_token or ""}
    bare = live_server.url.removeprefix("http://")
    for url in (bare, bare + "/api/v1/", live_server.url + "/api/v1"):
        out = cli("runs", "list", "--json", env={**env, "GRPOSCOPE_URL": url})
        assert out.returncode == 0 and json.loads(out.stdout) == [], (url, out.stderr)
    for url, says in ((f"ftp://{bare}", "must use http:// or https://"),
                      ("http://127.0.0.1:port", "malformed port")):  # fmt: skip
        bad = cli("runs", "list", env={**env, "GRPOSCOPE_URL": url})
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert "GRPOSCOPE_URL: the server URL" in bad.stderr and says in bad.stderr
    flag = cli("runs", "list", "--url", f"ftp://{bare}", env=env)
    assert flag.returncode == 2 and flag.stderr.startswith("grposcope: error: --url:")


def test_a_url_that_is_not_the_api_is_explained(tmp_path: Path):
    """A path prefix that is not the API's lands on the dashboard, which redirects to its login
    page: the CLI says the URL is wrong instead of failing on the HTML."""
    server = LiveServer(f"sqlite:///{tmp_path / 'd.db'}", tmp_path / "s.log", dashboard=True)
    server.start()
    try:
        env = {"GRPOSCOPE_URL": server.url + "/grposcope", "GRPOSCOPE_TOKEN": "gs_x"}
        out = cli("runs", "list", env=env)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert "redirect" in out.stderr and "not the grposcope API" in out.stderr
        # and the API itself never redirects, even for an API version it does not have
        answer = httpx.post(server.url + "/api/v2/runs", json={})
        assert answer.status_code == 404 and answer.json()["error"] == "RouteNotFound"
    finally:
        server.stop()


def test_a_closed_pipe_ends_the_command_quietly(live_server: LiveServer):
    """`grposcope runs list | head -1`: the reader leaves early. Its end of the pipe is closed
    before the command writes, so the write fails every time (no race with `head`)."""
    token = live_server.token("pipes", "writer")
    for i in range(3):
        httpx.post(f"{live_server.url}/api/v1/runs", json={"project": "p", "name": f"r{i}"},
                   headers={"Authorization": f"Bearer {token}"}).raise_for_status()  # fmt: skip
    env = {**os.environ, "GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": token}
    for args in (["runs", "list"], ["runs", "list", "--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "grposcope.cli.main", *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(60) == 0, stderr
        assert stderr == "", stderr
    # and through a shell pipe, as people type it
    shell = subprocess.run(
        f"{sys.executable} -m grposcope.cli.main runs list | head -1", shell=True, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shell.stdout.split() == ["id", "team", "project", "name", "status", "step", "reward",
                                    "alerts"] and shell.stderr == ""  # fmt: skip


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_an_unset_grposcope_url_is_named():
    if _port_open(8000):
        pytest.skip("something listens on 127.0.0.1:8000, the default URL")
    out = cli("runs", "list", env={"GRPOSCOPE_TOKEN": "gs_x"}, drop=("GRPOSCOPE_URL",))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "GRPOSCOPE_URL is not set" in out.stderr and "http://127.0.0.1:8000" in out.stderr
    # neither set: the token is asked for first, and the URL named too
    out = cli("runs", "list", drop=("GRPOSCOPE_URL", "GRPOSCOPE_TOKEN"))
    assert out.returncode == 2 and "GRPOSCOPE_TOKEN" in out.stderr
    assert "GRPOSCOPE_URL is not set either" in out.stderr
    # set, the message names where the URL came from instead
    out = cli("runs", "list", env={"GRPOSCOPE_TOKEN": "gs_x", "GRPOSCOPE_URL": "127.0.0.1:9"})
    assert "(GRPOSCOPE_URL)" in out.stderr and "not set" not in out.stderr


def test_runs_list_json_carries_the_fit(server: LiveServer):
    """`runs list --json` adds the latest reward and the latest fit's plateau, regime and exact
    margin, exactly as the API's run list has them; the DESIGN keys stay."""
    from grposcope.demo.bandits import SCENARIOS, bandit_trajectory

    token = server.token("lab", "writer")
    headers = {"Authorization": f"Bearer {token}"}
    cfg, _, traj = bandit_trajectory(SCENARIOS[1], seed=0, steps=300)
    hyper = {"learning_rate": cfg.lr, "optimizer": "sgd", "momentum": cfg.momentum,
             "k_ref": cfg.k_ref, "num_generations": cfg.G, "correction": "none"}  # fmt: skip
    run = httpx.post(
        f"{server.url}/api/v1/runs",
        headers=headers,
        json={"project": "bandit", "name": "osc", "hyperparameters": hyper},
    ).json()
    steps = [{"step": int(s), "metrics": {"reward": float(r)}}
             for s, r in zip(traj.steps, traj.reward, strict=True)]  # fmt: skip
    httpx.post(f"{server.url}/api/v1/runs/{run['id']}/ingest", headers=headers,
               json={"steps": steps}, timeout=60).raise_for_status()  # fmt: skip
    last = int(traj.steps[-1])
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        (item,) = httpx.get(f"{server.url}/api/v1/runs", headers=headers).json()["items"]
        if (
            item["fit"]
            and item["fit"].get("step") == last
            and item["fit"]["margin_exact"] is not None
        ):
            break
        time.sleep(0.5)
    assert item["fit"] and item["fit"]["margin_exact"] is not None, item
    out = cli("runs", "list", "--json", env={"GRPOSCOPE_URL": server.url, "GRPOSCOPE_TOKEN": token})
    (listed,) = json.loads(out.stdout)
    (api,) = httpx.get(f"{server.url}/api/v1/runs", headers=headers).json()["items"]
    fit = api["fit"]  # read again: the worker may have refitted in between
    assert listed == {
        "id": run["id"], "name": "osc", "project": "bandit", "team": "lab",
        "status": api["status"], "last_step": last, "open_alerts": api["open_alerts"],
        "reward": float(traj.reward[-1]),
        "plateau": {"value": fit["plateau"], "lo": fit["plateau_lo"], "hi": fit["plateau_hi"]},
        "regime": fit["regime"], "margin_exact": fit["margin_exact"],
    }  # fmt: skip
    assert listed["regime"] in ("overdamped", "critically_damped", "oscillatory", "unstable")
    assert listed["plateau"]["lo"] <= listed["plateau"]["value"] <= listed["plateau"]["hi"]


def test_a_server_that_is_not_grposcope_is_explained(tmp_path: Path):
    """A URL that leads to some other web server answering HTML with 200: one line naming the
    URL, no JSONDecodeError traceback."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Html(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            body = b"<html><body>hello</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        out = cli("runs", "list", env={"GRPOSCOPE_URL": url, "GRPOSCOPE_TOKEN": "gs_x"})
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert f"{url} (GRPOSCOPE_URL) answered 200 with 'text/html'" in out.stderr
        assert "not the JSON of the grposcope API" in out.stderr
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_runs_list_shows_whole_names(live_server: LiveServer):
    """Names cut at 32 characters made a sweep's runs read as one in the table."""
    token = live_server.token("sweep", "writer")
    names = [f"shibukizero_qwen2.5-math-1.5b_math_cs336grpo_offpolicy-e{e}-tb256" for e in (2, 16)]
    for name in names:
        httpx.post(f"{live_server.url}/api/v1/runs", headers={"Authorization": f"Bearer {token}"},
                   json={"project": "offpolicy", "name": name}).raise_for_status()  # fmt: skip
    out = cli("runs", "list", env={"GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": token})
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0].split()[:4] == ["id", "team", "project", "name"]
    assert sorted(row.split()[3] for row in rows[1:]) == sorted(names)
    empty = cli("runs", "list", "--project", "nope",
                env={"GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": token})  # fmt: skip
    assert empty.returncode == 0 and empty.stdout == ""  # not a lone header line
    assert "no runs with project 'nope'" in empty.stderr
    bad = cli("runs", "list", "--limit", "0",
              env={"GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": token})  # fmt: skip
    assert bad.returncode == 2 and "argument --limit: must be between 1 and 1000" in bad.stderr
