"""The CLI against a real `grposcope serve`: login URL, tokens, import, runs list/show."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx


def cli(*args, env=None, check=True):
    import os

    result = subprocess.run([sys.executable, "-m", "grposcope.cli.main", *args],
                            capture_output=True, text=True, env={**os.environ, **(env or {})},
                            timeout=120)  # fmt: skip
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_serve_prints_a_login_url_with_an_admin_token(live_server):
    assert live_server.admin_token, live_server.log_path.read_text()
    me = httpx.get(f"{live_server.url}/api/v1/me",
                   headers={"Authorization": f"Bearer {live_server.admin_token}"})  # fmt: skip
    assert me.json()["role"] == "admin"


def test_token_create_prints_the_token_alone_on_the_last_line(live_server):
    token = live_server.token("ml-team", "writer")
    assert token.startswith("gs_") and " " not in token
    me = httpx.get(f"{live_server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json() == {"team": "ml-team", "role": "writer", "name": ""}


def test_import_then_runs_list_and_show(live_server, tmp_path):
    state = {
        "log_history": [
            {"step": s, "reward": s / 100, "loss": 0.1, "epoch": 0.01 * s} for s in range(1, 61)
        ]
        + [{"step": 60, "train_runtime": 12.0}]
    }
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state))
    env = {"GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": live_server.token("ml", "writer")}
    out = cli("import", str(path), "--project", "old-runs", "--run", "baseline", "--json", env=env)
    imported = json.loads(out.stdout)
    assert imported["steps"] == 60 and imported["duplicates"] == 0
    again = json.loads(cli("import", str(path), "--project", "old-runs", "--run", "baseline",
                           "--json", env=env).stdout)  # fmt: skip
    assert again["id"] == imported["id"] and again["inserted"] == 0

    (run,) = json.loads(cli("runs", "list", "--json", env=env).stdout)
    design_keys = {"id": imported["id"], "name": "baseline", "project": "old-runs", "team": "ml",
                   "status": "finished", "last_step": 60, "open_alerts": 0}  # fmt: skip
    assert {k: run[k] for k in design_keys} == design_keys
    assert run["reward"] == 0.6  # the latest reward; the fit's keys are tested elsewhere
    assert {"plateau", "regime", "margin_exact"} <= set(run)
    shown = json.loads(cli("runs", "show", "baseline", "--json", env=env).stdout)
    assert set(shown) == {"id", "name", "project", "team", "status", "hyperparameters",
                          "n_steps", "last_step", "fit", "alerts"}  # fmt: skip
    assert shown["n_steps"] == 60 and shown["status"] == "finished"


def test_client_commands_fail_clearly(live_server, tmp_path):
    missing = cli("runs", "list", env={"GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": ""},
                  check=False)  # fmt: skip
    assert missing.returncode == 2 and "GRPOSCOPE_TOKEN" in missing.stderr
    bad = cli("runs", "show", "nope", env={"GRPOSCOPE_URL": live_server.url,
              "GRPOSCOPE_TOKEN": live_server.admin_token}, check=False)  # fmt: skip
    assert bad.returncode == 2 and "no run named 'nope'" in bad.stderr
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\x00world")
    imp = cli("import", str(junk), "--project", "p", env={"GRPOSCOPE_URL": live_server.url,
              "GRPOSCOPE_TOKEN": live_server.admin_token}, check=False)  # fmt: skip
    assert imp.returncode == 2 and "Traceback" not in imp.stderr
    down = cli("runs", "list", env={"GRPOSCOPE_URL": "http://127.0.0.1:9",
               "GRPOSCOPE_TOKEN": "x"}, check=False)  # fmt: skip
    assert down.returncode == 2 and "cannot reach" in down.stderr


def test_runs_show_prints_the_margins_at_a_supplied_curvature(live_server):
    token = live_server.token("lab", "writer")
    hyper = {"learning_rate": 0.2, "optimizer": "sgd", "momentum": 0.9, "k_ref": 18,
             "correction": "none", "curvature": 0.105, "stale_fraction": 1.52}  # fmt: skip
    made = httpx.post(f"{live_server.url}/api/v1/runs",
                      json={"project": "bandit", "name": "past-the-edge", "hyperparameters": hyper},
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert made.status_code == 201, made.text
    env = {"GRPOSCOPE_URL": live_server.url, "GRPOSCOPE_TOKEN": token}
    text = cli("runs", "show", str(made.json()["id"]), env=env).stdout
    assert "fit: none yet" in text
    assert "at the supplied curvature K = 0.105 (stale share 1.52): margin exact -1.150" in text


def test_client_commands_take_the_url_with_or_without_api_v1(live_server):
    """The contract: server URLs may be given with or without a trailing /api/v1."""
    env = {"GRPOSCOPE_TOKEN": live_server.admin_token}
    for url in (live_server.url, live_server.url + "/api/v1", live_server.url + "/api/v1/"):
        out = cli("runs", "list", "--json", env={**env, "GRPOSCOPE_URL": url})
        assert isinstance(json.loads(out.stdout), list), url


def test_db_takes_a_plain_path_as_a_sqlite_file(tmp_path, monkeypatch):
    """`--db /tmp/x.db` (what the help's "./grposcope.db" suggests) is a SQLite file; it was
    an SQLAlchemy ArgumentError traceback. URLs are untouched."""
    from grposcope.cli.main import main
    from grposcope.config import Settings

    monkeypatch.chdir(tmp_path)
    assert main(["migrate", "--db", "runs.db"]) == 0
    assert (tmp_path / "runs.db").stat().st_size > 0
    assert Settings(database_url="runs.db").database_url == f"sqlite:///{tmp_path / 'runs.db'}"
    assert Settings(database_url="sqlite:///a.db").database_url == "sqlite:///a.db"
    pg = Settings(database_url="postgres://u@h/d").database_url
    assert pg == "postgresql+psycopg://u@h/d"
