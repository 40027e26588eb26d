"""Metrics are scored off the GUI thread: the session says which image's numbers no longer answer for it
(`score_due`: an edit, a save, a discard, recovered edits, a moved ROI over a whole-slide run, another model, a
run scored on another truth), this takes its `ScoreJob` to the job runner and hands the answer back to the
session, which announces it (the row, the Metrics dock, the toolbar and the means follow). An answer to what
changed since is dropped by the session; the next job answers instead."""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import QObject, QTimer, Signal

from ..core.metrics.scores import ImageMetrics
from ..core.session.events import ScoreDue
from ..core.session.scoring import ScoreJob
from ..core.session.session import Session
from .jobs import Jobs

#: Re-scoring waits this long after the last change (a brush drag is not re-scored on every mouse move).
SCORE_DELAY_MS = 300


class Scorer(QObject):
    """Keeps the session's metrics fresh in the background; `message(level, text)` when one cannot be scored."""

    message = Signal(str, str)

    def __init__(self, session: Session, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session, self.jobs = session, jobs
        self._due: set[str] = set()
        self._running: set[str] = set()
        self._timer = QTimer(self, singleShot=True, interval=SCORE_DELAY_MS)
        self._timer.timeout.connect(self.score_due)
        session.events.score_due.connect(self._on_due)

    def _on_due(self, due: ScoreDue) -> None:
        self._due.add(due.item_id)
        self._timer.start()

    @property
    def busy(self) -> bool:
        """Whether a re-scoring is due or running (an export waits for it: its table is the fresh numbers)."""
        return bool(self._due) or any(self.jobs.busy(_key(item_id)) for item_id in self._running)

    def score_due(self) -> None:
        """Send every stale image's job to the background now."""
        due, self._due = self._due, set()
        self._running = {item_id for item_id in self._running if self.jobs.busy(_key(item_id))}
        for item_id in due:
            job = self.session.score_job(item_id)
            if job is None:
                continue
            self._running.add(item_id)
            self.jobs.submit(_key(item_id), job.run, partial(self._adopt, job), partial(self._failed, item_id))

    def _adopt(self, job: ScoreJob, metrics: ImageMetrics | None) -> None:
        self.session.adopt_score(job, metrics)

    def _failed(self, item_id: str, text: str, _details: str) -> None:
        self.message.emit("error", f"{item_id}: cannot score the mask: {text}")


def _key(item_id: str) -> str:
    return f"score:{item_id}"
