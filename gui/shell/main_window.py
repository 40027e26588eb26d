"""The main window: dataset list, slide with ROI, the three result panels, metrics, messages.

The window only builds and lays out. The state is the session's (`core.session`, Qt-free); every view follows its
events and derives what it shows from it (`core.session.views`), and what the user asks for goes through the
viewer's commands (`gui/shell/commands.py`) to the session's commands, whose jobs run on the window's one job runner
(`jobs`, gui/runtime/jobs.py): slides are opened on its slide lane and shown tile by tile (tiles read on its tile lane),
inference runs on its backend lane, and the rest (restoring a dataset's runs and edits, scoring, saving a mask,
exporting, the error review, run comparisons, whole-slide overlays) on its shared lane: the GUI thread only
draws. Every dock can be moved; the layout is remembered between runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDockWidget, QMainWindow, QWidget

from ...core.backend_choice import BackendChoice
from ...core.backends.base import Capabilities
from ...core.cache.settings import decoded_store
from ...core.dataset.dataset import Dataset, DatasetItem
from ...core.session.backend_state import BackendState
from ...core.session.runs import compare_runs
from ...core.session.session import Session
from ..canvas.open_slide import OpenSlide
from ..canvas.result_panels import ResultPanels
from ..canvas.slide_view import SlideView
from ..docks.dataset_panel import DatasetPanel
from ..docks.metrics_panel import MetricsPanel
from ..docks.profile_dock import ProfilePanel
from ..runtime.coalesce import Coalescer
from ..runtime.collector import Survivors
from ..runtime.jobs import Jobs, describe_error
from ..runtime.run_controller import RunController
from ..widgets.docking import add_dock, make_dock, show_dock, tab_dock, toggle_dock
from ..widgets.folder_drop import FolderDrop
from .backend_view import follow_backend
from .commands import ViewerCommands
from .dataset_rows import RowStatus
from .export_flow import Exporter
from .inspection import Inspection
from .main_menus import MainActions, add_entries, insert_menu
from .mask_editing import MaskEditing
from .message_area import MessageArea
from .metrics_display import MetricsDisplay
from .quality_tools import QualityTools
from .result_display import ResultDisplay
from .review_queue import ReviewQueueTools
from .roi_control import RoiControl
from .scoring import Scorer
from .status_labels import StatusLabels
from .whole_slide import WholeSlide
from .window_layout import DockLayout, first_size, follow_title, restore_layout, save_layout, set_corners


class MainWindow(FolderDrop, QMainWindow):
    """The viewer's window; `commands` does what its menus and keys ask (`commands.open_dataset(path)`,
    `commands.run_current()`, ...)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("SegScope[*]")  # [*]: the "*" of unsaved mask edits
        self.setAcceptDrops(True)
        self.resize(first_size())
        self.backend = BackendState(BackendChoice())
        self.session = Session(backend=self.backend, describe_as=describe_error)
        self.jobs = Jobs(self)
        self.survivors = Survivors(self.session.events)  # (out of the collector's full walks: runtime.collector)
        session, jobs = self.session, self.jobs
        # The decoded-input cache opened as the window starts: its first open in a process (diskcache's sqlite
        # checks) beside the first image of a dataset being shown froze the window up to 1.7 s (bench/RESULTS.md).
        jobs.submit(None, decoded_store)

        self.slide = SlideView(jobs)
        self.panels = ResultPanels()
        self.dataset_panel = DatasetPanel()
        self.metrics_panel = MetricsPanel()
        self.messages = MessageArea(session)
        self.setCentralWidget(self.slide)
        set_corners(self)
        area = Qt.DockWidgetArea
        self.dataset_dock = add_dock(self, "Dataset", self.dataset_panel, area.LeftDockWidgetArea)
        self.metrics_dock = add_dock(self, "Metrics", self.metrics_panel, area.RightDockWidgetArea, scroll=True)
        self.messages_dock = add_dock(self, "Messages", self.messages, area.RightDockWidgetArea)
        self.results_dock = add_dock(self, "Results", self.panels, area.BottomDockWidgetArea)
        self.dock_layout = DockLayout(self, self.results_dock, self.dataset_dock,
                                      [self.metrics_dock, self.messages_dock])

        self.controller = RunController(self.backend, jobs, self)
        self.open_slide = OpenSlide(self.slide, self.backend, self)  # the shown slide; viewer runs read from it
        self.display = ResultDisplay(session, self.open_slide, self.panels, jobs, self)
        self.roi_control = RoiControl(session, self.slide, self.display.ready, self)
        self.editing = MaskEditing(session, self.panels, jobs, self)
        self.whole_slide = WholeSlide(session, self.controller, self.open_slide, jobs, self)
        self.exporter = Exporter(jobs, self)
        self.commands = ViewerCommands(session, jobs, self.controller, self.open_slide, self.dataset_panel,
                                       self.editing, self.roi_control, self.whole_slide, self.exporter, self)
        self.main_actions = MainActions(self, session, self.commands, self.dataset_panel, self.slide, self.panels,
                                        self.controller, self.roi_control,
                                        (self.dock_layout.reset, lambda: toggle_dock(self.messages_dock)))
        self.main_actions.build_toolbar()
        self.main_actions.build_menus(self.dataset_panel.recent_menu, (self.dataset_dock, self.metrics_dock,
                                                                        self.results_dock, self.messages_dock),
                                      self.messages.add)
        self.status_labels = StatusLabels(self.statusBar(), session)
        self.rows = RowStatus(session, self.dataset_panel)
        self.metrics_display = MetricsDisplay(session, self.metrics_panel, self.metrics_dock, self.main_actions,
                                              self.status_labels, self.dataset_panel)
        self.scorer = Scorer(session, jobs, self, first=self.dataset_panel.rows_on_screen)
        self.addToolBarBreak()
        self.addToolBar(self.editing.actions.toolbar)
        insert_menu(self, self.editing.actions.menu, 1)  # after File
        self.inspection = Inspection(session, self.dataset_panel, self.panels, self.slide, jobs, self)
        self._place_inspection()
        self.profile_dock = profile_dock(session, lambda: (self.backend.choice.pipeline, self.dataset.root
                                                           if self.dataset is not None else None),
                                         self.messages.add, jobs, self)
        tab_dock(self, self.profile_dock, self.messages_dock)
        self.main_actions.view_menu.addAction(self.profile_dock.toggleViewAction())
        self.quality_tools = QualityTools(session, self)
        self._place_quality()
        self.review_queue = ReviewQueueTools(session, jobs, self.editing, self.dataset_panel.select_item,
                                             self.inspection.zoom_to_box, self.commands.prefetch, self)
        self._place_review_queue()
        self._connect_messages()
        follow_backend(self.backend, self.status_labels, self.messages)
        follow_title(self, session)
        self.display.shown.connect(self.editing.result_shown)
        self.editing.dirtyChanged.connect(self.setWindowModified)
        self.editing.maskEdited.connect(lambda _item_id: self.inspection.refresh_review(force=True))
        self.whole_slide.overlayChanged.connect(self.main_actions.set_slide_overlay)
        self.controller.usage.connect(self.status_labels.show_usage)
        self.controller.batchFinished.connect(lambda *_counts: self._draw_due())
        self.roi_control.showItem.connect(self.dataset_panel.select_item)  # the image whose ROI moved back
        self.slide.hovered.connect(self.status_labels.hover)
        self.dock_layout.remember_default()
        self.dock_layout.size_on_show = not restore_layout(self)
        self.main_actions.update_enabled()
        self._refreshes = self.findChildren(Coalescer)  # (every view's, made above)

    # ------------------------------------------------------------------- the session's state, read-only
    @property
    def dataset(self) -> Dataset | None:
        return self.session.dataset

    @property
    def current(self) -> DatasetItem | None:
        return self.session.current

    @property
    def mask(self) -> np.ndarray | None:  # type: ignore[override]  # (shadows QWidget.mask(), unused here)
        """The ground truth on screen (edited or as on disk) of the current slide."""
        return self.session.mask

    @property
    def capabilities(self) -> Capabilities | None:
        return self.backend.capabilities

    def slide_ready(self) -> bool:
        """Whether the selected item's slide is decoded and shown."""
        return self.display.ready()

    def redraws_due(self) -> bool:
        """Whether a view has a redraw due: the views that read many images draw at a bounded rate
        (`gui/runtime/coalesce.py`), so what they show may lag the session by up to their interval (the table's rows
        `coalesce.REFRESH_MS`, the histogram `metrics_display.HISTOGRAM_MS`)."""
        return any(refresh.pending for refresh in self._refreshes)

    def _draw_due(self) -> None:
        """A batch ended: what its last results changed is drawn now, not at the end of each view's interval."""
        for refresh in self._refreshes:
            if refresh.pending:
                refresh.flush()

    # ------------------------------------------------------------------------------------------- layout
    def _connect_messages(self) -> None:
        """Every part's messages go to the message area (an error shows it), its notes to the status bar."""
        messages, labels = self.messages, self.status_labels
        signals = [part.message for part in (self.commands, self.controller, self.exporter, self.display,
                                             self.whole_slide, self.editing, self.roi_control, self.scorer,
                                             self.slide.tiles)]
        for signal in signals:
            signal.connect(messages.add)
        for note in (self.commands.note, self.whole_slide.note, self.editing.note, self.controller.note):
            note.connect(labels.note)
        self.roi_control.note.connect(lambda text: labels.note(text, 3000))
        self.commands.preparing.connect(self.slide.set_loading)  # the empty views say what is coming
        self.commands.preparing.connect(self.panels.set_busy)
        self.exporter.note.connect(lambda text: labels.note(text, 5000))
        self.jobs.failed.connect(lambda _key, text, details: messages.add("error", text, details))
        messages.added.connect(self._on_message)
        self.exporter.finished.connect(lambda written: self._on_message("error" if written else ""))

    def _on_message(self, level: str) -> None:
        """An error (or a finished export's list of files) shows the messages."""
        if level == "error":
            show_dock(self.messages_dock)

    def _place_inspection(self) -> None:
        """The Error regions and Timing docks, the dataset filter and the Inspect menu (before Help)."""
        inspection = self.inspection
        self.dataset_panel.insert_widget(2, inspection.filter_bar)  # between the path and the table
        tab_dock(self, inspection.review_dock, self.metrics_dock)
        tab_dock(self, inspection.timing_dock, self.messages_dock)
        insert_menu(self, inspection.menu, -1)
        self.controller.progress.connect(inspection.result_arriving)
        inspection.message.connect(self.messages.add)
        inspection.note.connect(self.status_labels.note)

    def _place_quality(self) -> None:
        """The Defects and Reliability docks (tabbed with Error regions and Timing) and their Inspect menu entries."""
        quality, inspection = self.quality_tools, self.inspection
        tab_dock(self, quality.defects_dock, inspection.review_dock)
        tab_dock(self, quality.reliability_dock, inspection.timing_dock)
        add_entries(inspection.menu, quality.entries)
        quality.defects.defectActivated.connect(inspection.zoom_to_box)
        quality.message.connect(self.messages.add)
        quality.note.connect(self.status_labels.note)

    def _place_review_queue(self) -> None:
        """The Review queue dock (tabbed with Defects) and its Inspect menu entries."""
        queue = self.review_queue
        tab_dock(self, queue.dock, self.quality_tools.defects_dock)
        add_entries(self.inspection.menu, queue.entries)
        queue.message.connect(self.messages.add)
        queue.note.connect(self.status_labels.note)
        self.display.shown.connect(queue.result_shown)

    def folder_dropped(self, folder: Path) -> None:
        self.commands.open_dataset(folder)

    def changeEvent(self, event: QEvent) -> None:
        """Back in focus: the image on screen may have been replaced meanwhile (its views then say so), or its mask
        by another program (a mask without edits is loaded and scored again)."""
        super().changeEvent(event)
        session = getattr(self, "session", None)  # (Qt calls this while the window is being built)
        if event.type() == QEvent.Type.ActivationChange and session is not None and session.current is not None \
                and self.isActiveWindow():
            current = session.current.id
            if current in session.look_at_images((current,)):  # another program replaced its mask: show the new one
                self.commands.reload_current()

    def closeEvent(self, event: QCloseEvent) -> None:
        """Ask about unsaved edits (a save runs first, then the window closes), then finish what was started:
        the backend closes on its lane, the running jobs and the session's writes end before the window goes."""
        if not self.editing.confirm_leave(self.close):
            event.ignore()
            return
        save_layout(self)
        self.hide()
        self.editing.shutdown()
        self.review_queue.shutdown()  # (a comparison on the backend lane stops before the backend closes there)
        self.controller.shutdown()
        self.jobs.shutdown()
        self.session.flush()
        self.open_slide.close()
        super().closeEvent(event)


def profile_dock(session: Session, sources: Callable[[], tuple[Path | None, Path | None]],
                 report: Callable[[str, str], None], jobs: Jobs, parent: QWidget) -> QDockWidget:
    """The Profile dock, not placed yet; `sources()` gives the pipeline and dataset folder its panel looks
    in, `report(level, text)` takes its messages, `jobs` runs its work."""
    panel = ProfilePanel(jobs)
    panel.message.connect(report)
    dock = make_dock(parent, "Profile", panel)

    def last_two_runs() -> None:
        runs = session.history.for_image(session.current.id) if session.current else []
        if len(runs) < 2:
            panel.message.emit("warning", "Run the current image twice (e.g. Ascend, then embedded) to see where "
                                          "their argmax disagree")
            return
        reference, candidate = runs[-2], runs[-1]
        panel.runs_label.setText(f"Comparing run {reference.id} with run {candidate.id}…")
        jobs.submit("disagreement", lambda: compare_runs(reference, candidate), panel.show_disagreement,
                    lambda text, _details: panel.message.emit("error", text))

    panel.runs_button.clicked.connect(last_two_runs)
    panel.sources = sources
    return dock
