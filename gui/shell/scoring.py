"""Metrics are scored off the GUI thread: the session says which image's numbers no longer answer for it
(`score_due`: an edit, a save, a discard, recovered edits, a moved ROI over a whole-slide run, another model, a
run scored on another truth), this takes its `ScoreJob` to the job runner and hands the answer back to the
session, which announces it (the row, the Metrics dock, the toolbar and the means follow). An answer to what
changed since is dropped by the session; the next job answers instead.

A few jobs are on the runner at a time (`IN_FLIGHT`), the next taken as one comes back, the images on screen
first (`first`): another model or mask rule makes every image of a dataset due at once, and 10,000 jobs taken
in one go would stall the window and leave the rows the user sees for last."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from functools import partial

from PySide6.QtCore import QObject, QTimer, Signal

from ...core.metrics.scores import ImageMetrics
from ...core.session.events import ScoreDue
from ...core.session.scoring import ScoreJob
from ...core.session.session import Session
from ..runtime.jobs import Jobs

#: Re-scoring waits this long after the last change (a brush drag is not re-scored on every mouse move).
SCORE_DELAY_MS = 300
#: Score jobs on the runner at once: enough to keep its shared lane busy.
IN_FLIGHT = 4


class Scorer(QObject):
    """Keeps the session's metrics fresh in the background; `message(level, text)` when one cannot be scored.
    `first()` names the images to score before the others (the rows on screen)."""

    message = Signal(str, str)

    def __init__(self, session: Session, jobs: Jobs, parent: QObject | None = None,
                 first: Callable[[], Iterable[str]] = tuple) -> None:
        super().__init__(parent)
        self.session, self.jobs, self.first = session, jobs, first
        self._due: OrderedDict[str, None] = OrderedDict()  # (an ordered set: O(1) to take the first)
        self._running: set[str] = set()
        self._timer = QTimer(self, singleShot=True, interval=SCORE_DELAY_MS)
        self._timer.timeout.connect(self.score_due)
        session.events.score_due.connect(self._on_due)

    def _on_due(self, due: ScoreDue) -> None:
        self._due[due.item_id] = None
        self._timer.start()

    @property
    def busy(self) -> bool:
        """Whether a re-scoring is due or running (an export waits for it: its table is the fresh numbers)."""
        return bool(self._due) or any(self.jobs.busy(_key(item_id)) for item_id in self._running)

    def score_due(self) -> None:
        """Send stale images' jobs to the background, up to `IN_FLIGHT` at a time, the `first` ones first."""
        self._running = {item_id for item_id in self._running if self.jobs.busy(_key(item_id))}
        if len(self._running) >= IN_FLIGHT or not self._due:
            return
        due = self._due
        for item_id in reversed([item_id for item_id in self.first() if item_id in due]):
            due.move_to_end(item_id, last=False)
        while due and len(self._running) < IN_FLIGHT:
            item_id = due.popitem(last=False)[0]
            job = self.session.score_job(item_id)
            if job is None:
                continue
            self._running.add(item_id)
            self.jobs.submit(_key(item_id), job.run, partial(self._adopt, job), partial(self._failed, item_id))

    def _adopt(self, job: ScoreJob, metrics: ImageMetrics | None) -> None:
        self.session.adopt_score(job, metrics)
        self._next(job.item_id)

    def _failed(self, item_id: str, text: str, _details: str) -> None:
        self.message.emit("error", f"{item_id}: cannot score the mask: {text}")
        self._next(item_id)

    def _next(self, item_id: str) -> None:
        """A job handed its answer back: the next one goes (the runner counts a job busy until its answer was
        taken, so it is let go here)."""
        self._running.discard(item_id)
        self.score_due()


def _key(item_id: str) -> str:
    return f"score:{item_id}"
