"""Inspection tools on the main window: error review, dataset filter, worst-image stepping, run history,
run comparison and per-stage timings. `attach_inspection(window)` adds them; nothing here is needed to view.

They follow the session's events (`window.session`: dataset opened, current image, slide loaded, ROI,
result added; its `history` is the one store of runs) and read the window's public views: `dataset_panel`
(selection, rows, its sort/filter proxy), `panels` (views, class), `slide.vb`, `results`, `metrics`, `mask`.

"render" timing: the controller reports progress right before it hands a result to the window, which draws
it synchronously when it is the current image; the time from then until our own `result_added` handler
(connected after the window's) is the GUI's cost of showing the result.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF, QRegularExpression, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QGraphicsRectItem, QMenu, QWidget

from ..core.errors import SegScopeError
from ..core.metric_filter import METRICS
from ..core.review import ErrorRegion, error_regions, result_error_map, step, worst_first
from ..core.roi import Roi
from ..core.runs import RunRecord
from .compare_dialog import CompareDialog
from .review_panel import FilterBar, ReviewPanel
from .shortcuts import shortcut_action
from .timing_panel import TimingPanel

if TYPE_CHECKING:
    from .main_window import MainWindow

#: Context around a region when zooming to it: this share of its longer side, at least MIN_MARGIN pixels.
ZOOM_MARGIN = 0.5
MIN_MARGIN = 16


def zoom_rect(box: Roi) -> QRectF:
    """The slide rectangle shown when zooming to an error region's box."""
    margin = max(MIN_MARGIN, ZOOM_MARGIN * max(box.width, box.height))
    return QRectF(box.x0 - margin, box.y0 - margin, box.width + 2 * margin, box.height + 2 * margin)


class Inspection(QObject):
    """The inspection tools of one main window; see the module docstring for what it connects to."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.history = window.session.history  # the session's one store of runs
        self.compare_dialog: CompareDialog | None = None
        self._result_arrived = 0.0
        self._review_key: tuple | None = None
        self._review_refs: tuple = ()  # keeps the keyed objects alive so their ids stay theirs
        self._filter_pattern = ""

        self.review = ReviewPanel()
        self.timing = TimingPanel(self.history)
        self.filter_bar = FilterBar()
        window.dataset_panel.insert_widget(2, self.filter_bar)  # between the path and the table
        self.review_dock = self._dock("Review", self.review, window.metrics_dock)
        self.timing_dock = self._dock("Timing", self.timing, window.messages_dock)
        self.highlights = [self._highlight(view) for view in (*window.panels.views(), window.slide.vb)]

        self.next_worst_action = self._action("Next worst", "next_worst",
                                              "Next image in worst-first order (by the Review metric)",
                                              lambda: self.step_worst(1))
        self.prev_worst_action = self._action("Previous worst", "prev_worst",
                                              "Previous image in worst-first order (by the Review metric)",
                                              lambda: self.step_worst(-1))
        self.compare_action = self._action("&Compare runs…", "compare_runs",
                                           "Compare two runs of the current image", self.open_compare)
        self.review.prev_button.setDefaultAction(self.prev_worst_action)
        self.review.next_button.setDefaultAction(self.next_worst_action)
        self._build_menu()

        self._review_timer = QTimer(self, singleShot=True, interval=0)
        self._review_timer.timeout.connect(self.refresh_review)
        self._filter_timer = QTimer(self, singleShot=True, interval=50)  # a batch updates many rows at once
        self._filter_timer.timeout.connect(self.apply_filter)
        self._timing_timer = QTimer(self, singleShot=True, interval=50)
        self._timing_timer.timeout.connect(self.refresh_timing)
        self._wire()

    # ------------------------------------------------------------------------------------------ building
    def _dock(self, title: str, widget: QWidget, tab_with: QDockWidget) -> QDockWidget:
        window = self.window
        dock = QDockWidget(title, window)
        dock.setObjectName(f"dock_{title.lower()}")
        dock.setWidget(widget)
        if not window.restoreDockWidget(dock):  # placed as the user left it last time, else tabbed
            window.tabifyDockWidget(tab_with, dock)
            tab_with.raise_()
        return dock

    def _action(self, text: str, action_id: str, tip: str, slot) -> QAction:
        return shortcut_action(self.window, text, action_id, tip, slot)

    def _build_menu(self) -> None:
        bar = self.window.menuBar()
        menu = QMenu("&Inspect", bar)
        menus = bar.actions()
        if menus:
            bar.insertMenu(menus[-1], menu)  # before Help, the last menu
        else:
            bar.addMenu(menu)
        for action in (self.prev_worst_action, self.next_worst_action, None, self.compare_action, None,
                       self.review_dock.toggleViewAction(), self.timing_dock.toggleViewAction()):
            menu.addAction(action) if action else menu.addSeparator()
        self.menu = menu

    @staticmethod
    def _highlight(view: pg.ViewBox) -> QGraphicsRectItem:
        item = QGraphicsRectItem()
        item.setPen(pg.mkPen((255, 255, 255), width=2, style=Qt.PenStyle.DashLine))
        item.setZValue(20)
        item.hide()
        view.addItem(item, ignoreBounds=True)
        return item

    def _wire(self) -> None:
        w = self.window
        w.controller.progress.connect(self._on_progress)
        events = w.session.events
        events.result_added.connect(self._on_result_added)
        events.dataset_opened.connect(self._on_dataset_opened)
        events.current_changed.connect(lambda _item: (self._review_timer.start(), self._timing_timer.start()))
        events.slide_loaded.connect(lambda _item: self._review_timer.start())
        events.roi_changed.connect(lambda _id, _roi: self._review_timer.start())
        w.panels.class_combo.currentIndexChanged.connect(lambda _index: self._review_timer.start())
        self.review_dock.visibilityChanged.connect(lambda visible: visible and self._review_timer.start())
        self.review.regionActivated.connect(self.zoom_to)
        self.filter_bar.changed.connect(lambda _f: self.apply_filter())
        self.timing.message.connect(w.messages.add)

    # ------------------------------------------------------------------------------------- run history
    def _on_progress(self, *_args) -> None:
        self._result_arrived = time.perf_counter()

    def _on_dataset_opened(self, _dataset: object) -> None:
        """A new dataset starts unfiltered (the session keeps or drops its runs)."""
        self.filter_bar.clear()
        self._history_changed()

    def _on_result_added(self, item_id: str, record: RunRecord) -> None:
        w = self.window
        if w.current is not None and w.current.id == item_id and w.slide_ready():  # the window drew it
            record.timings["render"] = time.perf_counter() - self._result_arrived
        self._review_timer.start()
        self._filter_timer.start()
        self._history_changed()

    def _history_changed(self) -> None:
        self._timing_timer.start()
        if self.compare_dialog is not None and self.compare_dialog.isVisible():
            self.compare_dialog.reload()

    def refresh_timing(self) -> None:
        self.timing.refresh(self.window.current.id if self.window.current is not None else None)

    def open_compare(self) -> CompareDialog:
        """Show the comparison dialog on the current image's runs."""
        current = self.window.current.id if self.window.current is not None else None
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self.history, current, self.window)
        else:
            self.compare_dialog.reload(current)
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        return self.compare_dialog

    # ------------------------------------------------------------------------------------------ review
    def refresh_review(self, force: bool = False) -> None:
        """Recompute the error map of the result on the panels (skipped while the Review dock is hidden);
        `force` after the ground truth changed in place."""
        w = self.window
        if not self.review_dock.isVisible():
            self._review_key = None
            return
        item_id = w.shown_id if w.current is not None and w.shown_id == w.current.id else None
        result = w.results.get(item_id) if item_id is not None and w.panels.panel_arrays() else None
        positive = w.panels.current_class()
        key_ = (item_id, id(result), id(w.mask), positive)
        if key_ == self._review_key and not force:
            return
        self._review_key, self._review_refs = key_, (result, w.mask)
        for item in self.highlights:
            item.hide()
        if result is None:
            self.review.show_errors(None, "Run an image that has a ground-truth mask to review its errors")
            return
        if w.mask is None:
            self.review.show_errors(None, f"{item_id} has no ground-truth mask: nothing to review")
            return
        try:
            errors = result_error_map(result, w.mask, positive)
        except SegScopeError as exc:
            self.review.show_errors(None, f"{item_id}: {exc}")
            return
        self.review.show_errors(errors, regions=error_regions(errors), class_name=w.panels.class_combo.currentText())

    def zoom_to(self, region: ErrorRegion) -> None:
        """Zoom the linked result panels and the slide view to an error region, outlined."""
        rect = zoom_rect(region.box)
        self.window.panels.views()[0].setRange(rect, padding=0)  # the other panels are linked to it
        self.window.slide.vb.setRange(rect, padding=0)
        box = region.box
        for item in self.highlights:
            item.setRect(QRectF(box.x0, box.y0, box.width, box.height))
            item.show()

    def step_worst(self, offset: int) -> str | None:
        """Select the image `offset` places from the current one in worst-first order of the chosen metric,
        among the images the table shows that have that metric; returns its id."""
        w = self.window
        metric = self.review.metric()
        values: dict[str, float | None] = {}
        for item_id in w.dataset_panel.visible_order():
            metrics = w.metrics.get(item_id)
            value = getattr(metrics, metric) if metrics is not None else None
            if value is not None and not math.isnan(value):
                values[item_id] = value
        order = worst_first(values)
        target = step(order, w.current.id if w.current is not None else None, offset)
        if target is None:
            w.statusBar().showMessage("No image has metrics yet: run the dataset first", 4000)
            return None
        if w.current is None or target != w.current.id:
            w.dataset_panel.select_item(target)
        w.statusBar().showMessage(f"Worst {order.index(target) + 1} of {len(order)} by {METRICS[metric]}: "
                                  f"{target} ({values[target]:.4f})", 4000)
        return target

    def apply_filter(self) -> None:
        """Show only the rows matching the filter box (through the table proxy's id filter)."""
        w = self.window
        metric_filter = self.filter_bar.filter
        rows = w.dataset_panel.model.rows
        if metric_filter is None:
            pattern, shown = "", len(rows)
        else:
            ids = [r.item_id for r in rows if metric_filter.matches(r.metrics)]
            pattern = "^(?:" + "|".join(QRegularExpression.escape(i) for i in ids) + ")$" if ids else "(?!)"
            shown = len(ids)
        self.filter_bar.set_count(shown, len(rows), metric_filter is not None)
        if pattern != self._filter_pattern:
            self._filter_pattern = pattern
            proxy = w.dataset_panel.proxy
            proxy.setFilterKeyColumn(0)
            proxy.setFilterRegularExpression(QRegularExpression(pattern))


def attach_inspection(window: MainWindow) -> Inspection:
    """Add the Review and Timing docks, the dataset filter, the Inspect menu and its keys to `window`."""
    return Inspection(window)
