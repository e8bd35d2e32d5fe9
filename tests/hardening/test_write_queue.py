"""SQLite ingest writers take turns (grposcope.write_queue): across processes through an
flock on ``<database>-writers``, across threads through a lock; a turn runs the work its
process queued meanwhile in one transaction; Postgres needs no turn."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from sqlalchemy import create_engine

from grposcope.write_queue import MAX_GROUP, WriterQueue, writer_queue

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
    assert writer_queue(create_engine(postgres_url)) is None


def _blocks_while_held(engine) -> bool:  # type: ignore[no-untyped-def]
    """Whether the engine's next writer waits while one holds its turn."""
    got = threading.Event()

    queue = writer_queue(engine)
    assert queue is not None and writer_queue(engine) is queue

    def enter() -> None:
        with queue.turn():
            got.set()

    with queue.turn():
        thread = threading.Thread(target=enter, daemon=True)
        thread.start()
        blocked = not got.wait(0.5)
    assert got.wait(30)
    thread.join(30)
    return blocked


class FakeDatabase:
    """Transactions as lists: a unit of work appends to its session, a transaction keeps its
    session's items only if nothing raised (all or nothing, as a database would)."""

    def __init__(self) -> None:
        self.committed: list[int] = []
        self.transactions = 0
        self._lock = threading.Lock()

    def transact(self, work):  # type: ignore[no-untyped-def]
        with self._lock:
            self.transactions += 1
        session: list[int] = []
        value = work(session)
        with self._lock:
            self.committed.extend(session)
        return value


def _unit(i: int, refuse: bool = False):  # type: ignore[no-untyped-def]
    def work(session: list[int]) -> int:
        session.append(i)
        if refuse:
            raise PermissionError(f"unit {i} refused")
        return i * 10

    return work


def _submit_while_held(queue: WriterQueue, database: FakeDatabase, n: int,
                       refused: frozenset[int] = frozenset()) -> list[object]:  # fmt: skip
    """Queue ``n`` units from ``n`` threads while the turn is held, then let go: what each
    thread got back (its value, or the exception it raised)."""
    results: list[object] = [None] * n

    def ask(i: int) -> None:
        try:
            results[i] = queue.run(_unit(i, i in refused), database.transact)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results[i] = exc

    threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(n)]
    with queue.turn():
        for thread in threads:
            thread.start()
        for _ in range(3000):  # every unit queued before the turn is let go
            if len(queue._pending) == n:
                break
            threading.Event().wait(0.01)
        assert len(queue._pending) == n
    for thread in threads:
        thread.join(30)
    return results


def test_a_turn_runs_what_its_process_queued_in_one_transaction() -> None:
    queue, database = WriterQueue(None), FakeDatabase()
    results = _submit_while_held(queue, database, 8)
    assert results == [i * 10 for i in range(8)]  # each thread gets its own value
    assert database.transactions == 1
    assert sorted(database.committed) == list(range(8))


def test_a_refused_unit_fails_only_its_own_request() -> None:
    queue, database = WriterQueue(None), FakeDatabase()
    results = _submit_while_held(queue, database, 6, refused=frozenset({2}))
    assert isinstance(results[2], PermissionError) and "unit 2" in str(results[2])
    assert [r for i, r in enumerate(results) if i != 2] == [0, 10, 30, 40, 50]
    assert sorted(database.committed) == [0, 1, 3, 4, 5]  # each once, the refused one never
    assert database.transactions == 1 + 6  # the group, then each alone


def test_more_queued_than_one_turn_takes_all_get_stored() -> None:
    queue, database = WriterQueue(None), FakeDatabase()
    n = MAX_GROUP * 2 + 5
    results = _submit_while_held(queue, database, n)
    assert results == [i * 10 for i in range(n)]
    assert sorted(database.committed) == list(range(n))
    assert database.transactions == 3  # 32, 32 and 5
