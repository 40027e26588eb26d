"""The main window's actions (keys from the shared table in `shortcuts.py`), its menus and its toolbar.

A new command is one `_action` line in `MainActions.__init__` plus its place in a menu or the toolbar; what
it does is the viewer's commands' (`gui/shell/commands.py`, bound by `bind`) or the widget's it drives. Which actions
can be taken follows the session (`core.session.views.actions`), never set from outside: again after each event
it derives from, at once, except for the results a run brings, which are followed at a bounded rate
(`gui/runtime/coalesce.py`), as the batch's progress is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow, QMenu, QMessageBox, QProgressBar, QToolBar

from ...core.metrics import catalogue
from ...core.metrics.scores import ImageMetrics
from ...core.session.session import Session
from ...core.session.views import actions
from ...core.version import segscope_version
from ..canvas.result_panels import ResultPanels
from ..canvas.slide_view import SlideView
from ..dialogs.model_dialog import add_open_model_action
from ..docks.dataset_panel import DatasetPanel
from ..runtime.coalesce import Coalescer
from ..runtime.run_controller import RunController
from ..widgets.shortcuts import ShortcutsDialog, key, shortcut_action, with_key
from .roi_control import RoiControl
from .status_labels import duration

#: A progress bar repaints at once on every value it is given: during a batch it is given one at most this often
#: (milliseconds).
PROGRESS_MS = 250
DICE_TIP = "The current image's soft Dice (the original script's number), hard Dice and IoU"


class MainCommands(Protocol):
    """What the viewer's commands do for these actions (the rest go straight to the widget they drive)."""

    def run_current(self) -> bool: ...
    def run_all(self) -> bool: ...
    def run_whole_slide(self) -> bool: ...
    def export(self) -> None: ...
    def cancel_export(self) -> None: ...
    def choose_backend(self) -> None: ...
    def choose_slide_scale(self) -> None: ...


def add_entries(target: QMenu | QToolBar, entries: Iterable[QAction | None]) -> None:
    """Add actions in order; None is a separator."""
    for action in entries:
        if action is None:
            target.addSeparator()
        else:
            target.addAction(action)


class MainActions:
    """The actions of one main window (`window.main_actions`), with its toolbar and menus."""

    def __init__(self, window: QMainWindow, session: Session, commands: MainCommands, dataset_panel: DatasetPanel,
                 slide: SlideView, panels: ResultPanels, controller: RunController, roi: RoiControl,
                 layout: tuple[Callable[[], object], Callable[[], object]]) -> None:
        """`layout`: what Reset layout and Messages do (the window's docks)."""
        self.window, self.panels, self.session = window, panels, session

        def a(text: str, action_id: str, tip: str, slot: Callable, checkable: bool = False) -> QAction:
            return shortcut_action(window, text, action_id, tip, slot, checkable)

        c = commands
        self.open_action = a("&Open dataset…", "open", "Open a dataset folder", dataset_panel.choose_folder)
        self.run_action = a("&Run", "run_current", "Run the current image with its ROI", c.run_current)
        self.run_all_action = a("Run &all", "run_all", "Run every image of the dataset", c.run_all)
        self.run_slide_action = a("Run &whole slide", "run_slide", "Run the current image's whole slide in tiles "
                                  "of the ROI's size, stitched into a heatmap over the slide; then any ROI shows "
                                  "its part without running", c.run_whole_slide)
        self.cancel_action = a("&Cancel", "cancel", "Stop the running inference", controller.cancel)
        self.export_action = a("&Export…", "export", "Export masks, heatmaps and metrics", c.export)
        self.cancel_export_action = a("Cancel e&xport", "cancel_export", "Stop the running export; its folder is "
                                      "left as it was", c.cancel_export)
        self.backend_action = a("&Backend…", "backend", "Choose the inference backend", c.choose_backend)
        self.next_action = a("Next image", "next_image", "Next image in the list",
                             lambda: dataset_panel.select_offset(1))
        self.prev_action = a("Previous image", "prev_image", "Previous image in the list",
                             lambda: dataset_panel.select_offset(-1))
        self.worst_action = a("Worst first", "worst_first", "Sort the list worst first by the ranking metric (picked "
                              "in the dataset panel)",
                              lambda: dataset_panel.worstFirstAsked.emit())
        self.slide_heatmap_action = a("Whole-slide &heatmap", "slide_heatmap", "Show the whole-slide run's "
                                      "foreground probability over the slide (after Run whole slide)",
                                      lambda on: slide.overlay.set_visible(heatmap=on), True)
        self.slide_seams_action = a("Whole-slide &seams", "slide_seams", "Show where overlapping tiles of the "
                                    "whole-slide run disagree (needs tiles that overlap)",
                                    lambda on: slide.overlay.set_visible(seams=on), True)
        self.slide_overlay = slide.overlay
        self.set_slide_overlay(False, False)
        self.slide_scale_action = QAction("Whole-slide output &scale…", window)
        self.slide_scale_action.triggered.connect(c.choose_slide_scale)
        self.slide_scale_action.setToolTip("The scale of Run whole slide's stitched result: automatic (the model's "
                                           "own, or what fits the memory bound) or one you choose")
        self.fit_action = a("&Fit slide", "fit", "Fit the whole slide in the view", slide.fit)
        self.one_action = a("Slide 1:1", "one_to_one", "One slide pixel per screen pixel", slide.one_to_one)
        self.square_action = a("&Square ROI", "roi_square", "Keep the ROI square", slide.set_square, True)
        self.square_action.toggled.connect(slide.square_check.setChecked)
        slide.square_check.toggled.connect(self.square_action.setChecked)
        self.reset_roi_action = a("&Reset ROI", "roi_reset", "Back to the default ROI", roi.reset)
        self.undo_roi_action = a("Undo ROI move", "roi_undo", "Put the last moved ROI back", roi.undo)
        self.redo_roi_action = a("Redo ROI move", "roi_redo", "Move the ROI again", roi.redo)
        self.reset_layout_action = a("Reset &layout", "reset_layout", "Put every dock back where it started",
                                     layout[0])
        self.messages_action = a("&Messages", "messages", "Show or hide the message area", layout[1])
        self.shortcuts_action = a("&Keyboard shortcuts", "shortcuts", "List every shortcut",
                                  lambda: ShortcutsDialog(window).exec())
        self.quit_action = a("&Quit", "quit", "Quit SegScope", window.close)
        # The result panels' own toggles get their keys from the shared table too.
        for action, action_id in ((panels.overlay_action, "overlay"), (panels.contour_action, "contours"),
                                  (panels.error_map_action, "error_map")):
            action.setShortcut(QKeySequence(key(action_id)))
            action.setToolTip(with_key(action.toolTip(), action_id))
            window.addAction(action)
        # What `actions` reads of the session: a user's step at once, the results a run brings at a bounded rate.
        self.enabled = Coalescer(self.update_enabled, parent=window)
        events = session.events
        for event in (events.dataset, events.current, events.document, events.exporting, events.roi_changed):
            event.connect(lambda *_args: self.update_enabled())
        for event in (events.result_added, events.slide_run_added):
            event.connect(lambda _added: self.enabled.request())
        session.review.parity.events.changed.connect(self.enabled.request)  # (a comparison holds the model's thread)
        if session.backend is not None:
            session.backend.events.all.connect(lambda _emission: self.update_enabled())
            session.backend.events.busy.connect(self._on_busy)
        self._progress: tuple[int, int, float] | None = None  # the newest, drawn at a bounded rate
        self.progress_refresh = Coalescer(self._draw_progress, PROGRESS_MS, window)
        controller.progress.connect(self.show_progress)

    # ------------------------------------------------------------------------------------------ toolbar
    def build_toolbar(self) -> QToolBar:
        bar = QToolBar("Main")
        bar.setObjectName("toolbar_main")
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        add_entries(bar, (self.open_action, None, self.run_action, self.run_all_action, self.run_slide_action,
                          self.cancel_action, None))
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%v / %m")
        self.progress.setToolTip("Progress of the running batch")
        self.eta_label = QLabel("")
        self.progress_action = bar.addWidget(self.progress)  # a toolbar widget is shown through its action
        self.progress_action.setVisible(False)
        bar.addWidget(self.eta_label)
        add_entries(bar, (None, self.export_action, self.backend_action, None))
        self.dice_label = QLabel("")
        self.dice_label.setToolTip(DICE_TIP)
        self.dice_label.setStyleSheet("font-weight: bold; padding: 0 8px;")
        bar.addWidget(self.dice_label)
        self.window.addToolBar(bar)
        return bar

    def set_slide_overlay(self, available: bool, seams: bool) -> None:
        """View > Whole-slide heatmap and seams: usable (ticked as last chosen) only while the shown slide has a
        whole-slide run (and, for seams, tiles that overlapped)."""
        overlay = self.slide_overlay
        for action, usable, shown in ((self.slide_heatmap_action, available, overlay.show_heatmap),
                                      (self.slide_seams_action, available and seams, overlay.show_seams)):
            action.setEnabled(usable)
            action.blockSignals(True)
            action.setChecked(usable and shown)
            action.blockSignals(False)

    def _on_busy(self, busy: bool, _old: bool) -> None:
        if not busy:
            self.end_batch()

    def show_progress(self, finished: int, total: int, eta: float) -> None:
        """The batch's progress (drawn soon: a progress bar repaints at once on every value it is given)."""
        self._progress = (finished, total, eta)
        self.progress_refresh.request()

    def _draw_progress(self) -> None:
        if self._progress is None:
            return
        (finished, total, eta), self._progress = self._progress, None
        if self.progress.maximum() != total:
            self.progress.setRange(0, total)
        self.progress_action.setVisible(total > 1)
        # setValue repaints the bar at once (the window flushed with it); with updates off it does not, and
        # turning them on again asks for the bar's repaint with the window's next update
        self.progress.setUpdatesEnabled(False)
        self.progress.setValue(finished)
        self.progress.setUpdatesEnabled(True)
        self.eta_label.setText("" if math.isnan(eta) or finished >= total else f"ETA {duration(eta)}")

    def end_batch(self) -> None:
        self._progress = None  # (a draw still due would show the bar again)
        self.progress_action.setVisible(False)
        self.eta_label.setText("")

    def show_dice(self, metrics: ImageMetrics | None, scope: str = "") -> None:
        """The image on screen's numbers; `scope` says what they are of when not the ROI ("whole slide")."""
        text = "" if metrics is None else catalogue.brief(catalogue.row_values(metrics))
        self.dice_label.setText(f"{text} ({scope})" if text and scope else text)

    def mark_dice(self, note: str) -> None:
        """Grey the headline out, with `note` as its tooltip, while it does not answer for the image."""
        self.dice_label.setEnabled(not note)
        self.dice_label.setToolTip(note or DICE_TIP)

    # -------------------------------------------------------------------------------------------- menus
    def build_menus(self, recent_menu: QMenu, docks: Iterable[QDockWidget],
                    report: Callable[[str, str], object]) -> None:
        """File, Run, View (with a toggle per dock in `docks`) and Help; other menus go between. `report(level,
        text)` takes what opening a model has to say."""
        menu = self.window.menuBar()
        file_menu = menu.addMenu("&File")
        file_menu.addAction(self.open_action)
        if self.session.backend is not None:
            add_open_model_action(self.window, file_menu, self.session.backend, report)
        file_menu.addMenu(recent_menu)
        add_entries(file_menu, (self.export_action, self.cancel_export_action, None, self.quit_action))
        run_menu = menu.addMenu("&Run")
        add_entries(run_menu, (self.run_action, self.run_all_action, self.run_slide_action, self.cancel_action, None,
                               self.slide_scale_action, self.backend_action))
        view_menu = menu.addMenu("&View")
        panels = self.panels
        add_entries(view_menu, (self.fit_action, self.one_action, self.square_action, self.reset_roi_action,
                                self.undo_roi_action, self.redo_roi_action, None, self.next_action,
                                self.prev_action, self.worst_action, None, panels.overlay_action,
                                panels.contour_action, panels.error_map_action, None, self.slide_heatmap_action,
                                self.slide_seams_action, None))
        for dock in docks:
            view_menu.addAction(dock.toggleViewAction())
        panels_menu = view_menu.addMenu("&Panels")  # the registered result views (core/views/)
        panels_menu.setToolTipsVisible(True)
        panels_menu.addActions(list(panels.extra.actions.values()))
        add_entries(view_menu, (None, self.reset_layout_action))
        self.view_menu = view_menu
        help_menu = menu.addMenu("&Help")
        help_menu.addAction(self.shortcuts_action)
        help_menu.addAction("&About SegScope", lambda: QMessageBox.about(
            self.window, "About SegScope", f"SegScope {segscope_version()}: inspect U-Net segmentations of MindX SDK "
            "streams, locally, on an Ascend host or over SSH."))

    def update_enabled(self) -> None:
        """Which actions can be taken now, as the session says (`core.session.views.actions`)."""
        can = actions(self.session)
        for action, enabled in ((self.run_action, can.run), (self.run_slide_action, can.run),
                                (self.run_all_action, can.run_all), (self.undo_roi_action, can.undo_roi),
                                (self.redo_roi_action, can.redo_roi), (self.cancel_action, can.cancel),
                                (self.backend_action, not can.cancel), (self.export_action, can.export),
                                (self.cancel_export_action, can.cancel_export)):
            action.setEnabled(enabled)


def insert_menu(window: QMainWindow, menu: QMenu, before_index: int) -> None:
    """Put `menu` before the menu bar's menu at `before_index` (negative: from the end), else at the end."""
    bar = window.menuBar()
    menus = bar.actions()
    if menus and -len(menus) <= before_index < len(menus):
        bar.insertMenu(menus[before_index], menu)
    else:
        bar.addMenu(menu)
