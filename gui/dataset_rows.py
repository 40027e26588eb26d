"""The dataset list's Status and metric columns as a view of the session: queued, done, ROI changed,
errors, and every re-scoring of an image (a run, an edit, a save, a discard)."""

from __future__ import annotations

from ..core.metrics import ImageMetrics
from ..core.runs import RunRecord
from ..core.session import Session
from .dataset_panel import ImageTableModel

ROI_CHANGED = "ROI changed"


class RowStatus:
    """Writes the rows of `model` (the dataset panel's) from `session`'s events and the run's progress."""

    def __init__(self, session: Session, model: ImageTableModel) -> None:
        self.session, self.model = session, model
        session.events.result_added.connect(self._on_result_added)
        session.events.metrics_changed.connect(self._on_metrics_changed)

    def set(self, item_id: str, status: str, metrics: ImageMetrics | None = None, error: str = "") -> None:
        if self.session.dataset is not None and self.model.has(item_id):
            self.model.update(item_id, status, metrics, error)

    def done(self, item_id: str) -> None:
        metrics = self.session.metrics(item_id)
        self.set(item_id, "done" if metrics else "done (no mask)", metrics)

    def restore(self) -> int:
        """After opening a dataset: the images whose runs the session kept or restored; their count."""
        dataset = self.session.dataset
        restored = [item.id for item in dataset.items if self.session.has_metrics(item.id)] if dataset else []
        for item_id in restored:
            self.done(item_id)
        return len(restored)

    def queued(self, item_ids: list[str]) -> None:
        for item_id in item_ids:
            self.set(item_id, "queued")

    def batch_finished(self, cancelled: bool) -> None:
        """Rows still queued were never run."""
        if self.session.dataset is not None:
            for row in self.model.rows:
                if row.status == "queued":
                    self.set(row.item_id, "cancelled" if cancelled else "not run")

    def mark_stale(self, item_id: str, stale: bool) -> None:
        """Flag the row while its result was computed on another ROI than the image has now."""
        status = self.model.row(item_id).status
        if stale and not status.startswith(ROI_CHANGED):
            self.set(item_id, ROI_CHANGED)
        elif not stale and status.startswith(ROI_CHANGED):
            self.done(item_id)

    def _on_result_added(self, item_id: str, _record: RunRecord) -> None:
        self.done(item_id)

    def _on_metrics_changed(self, item_id: str, metrics: ImageMetrics | None) -> None:
        if self.session.dataset is not None and self.model.has(item_id):
            self.model.set_metrics(item_id, metrics)
