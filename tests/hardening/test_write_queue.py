"""SQLite ingest writers take turns (grposcope.write_queue): across processes through an
flock on ``<database>-writers``, across threads through a lock; Postgres needs no turn."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from sqlalchemy import create_engine

from grposcope.write_queue import WriterQueue, writer_turn

HOLDER = """
import sys
from grposcope.write_queue import WriterQueue
with WriterQueue(sys.argv[1]).turn():
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


def _waiter(turn_of: WriterQueue, got: threading.Event) -> threading.Thread:
    def take() -> None:
        with turn_of.turn():
            got.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_another_process_holding_the_turn_makes_this_one_wait(tmp_path: Path) -> None:
    database = str(tmp_path / "g.db")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, database], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        got = threading.Event()
        thread = _waiter(WriterQueue(database), got)
        # A deadline, not a measurement: with the turn free the waiter gets it at once.
        assert not got.wait(0.5), "took the turn while another process held it"
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert got.wait(30), "never got the turn once the other process let go"
        thread.join(30)
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / "g.db-writers").exists()


def test_threads_of_one_process_take_turns_even_in_memory() -> None:
    queue = WriterQueue(None)
    got = threading.Event()
    with queue.turn():
        thread = _waiter(queue, got)
        assert not got.wait(0.3)
    assert got.wait(30)
    thread.join(30)


def test_one_queue_per_sqlite_engine(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'q.db'}")
    assert _blocks_while_held(engine)


def test_postgres_writers_never_queue(postgres_url) -> None:  # type: ignore[no-untyped-def]
    assert not _blocks_while_held(create_engine(postgres_url))


def _blocks_while_held(engine) -> bool:  # type: ignore[no-untyped-def]
    """Whether the engine's next writer waits while one holds its turn."""
    got = threading.Event()

    def enter() -> None:
        with writer_turn(engine):
            got.set()

    with writer_turn(engine):
        thread = threading.Thread(target=enter, daemon=True)
        thread.start()
        blocked = not got.wait(0.5)
    assert got.wait(30)
    thread.join(30)
    return blocked
