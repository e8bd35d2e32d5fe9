"""The in-process worker started by the API (GRPOSCOPE_EMBEDDED_WORKER, on by default): fit
threads and one webhook delivery thread, daemon threads stopped on shutdown."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("grposcope.worker")

# Two fit threads share one worker (one claimer, so no run is fitted twice at once): SQLite
# I/O and parts of NumPy/SciPy release the GIL, so a second thread keeps a core busy while the
# first waits on the database.
FIT_THREADS = 2


def start_embedded(app: Any) -> list[Callable[[], None]]:
    """Start the worker threads if the settings ask for them; returns their stop callables."""
    settings = app.state.settings
    if not settings.embedded_worker:
        return []
    from grposcope.db import make_engine, make_session_factory
    from grposcope.metrics.cache import SESSION_KEY
    from grposcope.metrics.keys import KEY_CACHE_SESSION_KEY

    # The worker gets its own connection pool: with 50 live runs the API's request threads can
    # hold every pooled connection at once, and a worker waiting for one stalls every refit.
    engine = make_engine(settings.database_url, pool_size=4)
    # Its own pool, but the app's series cache and key ids: a refit's reads warm the
    # dashboard's.
    factory = make_session_factory(
        engine, **{SESSION_KEY: app.state.series_cache, KEY_CACHE_SESSION_KEY: app.state.key_ids}
    )
    stops = start_threads(engine, factory, settings)
    return [*stops, engine.dispose]


def start_threads(engine: Any, factory: Any, settings: Any, *, poll_s: float = 0.1
                  ) -> list[Callable[[], None]]:  # fmt: skip
    from grposcope.alerts.delivery import Deliverer
    from grposcope.worker.loop import FitWorker

    stop = threading.Event()
    worker = FitWorker(engine, factory, settings, poll_s=poll_s)
    deliverer = Deliverer(factory)
    threads = [
        threading.Thread(target=worker.serve, args=(stop,), name=f"grposcope-fit-{i}", daemon=True)
        for i in range(FIT_THREADS)
    ]
    threads += [
        threading.Thread(
            target=deliverer.serve, args=(stop,), name="grposcope-hooks", daemon=True
        ),  # fmt: skip
    ]
    for thread in threads:
        thread.start()

    def stop_all() -> None:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        deliverer.close()

    log.info("embedded fit worker started")
    return [stop_all]
