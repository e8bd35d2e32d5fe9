"""The on-disk spool contract (grposcope_trainer.spool docstring)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grposcope_trainer.spool import (
    SPOOL_VERSION,
    RunSpool,
    SpoolFormatError,
    orphan_runs,
    read_fragment,
)


def _steps(first: int, n: int) -> list[dict]:
    return [
        {"step": s, "wall_time": 1.0, "metrics": {"reward": s / 10}}
        for s in range(first, first + n)
    ]


def test_fragments_replay_in_write_order_and_go_away_on_ack(tmp_path: Path) -> None:
    spool = RunSpool(tmp_path, "key1")
    names = [spool.append(_steps(10 * i, 3)) for i in range(5)]
    assert spool.fragments() == names == sorted(names)
    assert [spool.read(n)[0]["step"] for n in names] == [0, 10, 20, 30, 40]
    assert spool.pending_steps() == 15
    spool.ack(names[0])
    assert spool.fragments() == names[1:]
    assert not (spool.path / names[0]).exists()


def test_fragment_is_versioned_jsonl(tmp_path: Path) -> None:
    spool = RunSpool(tmp_path, "key1")
    name = spool.append(_steps(1, 2))
    lines = (spool.path / name).read_text().splitlines()
    assert json.loads(lines[0]) == {
        "grposcope_spool": SPOOL_VERSION,
        "run_key": "key1",
        "n_steps": 2,
    }
    assert [json.loads(line)["step"] for line in lines[1:]] == [1, 2]


def test_half_written_temp_files_are_invisible_and_cleaned_by_the_next_owner(
    tmp_path: Path,
) -> None:
    spool = RunSpool(tmp_path, "key1")
    spool.append(_steps(1, 1))
    stray = spool.path / ".00000000000000000001-999-000000.jsonl.999.tmp"
    stray.write_text('{"grposcope_spool": 1')  # a crash mid-write
    assert len(spool.fragments()) == 1
    owner = RunSpool(tmp_path, "key1")
    assert owner.try_lock()
    assert not stray.exists()
    owner.unlock()


def test_unknown_version_and_corrupt_fragments_are_reported(tmp_path: Path) -> None:
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"grposcope_spool": 2}\n{"step": 1}\n')
    with pytest.raises(SpoolFormatError) as info:
        read_fragment(newer)
    assert info.value.newer
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"grposcope_spool": 1}\n{"step": 1, "met')
    with pytest.raises(SpoolFormatError) as info:
        read_fragment(corrupt)
    assert not info.value.newer


def test_reject_moves_the_fragment_aside(tmp_path: Path) -> None:
    spool = RunSpool(tmp_path, "key1")
    name = spool.append(_steps(1, 1))
    where = spool.reject(name)
    assert where.parent.name == "rejected" and where.exists()
    assert spool.fragments() == []


def test_run_metadata_and_removal(tmp_path: Path) -> None:
    spool = RunSpool(tmp_path, "key1")
    assert spool.try_lock()
    spool.write_run({"project": "p", "name": "n", "run_key": "key1"})
    spool.mark_finished("finished")
    assert spool.read_run()["name"] == "n" and spool.finish_status() == "finished"
    name = spool.append(_steps(1, 1))
    spool.remove()  # refuses while a fragment is pending
    assert spool.path.exists()
    spool.ack(name)
    spool.remove()
    assert not spool.path.exists()


@pytest.mark.skipif(os.name != "posix", reason="orphan detection needs flock")
def test_orphans_are_runs_nobody_holds(tmp_path: Path) -> None:
    live, dead, mine = (RunSpool(tmp_path, k) for k in ("live", "dead", "mine"))
    for spool in (live, dead, mine):
        spool.write_run({"run_key": spool.run_key})
    assert live.try_lock() and mine.try_lock()
    found = orphan_runs(tmp_path, exclude="mine")
    assert [s.run_key for s in found] == ["dead"]
    found[0].unlock()
    live.unlock()
    assert sorted(s.run_key for s in orphan_runs(tmp_path, exclude="mine")) == ["dead", "live"]


def test_unwritable_spool_keeps_fragments_in_memory(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    spool = RunSpool(blocker, "key1")  # mkdir under a regular file fails
    first = spool.append(_steps(1, 2))
    spool.append(_steps(3, 2))
    assert spool.pending_steps() == 4
    assert spool.read(first)[1]["step"] == 2
    assert sum("memory only" in r.message for r in caplog.records) == 1
    spool.ack(first)
    assert spool.pending_steps() == 2


def test_taking_the_lock_spares_this_processs_own_fragment_in_flight(tmp_path: Path) -> None:
    """The sender thread takes the lock when it starts, which on a busy node can be after the
    flusher thread began writing the first fragment: deleting that temp file lost the run's
    first steps (a tester's TRL run kept steps 3–25 of 25 while its close report counted all
    of them as spooled). A dead owner's temp files still go."""
    spool = RunSpool(tmp_path, "key1")
    spool.path.mkdir(parents=True)
    mine = spool.path / f".00000000000000000001-{os.getpid()}-000000.jsonl.{os.getpid()}.tmp"
    mine.write_text('{"grposcope_spool": 1')  # being written by our own flusher right now
    dead = spool.path / ".00000000000000000001-999-000000.jsonl.999.tmp"
    dead.write_text('{"grposcope_spool": 1')
    assert spool.try_lock()
    assert mine.exists() and not dead.exists()
    spool.unlock()


def test_fragments_the_disk_refused_are_written_once_it_accepts_them(tmp_path: Path) -> None:
    """A fragment held in memory (the disk refused it) is written when the disk takes it
    again, in order; until then it is counted as memory-only, which the close report names
    as lost with the process."""
    blocker = tmp_path / "spool"
    blocker.write_text("not a directory")  # mkdir under a regular file fails
    spool = RunSpool(blocker, "key1")
    first = spool.append(_steps(1, 2))
    second = spool.append(_steps(3, 2))
    assert spool.memory_steps() == 4
    assert spool.persist_memory() == 4  # still refused
    blocker.unlink()  # the disk takes it again
    assert spool.persist_memory() == 0 and spool.memory_steps() == 0
    assert spool.fragments() == [first, second]
    assert [s["step"] for s in read_fragment(spool.path / second)] == [3, 4]
    assert spool.pending_steps() == 4
