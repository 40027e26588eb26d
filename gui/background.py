"""Work off the GUI thread: functions run on a small thread pool, their results come back to the GUI thread
through a queued signal, one small step at a time, so the window never stops while a save, an export, a
restore or a re-scoring runs.

`submit(key, work, done)` runs `work()` on a worker and calls `done(value)` in the GUI thread. A newer
submission under the same key supersedes the older one: its answer is dropped, so a view never shows the
answer to an old question (a region table of the previous image, metrics of a mask edited since). `stream`
hands back what a generator yields, one item per event-loop turn. A failure reaches `failed(key, text,
details)` (or the job's own handler), never the GUI thread as an exception. `busy(key)` and `pending` say
what is running; `wait()` is for closing and tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Optional

from PySide6.QtCore import QCoreApplication, QObject, Qt, Signal

from .run_controller import describe_error

#: Worker threads: enough to score while an export writes, few enough to leave the cores to inference.
WORKERS = 2

Done = Callable[[Any], None]
Failed = Optional[Callable[[str, str], None]]  # noqa: UP007 (run-time alias, Python 3.9): (text, details)


class Background(QObject):
    """The window's background work; see the module docstring."""

    #: (key, one-line text, details) of a job that failed without its own handler
    failed = Signal(str, str, str)
    #: nothing runs any more (a view that waits for the work of several keys may go on)
    idle = Signal()
    _deliver = Signal(object)  # a callable to run in the GUI thread

    def __init__(self, parent: QObject | None = None, workers: int = WORKERS) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="segscope-background")
        self._generations: dict[str, int] = {}
        self._running: dict[str, int] = {}  # key -> jobs not yet handed back
        self._closed = False
        self._lock = threading.Lock()
        self._deliver.connect(self._in_gui, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------------------------------------- API
    def submit(self, key: str, work: Callable[[], Any], done: Done, failed: Failed = None) -> None:
        """Run `work()` on a worker; `done(value)` in the GUI thread unless a newer job of `key` came since
        (nothing once shut down)."""
        if self._closed:
            return
        generation = self._start(key)
        self._pool.submit(self._run, key, generation, work, done, failed)

    def stream(self, key: str, items: Callable[[], Iterator[Any]], each: Done, finished: Callable[[], None],
               failed: Failed = None) -> None:
        """Iterate `items()` on a worker; `each(item)` in the GUI thread for every item, one per event-loop
        turn, then `finished()`. A newer job of `key` stops the iteration."""
        if self._closed:
            return
        generation = self._start(key)
        self._pool.submit(self._iterate, key, generation, items, each, finished, failed)

    def cancel(self, key: str) -> None:
        """Drop the answers of the jobs of `key` still running (the work itself runs to its end)."""
        with self._lock:
            self._generations[key] = self._generations.get(key, 0) + 1

    def busy(self, key: str | None = None) -> bool:
        """Whether a job (of `key`) has not handed its answer back yet."""
        return bool(self._running.get(key, 0) if key is not None else self.pending)

    @property
    def pending(self) -> int:
        return sum(self._running.values())

    def wait(self, timeout_s: float = 60.0) -> bool:
        """Process events until every job has handed back (closing, tests); False on timeout."""
        import time

        end = time.monotonic() + timeout_s
        while self.pending and time.monotonic() < end:
            QCoreApplication.processEvents()
            time.sleep(0.002)
        return not self.pending

    def shutdown(self) -> None:
        """Finish the running jobs' work (a save is never cut off) and drop every answer still to come."""
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------------------------ internals
    def _start(self, key: str) -> int:
        with self._lock:
            generation = self._generations.get(key, 0) + 1
            self._generations[key] = generation
        self._running[key] = self._running.get(key, 0) + 1
        return generation

    def _current(self, key: str, generation: int) -> bool:
        with self._lock:
            return not self._closed and self._generations.get(key) == generation

    def _run(self, key: str, generation: int, work: Callable[[], Any], done: Done, failed: Failed) -> None:
        try:
            value = work()
        except Exception as exc:  # noqa: BLE001 - handed to the GUI thread as a message
            self._deliver.emit(partial(self._fail, key, generation, exc, failed))
            return
        self._deliver.emit(partial(self._answer, key, generation, lambda: done(value), True))

    def _iterate(self, key: str, generation: int, items: Callable[[], Iterator[Any]], each: Done,
                 finished: Callable[[], None], failed: Failed) -> None:
        try:
            for item in items():
                if not self._current(key, generation):
                    break
                self._deliver.emit(partial(self._answer, key, generation, partial(each, item), False))
        except Exception as exc:  # noqa: BLE001 - handed to the GUI thread as a message
            self._deliver.emit(partial(self._fail, key, generation, exc, failed))
            return
        self._deliver.emit(partial(self._answer, key, generation, finished, True))

    def _fail(self, key: str, generation: int, exc: Exception, failed: Failed) -> None:
        text, details = describe_error(exc)
        self._answer(key, generation, (lambda: failed(text, details)) if failed else
                     (lambda: self.failed.emit(key, text, details)), True)

    def _answer(self, key: str, generation: int, call: Callable[[], object], last: bool) -> None:
        try:
            if self._current(key, generation):
                call()
        finally:
            if last:
                self._running[key] -= 1
                if not self.pending:
                    self.idle.emit()

    def _in_gui(self, call: Callable[[], None]) -> None:
        if not self._closed:
            call()
