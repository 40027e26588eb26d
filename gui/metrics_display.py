"""Where the metrics are shown, as a view of the session's scoring: the current image's in the Metrics dock
and the toolbar, the dataset means in the Metrics dock and the status bar; each re-scoring (a run, an edit,
a save, a discard) updates them, so no stale number stays on screen."""

from __future__ import annotations

from ..core.metrics import ImageMetrics
from ..core.session import Session
from .main_menus import MainActions
from .metrics_panel import MetricsPanel
from .status_labels import StatusLabels


class MetricsDisplay:
    def __init__(self, session: Session, panel: MetricsPanel, actions: MainActions, labels: StatusLabels) -> None:
        self.session, self.panel, self.actions, self.labels = session, panel, actions, labels
        session.events.metrics_changed.connect(self._on_metrics_changed)

    def show(self, metrics: ImageMetrics | None) -> None:
        """The current image's metrics (None: none to show)."""
        capabilities = self.session.capabilities
        self.panel.show_metrics(metrics, capabilities.class_names if capabilities else ())
        self.actions.show_dice(metrics)

    def update_means(self) -> None:
        summary = self.session.summary()
        self.panel.set_dataset_dice(summary.soft_dice)
        self.labels.show_means(summary)

    def _on_metrics_changed(self, item_id: str, metrics: ImageMetrics | None) -> None:
        session = self.session
        if session.dataset is None or not any(item.id == item_id for item in session.dataset.items):
            return
        self.update_means()
        if session.current is not None and session.current.id == item_id:
            self.show(metrics)
