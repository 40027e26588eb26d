"""Where the metrics are shown, as a view of the session's scoring: the current image's in the Metrics dock
and the toolbar, the dataset means in the Metrics dock and the status bar, the ranking metric (picked in
the dataset panel, owned by the session) in the table and the histogram; each re-scoring (a run, an edit, a
save, a discard) updates them, and while the numbers on screen do not answer for the image (the ROI moved
since the run, another model is open, the edited mask is being re-scored) every one of them says so."""

from __future__ import annotations

from ..core.metrics import catalogue
from ..core.metrics.catalogue import Metric
from ..core.metrics.scores import ImageMetrics
from ..core.session.session import Session
from .dataset_panel import DatasetPanel
from .main_menus import MainActions
from .metrics_panel import MetricsPanel
from .status_labels import StatusLabels

#: The note beside stale numbers, by `Session.stale_reason` (and while a re-score runs).
STALE_NOTES = {"ROI changed": "ROI changed since this run: these numbers are of the old ROI — run again",
               "another model": "computed by another model than the one open — run again"}
RESCORING = "re-scoring the edited mask…"


class MetricsDisplay:
    def __init__(self, session: Session, panel: MetricsPanel, actions: MainActions, labels: StatusLabels,
                 dataset_panel: DatasetPanel) -> None:
        self.session, self.panel, self.actions, self.labels = session, panel, actions, labels
        self.dataset_panel = dataset_panel
        self._reason = ""
        self._rescoring = False
        session.events.metrics_changed.connect(self._on_metrics_changed)
        session.events.metrics_stale.connect(self._on_metrics_stale)
        session.events.ranking_changed.connect(self._on_ranking_changed)
        dataset_panel.rankingChosen.connect(session.set_ranking)

    def show(self, metrics: ImageMetrics | None) -> None:
        """The current image's metrics (None: none to show)."""
        self.panel.show_metrics(metrics, self.session.class_names)
        self.actions.show_dice(metrics)
        current = self.session.current
        self._rescoring = current is not None and self.session.metrics_stale(current.id)
        self._mark()

    def set_stale(self, reason: str) -> None:
        """Mark every metric display while the result shown no longer answers for the image ("": it does)."""
        self._reason = reason
        self._mark()

    def _mark(self) -> None:
        note = STALE_NOTES.get(self._reason, "") or (RESCORING if self._rescoring else "")
        self.panel.set_note(note)
        self.actions.mark_dice(note)

    def _is_current(self, item_id: str) -> bool:
        current = self.session.current
        return current is not None and current.id == item_id

    def _on_metrics_stale(self, item_id: str) -> None:
        if self._is_current(item_id):
            self._rescoring = True
            self._mark()

    def offer_rankings(self) -> None:
        """The model's classes are known (a backend opened): offer its per-class metrics to rank by."""
        session = self.session
        self.dataset_panel.set_ranking_choices(catalogue.metrics(session.class_names), session.ranking)
        session.set_ranking(session.ranking.name)  # its label names the class now

    def update_means(self) -> None:
        summary = self.session.summary()
        ranking = self.session.ranking
        self.panel.set_dataset_values(ranking, summary.values(ranking))
        self.labels.show_means(summary)

    def _on_ranking_changed(self, metric: Metric) -> None:
        self.dataset_panel.show_ranking(metric)
        self.update_means()
        current = self.session.current
        if current is not None and self.session.has_metrics(current.id):
            self.show(self.session.known_metrics(current.id))

    def _on_metrics_changed(self, item_id: str, metrics: ImageMetrics | None) -> None:
        session = self.session
        if session.dataset is None or not any(item.id == item_id for item in session.dataset.items):
            return
        self.update_means()
        if self._is_current(item_id):
            self.show(metrics)
