"""`follow` on logs being written, against a real server: every step arrives exactly once
across a server restart, the run ends with the writer, and following again resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.plugin.helpers import Reader, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
N_STEPS = 40

# A verl-like job: its config and a banner, then one step line every 0.1 s.
WRITER = textwrap.dedent(
    """
    import sys, time
    head = open(sys.argv[2]).read().split("(TaskRunner pid=40871) step:0")[0]
    with open(sys.argv[1], "a", buffering=1) as log:
        log.write(head)
        for s in range(1, int(sys.argv[3]) + 1):
            log.write(f"(TaskRunner pid=1) step:{s} - critic/score/mean:{s / 100} - "
                      f"actor/entropy:{1 - s / 100} - timing_s/step:0.1\\n")
            if s % 7 == 0:
                log.write("(WorkerDict pid=2) WARNING: something between steps\\n")
            time.sleep(0.1)
    """
)


def _follow(server, tmp_path: Path, path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "GRPOSCOPE_URL": server.url, "GRPOSCOPE_TOKEN": server.token("alpha")}
    cmd = [sys.executable, "-m", "grposcope_trainer", "follow", str(path), "--project", "follow",
           "--spool-dir", str(tmp_path / "spool"), "--interval", "0.05", *extra]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip


def test_every_step_arrives_across_a_server_restart_and_the_run_ends_with_its_writer(
    live_server, tmp_path: Path
) -> None:
    log = tmp_path / "verl_job.log"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log),
                               str(FIXTURES / "verl_console.log"), str(N_STEPS)])  # fmt: skip
    follower = _follow(live_server, tmp_path, log, "--format", "verl", "--pid", str(writer.pid))
    reader = Reader(live_server.url, live_server.admin_token)

    def stored() -> int:
        runs = reader.runs("follow")
        return runs[0]["last_step"] or 0 if runs else 0

    wait_for(lambda: stored() >= 5, timeout=60, interval=0.05)
    live_server.stop(kill=True)  # the server dies mid-run...
    time.sleep(1.5)
    live_server.start()  # ...and comes back; the spool holds what was written meanwhile
    assert writer.wait(60) == 0
    output, _ = follower.communicate(timeout=90)
    assert follower.returncode == 0, output
    assert "all data delivered" in output

    (run,) = reader.runs("follow")
    detail = reader.run(run["id"])
    assert (detail["name"], detail["status"], detail["last_step"]) == ("verl_job", "finished", 40)
    assert detail["hyperparameters"]["k_ref"] == 4  # from the config verl printed
    got = reader.series(run["id"], ["critic/score/mean", "actor/entropy"])
    assert got["critic/score/mean"] == {s: s / 100 for s in range(1, N_STEPS + 1)}
    assert got["actor/entropy"] == {s: 1 - s / 100 for s in range(1, N_STEPS + 1)}


def test_following_again_resumes_the_same_run_and_ctrl_c_marks_it_failed(
    live_server, tmp_path: Path
) -> None:
    log = tmp_path / "loop.jsonl"
    log.write_text((FIXTURES / "loop.jsonl").read_text())
    reader = Reader(live_server.url, live_server.admin_token)
    first = _follow(live_server, tmp_path, log, "--silence", "60")
    wait_for(lambda: reader.runs("follow") and reader.runs("follow")[0]["last_step"] == 3)
    first.send_signal(signal.SIGINT)
    output, _ = first.communicate(timeout=60)
    assert first.returncode == 0, output
    (run,) = reader.runs("follow")
    assert run["status"] == "failed"  # interrupted: the job may not be over

    with log.open("a") as fh:
        fh.write('{"step": 4, "train": {"answer_reward": 0.75}}\n')
    second = _follow(live_server, tmp_path, log, "--silence", "1")
    output, _ = second.communicate(timeout=60)
    assert second.returncode == 0, output
    (again,) = reader.runs("follow")  # the same run, resumed, then finished after the silence
    assert (again["id"], again["status"], again["last_step"]) == (run["id"], "finished", 4)
    got = reader.series(run["id"], ["train/answer_reward"])["train/answer_reward"]
    assert got == {1: 0.125, 2: 0.25, 3: 0.5, 4: 0.75}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_run_appended_to_the_followed_file_is_a_run_of_its_own(
    live_server, tmp_path: Path, fmt: str
) -> None:
    """Tinker appends a second run to `metrics.jsonl` when a log directory is reused (and a
    loop may write on a CSV): its steps start again. Followed as one run, the second run's
    steps went into the first, whose values the server kept. Now the first run ends where the
    steps start again and the rest is "NAME (2)"; following the file again resumes both and
    adds no third. Appended while followed (the poll starts at the second run) and present
    from the start (one poll holds both) alike."""
    log = tmp_path / f"metrics.{fmt}"

    def rows(values: list[float]) -> str:
        if fmt == "csv":
            return "".join(f"{s},{v}\n" for s, v in enumerate(values))
        return "".join(f'{{"step": {s}, "reward": {v}}}\n' for s, v in enumerate(values))

    first, second, third = [0.5, 0.6, 0.7, 0.8, 0.9], [0.1, 0.2, 0.3, 0.4], [0.05] * 5
    log.write_text(("step,reward\n" if fmt == "csv" else "") + rows(first))
    reader = Reader(live_server.url, live_server.admin_token)
    follower = _follow(live_server, tmp_path, log, "--silence", "3")
    wait_for(lambda: reader.runs("follow") and reader.runs("follow")[0]["last_step"] == 4)
    with log.open("a") as fh:
        fh.write(rows(second))
    output, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0, output
    with log.open("a") as fh:
        fh.write(rows(third))
    again = _follow(live_server, tmp_path, log, "--silence", "1")
    output, _ = again.communicate(timeout=60)
    assert again.returncode == 0, output

    by_name = {r["name"]: r for r in reader.runs("follow")}
    assert sorted(by_name) == ["metrics", "metrics (2)", "metrics (3)"]
    for name, values in (("metrics", first), ("metrics (2)", second), ("metrics (3)", third)):
        got = reader.series(by_name[name]["id"], ["reward"])["reward"]
        assert got == dict(enumerate(values)), name
        assert by_name[name]["status"] == "finished"


def test_a_missing_log_without_format_is_a_usage_error(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "grposcope_trainer", "follow",
                          str(tmp_path / "nope.log"), "--project", "p"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "give --format" in out.stderr
    log = tmp_path / "job.log"
    log.write_text('{"step": 1, "reward": 0.5}\n')
    cmd = [sys.executable, "-m", "grposcope_trainer", "follow", str(log), "--max-steps", "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--max-steps must be >= 1" in out.stderr


# A real tiny GRPOTrainer reporting to TensorBoard only (no grposcope code in the job), slowed
# to ~0.15 s a step so the server can be restarted mid-run; it also records what TRL logged.
TRL_JOB = textwrap.dedent(
    """
    import json, sys, time
    from transformers import TrainerCallback
    from grposcope.demo.tiny_grpo import build_tiny_trainer

    logged = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            logged.append([state.global_step, dict(logs or {})])

        def on_step_end(self, args, state, control, **kwargs):
            time.sleep(0.15)

    trainer = build_tiny_trainer(sys.argv[1], [Record()], max_steps=int(sys.argv[2]),
                                 logging_steps=1, report_to=["tensorboard"])
    trainer.train()
    json.dump(logged, open(sys.argv[3], "w"))
    """
)


def _float32(value: float) -> float:
    import struct

    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.mark.slow
def test_follow_a_real_trl_run_writing_tensorboard(live_server, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    pytest.importorskip("tensorboard")
    out, record, n = tmp_path / "out", tmp_path / "logged.json", 40
    job = subprocess.Popen([sys.executable, "-c", TRL_JOB, str(out), str(n), str(record)])
    follower = _follow(live_server, tmp_path, out / "runs", "--format", "tensorboard",
                       "--pid", str(job.pid), "--run", "tiny-tb")  # fmt: skip
    reader = Reader(live_server.url, live_server.admin_token)

    def stored() -> int:
        runs = reader.runs("follow")
        return (runs[0]["last_step"] or 0) if runs else 0

    wait_for(lambda: stored() >= 5, timeout=240, interval=0.05)
    assert stored() < n - 5, "the run ended before the restart: slow it down"
    live_server.stop(kill=True)
    time.sleep(2)
    live_server.start()
    assert job.wait(300) == 0
    output, _ = follower.communicate(timeout=120)
    assert follower.returncode == 0, output

    expected: dict[int, dict[str, float]] = {}
    for step, logs in json.loads(record.read_text()):
        for key, value in logs.items():
            if isinstance(value, (int, float)):  # what transformers writes as a scalar
                expected.setdefault(step, {}).setdefault(f"train/{key}", _float32(value))
    assert sorted(expected) == list(range(1, n + 1))  # logging_steps=1: every step
    (run,) = reader.runs("follow")
    detail = reader.run(run["id"])
    assert (detail["status"], detail["last_step"]) == ("finished", n)
    hp = detail["hyperparameters"]  # from the `args` text the TensorBoard callback wrote
    assert hp["num_generations"] == 4 and hp["k_ref"] == 1 and hp["learning_rate"] == 5e-3
    keys = sorted({k for m in expected.values() for k in m})
    got = reader.series(run["id"], keys)
    for key in keys:
        want = {s: m[key] for s, m in expected.items() if key in m}
        assert got[key] == pytest.approx(want, rel=1e-6), key
    assert "train/reward" in keys and "train/entropy" in keys


def test_detection_waits_for_a_first_step_line(live_server, tmp_path: Path) -> None:
    from grposcope_trainer.follow import Follower

    log = tmp_path / "job.log"
    log.write_text("2026-11-30 10:02:11 INFO -- Started a local Ray instance.\n")
    follower = Follower(log, project="follow", url=live_server.url, token=live_server.token("a"),
                        spool_dir=str(tmp_path / "spool"), planned=500)  # fmt: skip
    assert follower.poll_once() == 0 and follower.run is None  # no step line: format unknown
    with log.open("a") as fh:
        fh.write("(TaskRunner pid=1) step:1 - critic/score/mean:0.5\n")
    assert follower.poll_once() == 1
    assert follower.finish("finished") == 0
    reader = Reader(live_server.url, live_server.admin_token)
    (run,) = reader.runs("follow")
    assert run["name"] == "job" and run["status"] == "finished"
    assert reader.series(run["id"], ["critic/score/mean"]) == {"critic/score/mean": {1: 0.5}}
    # --max-steps: the planned total a verl log does not say, for the worker's forecast
    assert reader.run(run["id"])["config"]["planned_steps"] == 500
    # a TensorBoard directory named like transformers' runs/ is named after its output dir
    assert Follower(tmp_path / "out" / "runs", fmt="tensorboard").name == "out"


def test_a_trainer_state_rewritten_by_a_fresh_run_is_a_run_of_its_own(
    live_server, tmp_path: Path
) -> None:
    """Training again in the same output directory rewrites trainer_state.json from step 1.
    Keyed by (step, key) alone, the fresh run's steps up to the last one read were dropped as
    seen and its later ones went into the earlier run. Now it is "NAME (2)", whole; a resumed
    run, which rewrites the history it resumed from as it was, goes on as the same run."""
    log = tmp_path / "out" / "trainer_state.json"
    log.parent.mkdir()

    def save(values: dict[int, float]) -> None:
        history = [{"step": s, "reward": v, "epoch": s / 100} for s, v in values.items()]
        log.write_text(json.dumps({"global_step": max(values), "log_history": history}))

    first = {s: 0.1 * s for s in range(1, 7)}
    resumed = {**{s: first[s] for s in range(1, 5)}, 5: 0.05, 6: 0.06, 7: 0.07, 8: 0.08}
    fresh = {s: 0.5 + 0.01 * s for s in range(1, 4)}
    reader = Reader(live_server.url, live_server.admin_token)
    save(first)
    follower = _follow(live_server, tmp_path, log, "--silence", "4")

    def last_steps() -> list[int | None]:
        return sorted(r["last_step"] or 0 for r in reader.runs("follow"))

    wait_for(lambda: last_steps() == [6])
    save(resumed)  # resumed from its checkpoint at step 4: 5 and 6 logged again, then 7, 8
    wait_for(lambda: last_steps() == [8])
    save(fresh)
    wait_for(lambda: last_steps() == [3, 8])
    save({**fresh, 4: 0.54, 5: 0.55})
    output, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0, output

    by_name = {r["name"]: r for r in reader.runs("follow")}
    assert sorted(by_name) == ["out", "out (2)"]
    got = reader.series(by_name["out"]["id"], ["reward"])["reward"]
    assert got == {**first, 7: 0.07, 8: 0.08}  # the server keeps the first value of a step
    got = reader.series(by_name["out (2)"]["id"], ["reward"])["reward"]
    assert got == {**fresh, 4: 0.54, 5: 0.55}

    # Trained again into the same place while nobody followed, then followed: a run of its
    # own (keyed by its first value), not the old run resumed (until session 38 the server
    # kept the old run's values for the new job's first steps).
    save({s: 0.9 - 0.01 * s for s in range(1, 6)})
    again = _follow(live_server, tmp_path, log, "--silence", "2")
    output, _ = again.communicate(timeout=60)
    assert again.returncode == 0, output
    runs = reader.runs("follow")
    assert len(runs) == 3 and sorted(r["name"] for r in runs) == ["out", "out", "out (2)"]
    newest = max(runs, key=lambda r: r["id"])
    got = reader.series(newest["id"], ["reward"])["reward"]
    assert got == {s: pytest.approx(0.9 - 0.01 * s) for s in range(1, 6)}
    # ...and following it once more resumes that run, adding none
    once_more = _follow(live_server, tmp_path, log, "--silence", "1")
    output, _ = once_more.communicate(timeout=60)
    assert once_more.returncode == 0, output
    assert len(reader.runs("follow")) == 3
