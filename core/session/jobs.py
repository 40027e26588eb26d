"""What the session's commands return: work that any thread runs, and how its answers come back.

A command (open a dataset, run, run all, run a whole slide, save, re-score, ...) changes what it can at once
and returns the slow rest as a job. The job's `work` is a plain function or generator with no Qt and no
session access beyond what was taken when the command ran; its answers go back to the session through the
job's `done`/`each`/`finished`, which must be called in the session's thread (they change state and emit).
A window hands jobs to its runner (a worker thread, the answers queued back to the GUI thread); headless
callers and tests call `run_here`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Union

from ..backends.base import Backend
from ..errors import describe

T = TypeVar("T")


def _nothing(*_args: object) -> None:
    return None


#: (one line, details) of why a job failed (`core.errors.describe`: a user's error in one line, else a bug).
Failure = Callable[[str, str], None]


@dataclass
class Job(Generic[T]):
    """One answer: `done(work())`, or `failed(text, details)` when the work raised."""

    name: str  # what it is, for progress and to replace an older job of the same name
    work: Callable[[], T]
    done: Callable[[T], None]
    failed: Failure | None = None


@dataclass
class StreamJob(Generic[T]):
    """Answers one at a time: `each(answer)` for each answer `work()` yields, then `finished()`."""

    name: str
    work: Callable[[], Iterator[T]]
    each: Callable[[T], None]
    finished: Callable[[], None] = _nothing


#: Progress of a run: (steps done, steps in all).
Progress = Callable[[int, int], None]


@dataclass
class RunJob(Generic[T]):
    """Inference: `work(backend, cancel, progress)` yields steps (each given to `each`) on the thread that owns
    the open backend; `finished(cancelled)` after the last. `total` steps make the progress (images or tiles)."""

    name: str
    item_ids: tuple[str, ...]
    total: int
    work: Callable[[Backend | None, threading.Event, Progress], Iterator[T]]  # None: no backend is open
    each: Callable[[T], None]
    finished: Callable[[bool], None]
    cancel: threading.Event = field(default_factory=threading.Event)


AnyJob = Union[Job[Any], StreamJob[Any]]


def run_here(job: AnyJob) -> None:
    """Run a job in the calling thread (headless callers, tests): its answers come back at once."""
    if isinstance(job, StreamJob):
        for answer in job.work():
            job.each(answer)
        job.finished()
        return
    try:
        answer = job.work()
    except Exception as exc:
        if job.failed is None:
            raise
        described = describe(exc)
        job.failed(described.line, described.details)
        return
    job.done(answer)


def run_backend_job(job: RunJob[T], backend: Backend | None, progress: Progress = _nothing) -> None:
    """Run an inference job in the calling thread on `backend` (headless callers, tests; None: none is open)."""
    cancelled = False
    try:
        for step in job.work(backend, job.cancel, progress):
            job.each(step)
    finally:
        cancelled = job.cancel.is_set()
        job.finished(cancelled)
