"""The viewer's one job runner: everything that takes time runs here, off the GUI thread, and its answers come
back to the GUI thread one small step at a time, so the window only paints and dispatches. No other gui module
starts a thread or an executor (tests/test_layout.py checks).

A **job** is a plain function (`submit`) or a generator function (`stream`) taking no arguments; it needs no Qt,
so core hands jobs out as they are (`ScoreJob.run`, `QualityJob.run`, `Exportable.steps`, `restore_entries`).
What it returns reaches `done(value)`, each item it yields `each(item)`, then `finished()`; an exception reaches
`failed(text, details)` (`describe_error`: a user's error in one line, anything else a bug with its traceback), or
the runner's `failed(key, text, details)` signal when the job has no handler. Nothing ever raises in the GUI thread.

**Answers** come back through one queue, in the order they were handed back: a worker appends and wakes the GUI
thread once (`_wake`), which runs what has queued for at most `DRAIN_MS` and yields to the event loop (paints,
input) before the rest. During Run all a result arrives every few milliseconds: handled in batches, they cost the
GUI thread one wake-up per batch, not one queued Qt event each (whose dispatch, on 2 cores shared with the
pipeline's threads, waits for the interpreter lock each time).

**Lanes.** A job runs on a named lane: threads the runner owns, made on first use (`LANES`). `SHARED` (two
threads, any order) takes what has no other lane. A one-thread lane runs its jobs in the order they were
submitted, always on the same thread: `BACKEND` opens, runs and closes the inference backend there (backends
must be used from the thread that opened them), `AUTOSAVE` writes recovery files one after the other, `SLIDES`
opens one slide at a time; `TILES` reads slide tiles two at a time.

**Keys.** A job may carry a key naming the question it answers ("review", "score:001"). A newer job of the same
key supersedes the older ones: one not started never runs, a running function's answer is dropped, a running
generator stops at its next yield. `cancel(key)` does the same without a new job. A job without a key (None)
is never superseded; its handle (`Job`) can `cancel()` it, or only take it off its lane if it has not started
(`dequeue()`: a tile the view moved away from). Cancelling never interrupts running code: work that can stop
early (an inference batch) checks a `Flag` (a `threading.Event`, what core's loops take as `cancel=`).

**Shutdown** (the window closes): `shutdown()` takes no new jobs, drops the queued ones, waits for the running
ones to end (a save is never cut off) and drops their answers. `Job.wait()` blocks until one job's work ended
(no events: what closing paths need, e.g. the backend closed on its lane); `pending` and `busy(key)` say what
has not handed its answer back yet.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from functools import partial
from typing import Any, Optional, TypeVar

from PySide6.QtCore import QObject, Qt, Signal

from ...core.session import running
from .option_labels import OPTION_LABELS

SHARED, BACKEND, AUTOSAVE, SLIDES, TILES = "shared", "backend", "autosave", "slides", "tiles"
#: Threads per lane: enough to score while an export writes, few enough to leave the cores to inference.
LANES = {SHARED: 2, BACKEND: 1, AUTOSAVE: 1, SLIDES: 1, TILES: 2}
#: How long the GUI thread runs queued answers before it lets the event loop paint and take input (the rest next).
DRAIN_MS = 8

#: A cancel flag work checks between its steps (`set()` asks it to stop), as core's loops take it.
Flag = threading.Event

T = TypeVar("T")
Failed = Optional[Callable[[str, str], None]]  # noqa: UP007 (run-time alias, Python 3.9): (text, details)


def started_after(seconds: float, work: Callable[[], Iterator[T]]) -> Callable[[], Iterator[T]]:
    """A generator job's `work` that first waits `seconds` on its worker, without the interpreter lock: the window
    draws what the job's start changed (a dataset's first image, a run's rows) before the job's threads compete with
    it for the lock. The job is queued and running meanwhile: a newer one supersedes it, and what waits for the jobs
    waits for it."""
    def delayed() -> Iterator[T]:
        time.sleep(seconds)
        yield from work()
    return delayed


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(one line for the message list, details) as the session words them, options named as the viewer's
    controls."""
    return running.describe_error(exc, OPTION_LABELS)


class Job:
    """One submitted job: `cancel()`, `dequeue()`, `wait()`; `finished` once its last answer was handed back
    (or dropped) in the GUI thread."""

    def __init__(self, runner: Jobs | None, key: str | None, lane: str) -> None:
        self.key, self.lane = key, lane
        self.dropped = runner is None  # its answers are no longer wanted (read by the worker too)
        self.finished = runner is None
        self.future: Future[None] | None = None
        self._runner = runner

    def cancel(self) -> None:
        """Drop its answers; if it has not started, it never will (a generator stops at its next yield)."""
        if self._runner is not None:
            self._runner._drop(self)

    def dequeue(self) -> bool:
        """Take it off its lane if it has not started (True: it never runs, no answer comes); a started job
        is left alone and answers as usual."""
        if self._runner is None or self.future is None or not self.future.cancel():
            return False
        self._runner._drop(self)
        return True

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block this thread, processing no events, until the work has ended; False on timeout. Its answer
        still comes back through the event loop afterwards."""
        return self.future is None or not wait_for([self.future], timeout_s).not_done


class Jobs(QObject):
    """The runner of one window; see the module docstring."""

    #: (key or "", one-line text, details) of a job that failed without a handler of its own
    failed = Signal(str, str, str)
    _wake = Signal()  # answers are queued for the GUI thread (`_drain`)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lanes: dict[str, ThreadPoolExecutor] = {}
        self._keyed: dict[str, list[Job]] = {}  # key -> its jobs not finished yet
        self._live: set[Job] = set()
        self._closed = False
        self._answers: deque[Callable[[], object]] = deque()  # callables for the GUI thread, in order
        self._answers_lock = threading.Lock()
        self._woken = False  # a `_wake` is on its way (under the lock)
        self._wake.connect(self._drain, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------------------------------------- API
    def submit(self, key: str | None, work: Callable[[], T], done: Callable[[T], object] | None = None,
               failed: Failed = None, *, lane: str = SHARED) -> Job:
        """Run `work()` on `lane`; `done(value)` in the GUI thread unless superseded or cancelled meanwhile."""
        job = self._start(key, lane)
        if not job.finished:
            job.future = self._lane(lane).submit(self._run, job, work, done, failed)
        return job

    def stream(self, key: str | None, items: Callable[[], Iterator[T]], each: Callable[[T], object],
               finished: Callable[[], object] | None = None, failed: Failed = None, *, lane: str = SHARED) -> Job:
        """Iterate `items()` on `lane`; `each(item)` in the GUI thread for every item, each as an event of its
        own, then `finished()`. Superseding or cancelling stops the iteration at its next item."""
        job = self._start(key, lane)
        if not job.finished:
            job.future = self._lane(lane).submit(self._iterate, job, items, each, finished, failed)
        return job

    def relay(self, call: Callable[..., object]) -> Callable[..., None]:
        """`call` made callable from any thread: each call runs `call(*args)` in the GUI thread, in order with
        the jobs' answers (a progress callback core calls from inside a job)."""
        return lambda *args: self._deliver(partial(call, *args))

    def relay_latest(self, call: Callable[..., object]) -> Callable[..., None]:
        """`relay` for a value that only its newest state matters of (a progress count): calls made while one is
        still on its way to the GUI thread are merged into it, which runs `call` with the newest arguments. A run
        of thousands of images a minute then costs the GUI thread one progress event per event-loop pass, not
        one per image beside each result's."""
        lock = threading.Lock()
        newest: list[tuple[object, ...]] = []  # (at most one: the newest arguments)

        def deliver() -> None:
            with lock:
                args = newest.pop()
            call(*args)

        def post(*args: object) -> None:
            with lock:
                on_its_way = bool(newest)
                newest[:] = [args]
            if not on_its_way:
                self._deliver(deliver)
        return post

    def cancel(self, key: str) -> None:
        """Drop the answers of `key`'s jobs; those not started never run."""
        for job in list(self._keyed.get(key, ())):
            self._drop(job)

    def busy(self, key: str | None = None) -> bool:
        """Whether a job (of `key`) has not handed its last answer back yet (a cancelled one that still runs
        counts until it ends)."""
        return bool(self._keyed.get(key)) if key is not None else bool(self._live)

    @property
    def pending(self) -> int:
        return len(self._live)

    def shutdown(self) -> None:
        """No new jobs; the queued ones never start; wait until the running ones end; drop every answer."""
        self._closed = True
        for job in list(self._live):
            self._drop(job)
        for executor in self._lanes.values():
            executor.shutdown(wait=True, cancel_futures=True)
        self._live.clear()
        self._keyed.clear()

    # ------------------------------------------------------------------------------------ internals
    def _lane(self, lane: str) -> ThreadPoolExecutor:
        executor = self._lanes.get(lane)
        if executor is None:
            executor = self._lanes[lane] = ThreadPoolExecutor(LANES[lane], thread_name_prefix=f"segscope-{lane}")
        return executor

    def _start(self, key: str | None, lane: str) -> Job:
        if lane not in LANES:
            raise ValueError(f"no job lane {lane!r}; the lanes are {', '.join(LANES)}")
        if self._closed:
            return Job(None, key, lane)  # finished and dropped: nothing runs once shut down
        job = Job(self, key, lane)
        if key is not None:
            self.cancel(key)
            self._keyed.setdefault(key, []).append(job)
        self._live.add(job)
        return job

    def _drop(self, job: Job) -> None:
        job.dropped = True
        if job.future is not None and job.future.cancel():
            self._end(job)  # it never runs, so no answer will end it

    def _end(self, job: Job) -> None:
        if job.finished:
            return
        job.finished = True
        self._live.discard(job)
        if job.key is not None:
            jobs = self._keyed.get(job.key, [])
            if job in jobs:
                jobs.remove(job)
            if not jobs:
                self._keyed.pop(job.key, None)

    def _post(self, job: Job, call: Callable[[], object] | None, last: bool) -> None:
        """From a worker: run `call` in the GUI thread unless the job was dropped by then; `last` ends it."""
        self._deliver(partial(self._answer, job, call, last))

    def _deliver(self, call: Callable[[], object]) -> None:
        """From any thread: queue `call` for the GUI thread, waking it unless a wake-up is on its way."""
        with self._answers_lock:
            self._answers.append(call)
            wake, self._woken = not self._woken, True
        if wake:
            self._wake.emit()

    def _drain(self) -> None:
        """In the GUI thread: run the queued answers in order for up to `DRAIN_MS`, then wake again for the rest."""
        with self._answers_lock:
            self._woken = False
        until = time.perf_counter() + DRAIN_MS / 1000
        try:
            while self._answers and not self._closed:
                self._answers.popleft()()
                if time.perf_counter() > until:
                    break
        finally:  # (a bug raising in one answer leaves the others queued, not stranded)
            with self._answers_lock:
                wake = bool(self._answers) and not self._woken and not self._closed
                self._woken = self._woken or wake
            if wake:
                self._wake.emit()

    def _run(self, job: Job, work: Callable[[], Any], done: Callable[[Any], object] | None, failed: Failed) -> None:
        if job.dropped:  # superseded between its queueing and its start
            self._post(job, None, True)
            return
        try:
            value = work()
        except Exception as exc:  # noqa: BLE001 - handed to the GUI thread as a message
            self._post(job, partial(self._fail, job, exc, failed), True)
            return
        self._post(job, partial(done, value) if done is not None else None, True)

    def _iterate(self, job: Job, items: Callable[[], Iterator[Any]], each: Callable[[Any], object],
                 finished: Callable[[], object] | None, failed: Failed) -> None:
        iterator = None
        try:
            if not job.dropped:
                iterator = items()
                for item in iterator:
                    if job.dropped:
                        break
                    self._post(job, partial(each, item), False)
        except Exception as exc:  # noqa: BLE001 - handed to the GUI thread as a message
            self._post(job, partial(self._fail, job, exc, failed), True)
            return
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # a generator stopped early runs its `finally`/`with` exits now, on this thread
        self._post(job, finished, True)

    def _fail(self, job: Job, exc: Exception, failed: Failed) -> None:
        text, details = describe_error(exc)
        if failed is not None:
            failed(text, details)
        else:
            self.failed.emit(job.key or "", text, details)

    def _answer(self, job: Job, call: Callable[[], object] | None, last: bool) -> None:
        try:
            if call is not None and not job.dropped:
                call()
        finally:
            if last:
                self._end(job)
