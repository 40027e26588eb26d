"""Where the metrics are shown, as a view of the session: the image on screen's numbers in the Metrics dock and
the toolbar's headline (`core.session.views.headline`: the same `ItemView` its row shows, so they cannot
disagree), the dataset means in the Metrics dock and the status bar, the ranking metric (picked in the dataset
panel, owned by the session) in the table and the histogram. While the numbers on screen do not answer for the
image (the ROI moved since the run, another model is open, the mask or the result changed and the fresh numbers
are being scored) every one of them says so. The means and the histogram follow every image run so far: they are
drawn at a bounded rate (`gui/runtime/coalesce.py`), so a Run all announcing hundreds of results a second redraws the
status bar's means (kept by the session as images are scored) four times a second and the histogram (every
image's value, kept by the session in an array, and a plot to repaint) twice, only while the Metrics dock is
on screen and its values or metric changed since it last drew; the headline follows the image on screen's few
events at once."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QDockWidget

from ...core.dataset.dataset import DatasetItem
from ...core.metrics import catalogue
from ...core.metrics.catalogue import Metric
from ...core.session.answers import WHOLE_SLIDE
from ...core.session.session import Session
from ...core.session.views import headline
from ..docks.dataset_panel import DatasetPanel
from ..docks.metrics_panel import MetricsPanel
from ..runtime.coalesce import Coalescer
from ..widgets.docking import dock_seen
from .main_menus import MainActions
from .status_labels import STATUS_MS, StatusLabels

#: The histogram reads every image's value and repaints its plot: while results keep coming it redraws at most
#: this often (milliseconds).
HISTOGRAM_MS = 500


class MetricsDisplay:
    def __init__(self, session: Session, panel: MetricsPanel, dock: QDockWidget, actions: MainActions,
                 labels: StatusLabels, dataset_panel: DatasetPanel) -> None:
        self.session, self.panel, self.dock, self.actions, self.labels = session, panel, dock, actions, labels
        self.dataset_panel = dataset_panel
        self.means = Coalescer(self.show_means, STATUS_MS, panel)
        self.histogram = Coalescer(self.show_histogram, HISTOGRAM_MS, panel)
        self._histogram_of: tuple[object, ...] | None = None  # what the histogram shows (`_histogram_key`)
        dock.visibilityChanged.connect(lambda visible: self.histogram.request() if visible else None)
        events = session.events
        events.item_changed.connect(lambda changed: self._on_items_changed((changed.item_id,)))
        events.items_changed.connect(lambda changed: self._on_items_changed(changed.item_ids))
        events.current.connect(lambda _item, _old: self.show())
        events.dataset.connect(lambda _dataset, _old: self._dataset_changed())
        events.ranking.connect(self._on_ranking_changed)
        if session.backend is not None:
            session.backend.events.opened.connect(lambda _opened: self.offer_rankings())
        dataset_panel.rankingChosen.connect(session.set_ranking)
        dataset_panel.worstFirstAsked.connect(lambda: dataset_panel.sort_worst_first(session.ranking))

    def show(self) -> None:
        """The image on screen's numbers, marked while they do not answer for it, and marked as the whole slide's
        where its whole-slide run answers (the panels draw the part under the ROI; the numbers are the slide's)."""
        view = headline(self.session)
        metrics = view.metrics if view is not None else None
        self.panel.show_metrics(metrics, self.session.ranking, self.session.class_names)
        scope = WHOLE_SLIDE if view is not None and view.answer is not None and view.answer.source == WHOLE_SLIDE \
            else ""
        self.actions.show_dice(metrics, scope)
        self.panel.set_scope("Whole slide: the slide's own numbers (the panels show the part under the ROI)"
                             if scope else "")
        note = view.note if view is not None else ""
        self.panel.set_note(note)
        self.actions.mark_dice(note)

    def _on_items_changed(self, item_ids: tuple[str, ...]) -> None:
        self._dataset_changed()
        current: DatasetItem | None = self.session.current
        if current is not None and current.id in item_ids:
            self.show()

    def offer_rankings(self) -> None:
        """The model's classes are known (a backend opened): offer its per-class metrics to rank by."""
        session = self.session
        self.dataset_panel.set_ranking_choices(catalogue.metrics(session.class_names), session.ranking)
        session.set_ranking(session.ranking.name)  # its label names the class now

    def _dataset_changed(self) -> None:
        self.means.request()
        self.histogram.request()

    def show_means(self) -> None:
        """The status bar's means over the images run so far (the session's running summary: no walk)."""
        self.labels.show_means(self.session.running.means())

    def show_histogram(self) -> None:
        """The histogram of the ranking metric over the images run so far: drawn while the Metrics dock is on
        screen (once it comes back otherwise), and only when the values or the metric changed since it drew
        (binning every image's value is a NumPy pass over them)."""
        key = self._histogram_key()
        if key == self._histogram_of or not dock_seen(self.dock):
            return
        self._histogram_of = key
        ranking = self.session.ranking
        running = self.session.running
        self.panel.set_dataset_values(ranking, running.values(ranking), running.aggregate(ranking))

    def _histogram_key(self) -> tuple[object, ...]:
        """What the histogram draws from: the session's running summary as of its last change, and the metric."""
        ranking = self.session.ranking
        return self.session.running.changes, ranking, ranking.label

    def _on_ranking_changed(self, metric: Metric, _old: Any) -> None:
        self.dataset_panel.show_ranking(metric)
        self.histogram.flush()  # (the user's choice: drawn at once)
        self.show()
