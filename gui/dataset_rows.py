"""The dataset list's Status and metric columns as a view of the session: queued, done, ROI changed,
errors, and every re-scoring of an image (a run, an edit, a save, a discard)."""

from __future__ import annotations

from ..core.metrics.scores import ImageMetrics
from ..core.session.runs import RunRecord
from ..core.session.session import OTHER_MODEL, ROI_CHANGED, Session
from .dataset_panel import ImageTableModel

#: The Status of a row whose result no longer answers for its image, by `Session.stale_reason`.
STALE_STATUS = {ROI_CHANGED: ROI_CHANGED, OTHER_MODEL: "other model"}


class RowStatus:
    """Writes the rows of `model` (the dataset panel's) from `session`'s events and the run's progress."""

    def __init__(self, session: Session, model: ImageTableModel) -> None:
        self.session, self.model = session, model
        session.events.result_added.connect(self._on_result_added)
        session.events.result_restored.connect(self._on_result_added)
        session.events.metrics_changed.connect(self._on_metrics_changed)

    def set(self, item_id: str, status: str, metrics: ImageMetrics | None = None, error: str = "") -> None:
        if self.session.dataset is not None and self.model.has(item_id):
            self.model.update(item_id, status, metrics, error)

    def done(self, item_id: str) -> None:
        """The image's row after a run: its metrics and "done" (or why its result no longer answers for it)."""
        metrics = self.session.known_metrics(item_id)
        reason = self.session.stale_reason(item_id)
        self.set(item_id, STALE_STATUS.get(reason, "done" if metrics else "done (no mask)"), metrics)

    def restore(self) -> int:
        """After opening a dataset: the images whose runs the session kept; their count."""
        dataset = self.session.dataset
        kept = [item.id for item in dataset.items if self.session.has_metrics(item.id)] if dataset else []
        for item_id in kept:
            self.done(item_id)
        return len(kept)

    def queued(self, item_ids: list[str]) -> None:
        for item_id in item_ids:
            self.set(item_id, "queued")

    def batch_finished(self, cancelled: bool) -> None:
        """Rows still queued were never run."""
        if self.session.dataset is not None:
            for row in self.model.rows:
                if row.status == "queued":
                    self.set(row.item_id, "cancelled" if cancelled else "not run")

    def mark_stale(self, item_id: str, reason: str) -> None:
        """Flag the row while its result no longer answers for the image (`Session.stale_reason`; "": it
        does again)."""
        if self.session.dataset is None or not self.model.has(item_id):
            return
        status = self.model.row(item_id).status
        stale_statuses = tuple(STALE_STATUS.values())
        if reason and not status.startswith(STALE_STATUS[reason]):
            self.set(item_id, STALE_STATUS[reason], self.session.known_metrics(item_id))
        elif not reason and status.startswith(stale_statuses):
            self.done(item_id)

    def mark_all_stale(self) -> None:
        """After another model opened: every row with a result says whether it is of this model."""
        dataset = self.session.dataset
        for item in dataset.items if dataset is not None else ():
            if self.session.result(item.id) is not None:
                self.mark_stale(item.id, self.session.stale_reason(item.id))

    def _on_result_added(self, item_id: str, _record: RunRecord) -> None:
        self.done(item_id)

    def _on_metrics_changed(self, item_id: str, metrics: ImageMetrics | None) -> None:
        if self.session.dataset is not None and self.model.has(item_id):
            self.model.set_metrics(item_id, metrics)
