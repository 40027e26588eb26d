"""Inspection tools: error review, dataset filter, worst-image stepping, run history, run comparison and
per-stage timings; nothing here is needed to view.

`Inspection` is a view of the session: it follows the session's events (dataset opened, current image,
slide loaded, ROI, result added; its `history` is the one store of runs) and drives the widgets it is given:
the dataset panel (selection, rows, its sort/filter proxy), the result panels (views, class) and the slide
view (zoom). Its docks, filter bar and Inspect menu are placed by the window; it reports through signals.

"render" timing: the controller reports progress (`result_arriving`) right before it hands a result to the
window, which draws it when it is the current image (its crops made on a worker); the time from then until
the panels say they drew it is what the GUI adds to the result. Only a single run is timed: during Run all a
result waits behind the other images' (their rows, metrics and review), which says nothing about drawing.
"""

from __future__ import annotations

import time

import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QGraphicsRectItem, QMenu, QWidget

from ...core import wording
from ...core.metrics.review import ErrorMap, ErrorRegion, error_regions, result_error_map, step, worst_first
from ...core.roi import Roi
from ...core.session.session import Session
from ...core.session.views import headline, review_input
from ..canvas.result_panels import ResultPanels
from ..canvas.slide_view import SlideView
from ..dialogs.compare_dialog import CompareDialog
from ..docks.dataset_panel import DatasetPanel
from ..docks.review_panel import FilterBar, ReviewPanel
from ..docks.timing_panel import TimingPanel
from ..runtime.coalesce import Coalescer
from ..runtime.jobs import Jobs
from ..widgets.docking import dock_seen, make_dock
from ..widgets.shortcuts import shortcut_action
from .main_menus import add_entries

#: The views that read every run (the Timing dock's table, the comparison dialog's lists) redraw at most this
#: often while runs keep coming (milliseconds).
HISTORY_MS = 1000
#: Context around a region when zooming to it: this share of its longer side, at least MIN_MARGIN pixels.
ZOOM_MARGIN = 0.5
MIN_MARGIN = 16


def zoom_rect(box: Roi) -> QRectF:
    """The slide rectangle shown when zooming to an error region's box."""
    margin = max(MIN_MARGIN, ZOOM_MARGIN * max(box.width, box.height))
    return QRectF(box.x0 - margin, box.y0 - margin, box.width + 2 * margin, box.height + 2 * margin)


class Inspection(QObject):
    """The inspection tools of one window (`window.inspection`); see the module docstring."""

    #: (level, text) for the message area
    message = Signal(str, str)
    #: (text, milliseconds) for the status bar
    note = Signal(str, int)

    def __init__(self, session: Session, dataset_panel: DatasetPanel, panels: ResultPanels, slide: SlideView,
                 jobs: Jobs, host: QWidget) -> None:
        super().__init__(host)
        self.session, self.dataset_panel, self.panels, self.slide, self.jobs, self.host = (
            session, dataset_panel, panels, slide, jobs, host)
        self.history = session.history  # the session's one store of runs
        self.compare_dialog: CompareDialog | None = None
        self._result_arrived = 0.0
        self._review_key: tuple | None = None
        self._review_refs: tuple = ()  # keeps the keyed objects alive so their ids stay theirs

        self.review = ReviewPanel()
        self.timing = TimingPanel(self.history)
        self.filter_bar = FilterBar()  # the window puts it between the dataset's path and its table
        self.review_dock = make_dock(host, "Error regions", self.review)
        self.timing_dock = make_dock(host, "Timing", self.timing)
        self.highlights = [self._highlight(view) for view in (*panels.views(), slide.vb)]

        def a(text: str, action_id: str, tip: str, slot) -> QAction:
            return shortcut_action(host, text, action_id, tip, slot)

        self.next_worst_action = a("Next worst", "next_worst", "Next image in worst-first order (by the ranking "
                                   "metric)", lambda: self.step_worst(1))
        self.prev_worst_action = a("Previous worst", "prev_worst", "Previous image in worst-first order (by the "
                                   "ranking metric)", lambda: self.step_worst(-1))
        self.compare_action = a("&Compare runs…", "compare_runs", "Compare two runs of the current image",
                                self.open_compare)
        self.review.prev_button.setDefaultAction(self.prev_worst_action)
        self.review.next_button.setDefaultAction(self.next_worst_action)
        for button, arrow in ((self.review.prev_button, Qt.ArrowType.LeftArrow),
                              (self.review.next_button, Qt.ArrowType.RightArrow)):
            button.setArrowType(arrow)  # an arrow, its action's name on hover: the dock stays narrow
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.menu = QMenu("&Inspect", host)
        add_entries(self.menu, (self.prev_worst_action, self.next_worst_action, None, self.compare_action, None,
                                self.review_dock.toggleViewAction(), self.timing_dock.toggleViewAction()))

        self._review_timer = QTimer(self, singleShot=True, interval=0)
        self._review_timer.timeout.connect(self.refresh_review)
        self.timing_image = Coalescer(self.show_timing_image, parent=self)  # another image: its timeline
        self.history_refresh = Coalescer(self._draw_history, HISTORY_MS, self)  # new runs: the dataset's table
        #: (what it is of, the worst-first order of the rows shown, their values): `_worst_first`
        self._worst: tuple[tuple[object, ...], list[str], dict[str, float | None]] | None = None
        self._wire()

    @staticmethod
    def _highlight(view: pg.ViewBox) -> QGraphicsRectItem:
        item = QGraphicsRectItem()
        item.setPen(pg.mkPen((255, 255, 255), width=2, style=Qt.PenStyle.DashLine))
        item.setZValue(20)
        item.hide()
        view.addItem(item, ignoreBounds=True)
        return item

    def _wire(self) -> None:
        events = self.session.events
        events.result_added.connect(lambda added: self._results_changed(added.item_id))
        events.run_timed.connect(lambda _timed: self.history_refresh.request())
        events.slide_run_added.connect(lambda added: self._results_changed(added.item_id))
        events.dataset.connect(self._on_dataset_opened)
        events.current.connect(self._on_current)
        events.document.connect(lambda _document, _old: self._review_timer.start())
        events.roi_changed.connect(lambda _changed: self._review_timer.start())
        events.shown_class.connect(lambda _index, _old: self._review_timer.start())
        self.panels.class_combo.currentIndexChanged.connect(lambda _index: self._class_shown())
        self.panels.shown.connect(self._on_panels_shown)
        self.review_dock.visibilityChanged.connect(lambda visible: visible and self._review_timer.start())
        self.timing_dock.visibilityChanged.connect(self._on_timing_visible)
        self.review.regionActivated.connect(self.zoom_to)
        self.filter_bar.changed.connect(lambda _f: self.apply_filter())
        self.dataset_panel.model.arranged.connect(self._show_count)
        self.dataset_panel.model.arranged.connect(self._forget_worst)
        self.timing.message.connect(self.message)

    def _on_current(self, _item: object, _old: object) -> None:
        self._review_timer.start()
        self.timing_image.request()

    def _on_timing_visible(self, visible: bool) -> None:
        if visible:
            self.refresh_timing()

    def _shown_id(self) -> str | None:
        """The current image once its slide is shown."""
        session = self.session
        return session.current.id if session.ready and session.current is not None else None

    # ------------------------------------------------------------------------------------- run history
    def result_arriving(self, done: int, total: int, _eta: float = 0.0) -> None:
        """The controller's progress: a result is about to be handed to the window (timed for a single run)."""
        self._result_arrived = time.perf_counter() if done == total == 1 else 0.0

    def _on_dataset_opened(self, _dataset: object, _old: object) -> None:
        """A new dataset starts unfiltered (the session keeps or drops its runs)."""
        self.filter_bar.clear()
        self.history_refresh.request()

    def _class_shown(self) -> None:
        """The class the panels show (picked, or the one they fall back to for a result of fewer classes) is the
        session's, which the review maps."""
        self.session.set_shown_class(self.panels.current_class())

    def _on_panels_shown(self) -> None:
        """The panels drew a result: the review follows, and a run's result gets its "render" time."""
        self._class_shown()
        self._review_timer.start()
        item_id, result = self._shown_id(), self.panels.result
        record = self.session.record(item_id) if item_id is not None else None
        if record is not None and record.result is result and self._result_arrived and \
                self.session.add_timing(record, "render", time.perf_counter() - self._result_arrived):
            self._result_arrived = 0.0  # (the history follows the session's run_timed)

    def _results_changed(self, item_id: str) -> None:
        """A run of `item_id` is in: the review follows when it is the image on screen's, the history's views
        at a bounded rate."""
        current = self.session.current
        if current is not None and current.id == item_id:
            self._review_timer.start()
        self.history_refresh.request()

    def _draw_history(self) -> None:
        """What reads every run: the Timing dock's table, the comparison dialog's lists (those on screen)."""
        self.refresh_timing()
        if self.compare_dialog is not None and self.compare_dialog.isVisible():
            self.compare_dialog.reload()

    def _current_id(self) -> str | None:
        return self.session.current.id if self.session.current is not None else None

    def refresh_timing(self) -> None:
        """The Timing dock's table and timeline (nothing while it is not on screen: it catches up when shown)."""
        if dock_seen(self.timing_dock):
            self.timing.refresh(self._current_id())

    def show_timing_image(self) -> None:
        """The Timing dock's timeline of the image on screen (its table is of the dataset: as it was)."""
        if dock_seen(self.timing_dock):
            self.timing.show_image(self._current_id())

    def open_compare(self) -> CompareDialog:
        """Show the comparison dialog on the current image's runs."""
        current = self.session.current.id if self.session.current is not None else None
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self.history, self.jobs, current, self.host)
        else:
            self.compare_dialog.reload(current)
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        return self.compare_dialog

    # ------------------------------------------------------------------------------------------ review
    def refresh_review(self, force: bool = False) -> None:
        """Recompute the error map of what answers for the image on screen (its run, or its whole-slide run's part)
        against its mask on screen, what its numbers are of, on a worker (nothing while the Error regions dock is not on
        screen: it catches up when shown); `force` after the ground truth changed in place."""
        if not dock_seen(self.review_dock):
            self._review_key = None
            return
        item_id = self._shown_id()
        view, shown = headline(self.session), review_input(self.session)
        result = view.answer.result if view is not None and view.answer is not None and item_id is not None else None
        mask = shown[1] if shown is not None and item_id is not None else None
        positive = self.session.shown_class
        key_ = (item_id, id(result), id(mask), positive)
        if key_ == self._review_key and not force:
            return
        self._review_key, self._review_refs = key_, (result, mask)
        for item in self.highlights:
            item.hide()
        if result is None or mask is None:
            self.jobs.cancel("review")
            self.review.show_errors(None, "Run an image that has a ground-truth mask to review its errors"
                                    if result is None else f"{item_id} has no ground-truth mask: nothing to review")
            return
        class_name = wording.class_name(self.session.class_names, positive)
        assert item_id is not None  # (a result is shown)
        self.review.set_computing(item_id)

        def review() -> tuple[ErrorMap, list[ErrorRegion], dict[str, int]]:
            errors = result_error_map(result, mask, positive)  # an edit meanwhile asks again (force)
            return errors, error_regions(errors), errors.counts()

        self.jobs.submit("review", review,
                         lambda found: self.review.show_errors(found[0], regions=found[1], class_name=class_name,
                                                               counts=found[2]),
                         lambda text, _details: self.review.show_errors(None, f"{item_id}: {text}"))

    def zoom_to(self, region: ErrorRegion) -> None:
        """Zoom the linked result panels and the slide view to an error region, outlined."""
        self.zoom_to_box(region.box)

    def zoom_to_box(self, box: Roi) -> None:
        """Zoom the linked result panels and the slide view to a box (slide pixels), outlined."""
        rect = zoom_rect(box)
        self.panels.views()[0].setRange(rect, padding=0)  # the other panels are linked to it
        self.slide.vb.setRange(rect, padding=0)
        for item in self.highlights:
            item.setRect(QRectF(box.x0, box.y0, box.width, box.height))
            item.show()

    def step_worst(self, offset: int) -> str | None:
        """Select the image `offset` places from the current one in worst-first order of the session's ranking
        metric, among the images the table shows that were run (those where it is n/a last); returns its id."""
        current = self.session.current
        metric = self.session.ranking
        order, values = self._worst_first()
        target = step(order, current.id if current is not None else None, offset)
        if target is None:
            self.note.emit("No image has metrics yet: run the dataset first", 4000)
            return None
        if current is None or target != current.id:
            self.dataset_panel.select_item(target)
        self.note.emit(f"Worst {order.index(target) + 1} of {len(order)} by {metric.label}: "
                       f"{target} ({metric.text(values[target])})", 4000)
        return target

    def _worst_first(self) -> tuple[list[str], dict[str, float | None]]:
        """The rows shown that were run, worst first, and their ranking values: kept until a value (the session's
        running summary moved), the metric or the rows shown (`arranged`) change, so holding the key down steps
        without sorting the dataset again on every press."""
        metric = self.session.ranking
        of = (self.session.running.changes, metric, metric.label)
        if self._worst is None or self._worst[0] != of:
            values = self.session.ranking_values(self.dataset_panel.visible_order())
            self._worst = (of, worst_first(values, metric), values)
        return self._worst[1], self._worst[2]

    def _forget_worst(self) -> None:
        self._worst = None

    def apply_filter(self) -> None:
        """Show only the rows matching the filter box (the table keeps each row's answer and asks again only of
        the rows that change)."""
        metric_filter = self.filter_bar.filter
        self.dataset_panel.model.set_filter(None if metric_filter is None else lambda row: metric_filter.matches(
            row.metrics))

    def _show_count(self) -> None:
        """How many rows the filter shows, of how many."""
        model = self.dataset_panel.model
        self.filter_bar.set_count(model.rowCount(), model.total, self.filter_bar.filter is not None)

