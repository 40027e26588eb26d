"""Inference off the GUI thread.

The backend (`core.session.inference.Inference`, opening the chosen `BackendSpec`) lives on the job runner's
`BACKEND` lane (one thread, in order): it is opened there, runs the session's run jobs (`Session.run`,
`Session.run_whole_slide`: `core.session.jobs.RunJob`) there and is closed there. The controller in the GUI
thread queues those jobs, hands each step back to the job (which gives it to the session), tracks progress and
ETA and each device's share, and turns every failure into a message (never an exception in the GUI).

A result reaches the views through the session's events alone: the controller emits no Qt signal per result, and
its progress at most every `PROGRESS_S` (and at the first and the last step). On 2 cores shared with the
pipeline's threads, a Qt signal's emit waits for the interpreter lock; thousands a minute cost the run its pace.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal

from ...core.backend_spec import BackendSpec
from ...core.backends.base import Capabilities
from ...core.session.backend_state import BackendState
from ...core.session.batches import run_summary
from ...core.session.inference import Inference, Message, Usage
from ...core.session.jobs import RunJob
from ...core.session.running import Failed, RunStep
from .jobs import BACKEND, Jobs, started_after

#: The least time between two progress signals during a run (the first and the last step are always said).
PROGRESS_S = 0.1
#: How long a run of several images waits on the backend's thread before its first image: the window draws the run's
#: start (its rows queued, the progress bar, the Stop action) before the pipeline's threads compete for the lock.
RUN_DRAW_S = 0.05


class Openable(Protocol):
    """A backend choice the controller can open (`core.backend_choice.BackendChoice`): what it opens, as the CLI
    names it (`BackendSpec`), and a one-line description."""

    def describe(self) -> str: ...

    def spec(self) -> BackendSpec: ...


class RunController(QObject):
    """The GUI side: `run(job)`, `cancel()`, progress with ETA, and the backend's lifecycle: it opens each
    choice of `state` and reports back to it (capabilities, failures, busy)."""

    backendOpened = Signal(object)  # Capabilities
    backendFailed = Signal(str, str)  # text, details: no backend is open now
    usage = Signal(list, list)  # per device or cluster worker, after each image: as_dicts(), lines()
    message = Signal(str, str, str)  # level, text, details
    note = Signal(str, int)  # the status bar's text, for so many ms
    progress = Signal(int, int, float)  # finished, total, ETA in seconds (nan while unknown): see PROGRESS_S
    batchFinished = Signal(int, int, bool)  # done, failed, cancelled

    def __init__(self, state: BackendState[Openable], jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state, self.jobs = state, jobs
        self._inference = Inference()
        self._job: RunJob[Any] | None = None
        self._closed = False
        self._counts = [0, 0]  # done, failed
        self._started = 0.0
        self._progress_said = 0.0  # (`time.perf_counter`) when progress was last emitted
        state.events.opening.connect(self._open)

    @property
    def busy(self) -> bool:
        return self.state.busy

    def _open(self, choice: Openable) -> None:
        """Close the backend open now, then open `choice`'s, both on the backend lane."""
        self.jobs.submit(None, self._inference.close, None, partial(self._warn, "Closing the backend: "), lane=BACKEND)
        self.jobs.submit(None, lambda: self._inference.open(choice.spec()), self._on_opened, self._on_open_failed,
                         lane=BACKEND)

    def run(self, job: RunJob[RunStep]) -> bool:
        """Queue a run job of the session on the backend lane; False (and a message, and the job ended as
        never run) when one is already running."""
        if self.busy:
            self.message.emit("warning", "A run is in progress: wait for it or cancel it (Esc)", "")
            job.finished(False)
            return False
        self._job, self._counts, self._started = job, [0, 0], time.perf_counter()
        self.state.set_busy(True)
        self.progress.emit(0, job.total, float("nan"))
        work = partial(self._inference.run, job, self.jobs.relay_latest(self._on_progress))
        self.jobs.stream(None, started_after(RUN_DRAW_S, work) if len(job.item_ids) > 1 else work,
                         partial(self._on_message, job), partial(self._on_done, job), partial(self._on_failed, job),
                         lane=BACKEND)
        return True

    def cancel(self) -> None:
        """Stop the run after the image in flight (and interrupt it where the backend can)."""
        if not self.busy or self._job is None:
            return
        self._job.cancel.set()
        backend = self._inference.backend
        if backend is not None:
            backend.cancel()  # thread-safe by the Backend contract

    def shutdown(self) -> None:
        """Cancel, then close the backend on its lane and wait for it (call once, on window close)."""
        if self._closed:
            return
        self._closed = True
        self.cancel()
        self.jobs.submit(None, self._inference.close, lane=BACKEND).wait()

    def _on_progress(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if 1 < done < total and now - self._progress_said < PROGRESS_S:
            return
        self._progress_said = now
        eta = (now - self._started) / done * (total - done) if done else float("nan")
        self.progress.emit(done, total, eta)

    def _on_opened(self, capabilities: Capabilities) -> None:
        self.state.opened(capabilities)
        self.backendOpened.emit(capabilities)

    def _on_open_failed(self, text: str, details: str) -> None:
        self.backendFailed.emit(text, details)
        self.state.failed(text, details)  # may open the backend open before again

    def _on_message(self, job: RunJob[RunStep], message: Message) -> None:
        if isinstance(message, Usage):
            self.usage.emit(message.devices, message.lines)
            return
        job.each(message)  # the session takes it first: the views follow its events
        if isinstance(message, Failed):
            self._counts[1] += 1
            return
        self._counts[0] += 1

    def _on_failed(self, job: RunJob[RunStep], text: str, details: str) -> None:
        """A bug outside the per-image handling: said, and the run ends (the next one may start)."""
        self.message.emit("error", text, details)
        self._counts[1] += 1
        self._on_done(job)

    def _warn(self, prefix: str, text: str, details: str) -> None:
        self.message.emit("warning", prefix + text, details)

    def _on_done(self, job: RunJob[RunStep]) -> None:
        cancelled = job.cancel.is_set()
        self._job = None
        self.state.set_busy(False)
        job.finished(cancelled)
        summary = run_summary(*self._counts, cancelled)
        if summary:
            self.note.emit(summary, 5000)
        self.batchFinished.emit(*self._counts, cancelled)
