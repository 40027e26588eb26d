"""The main window: dataset list, slide with ROI, the three result panels, metrics, messages.

Everything that takes time runs on the window's one job runner (`jobs`, gui/jobs.py) and comes back in small
steps: slides are opened on its slide lane and shown tile by tile (tiles read on its tile lane), inference runs
on its backend lane, and the rest (restoring a dataset's runs, re-scoring, saving a mask, exporting, the error
review, run comparisons, whole-slide overlays) on its shared lane: the GUI thread only draws. Every dock can
be moved; the layout is remembered between runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QMainWindow, QWidget

from ..core.backends.base import Capabilities
from ..core.dataset.dataset import Dataset, DatasetItem
from ..core.errors import SegScopeError
from ..core.roi import Roi
from ..core.session.backend_state import BackendState
from ..core.session.restore import Restored
from ..core.session.session import Session
from ..core.slides import SlideReader
from ..core.stream.input import StreamInput
from . import settings
from .backend_dialog import BackendChoice, BackendDialog
from .backend_view import follow_backend
from .dataset_panel import DatasetPanel
from .dataset_rows import RowStatus
from .export_dialog import ExportChoices
from .export_flow import Exporter, ask_export
from .inspection import Inspection
from .jobs import Jobs
from .main_menus import MainActions, add_entries, insert_menu
from .mask_editing import MaskEditing
from .message_area import MessageArea
from .metrics_display import MetricsDisplay
from .metrics_panel import MetricsPanel
from .open_slide import OpenSlide
from .profile_dock import profile_dock
from .quality_tools import QualityTools
from .result_display import ResultDisplay
from .result_panels import ResultPanels
from .roi_control import RoiControl
from .run_controller import RunController
from .scoring import Scorer
from .slide_loader import SlideLoading
from .slide_view import SlideView
from .status_labels import StatusLabels, count
from .whole_slide import WholeSlide
from .window_layout import (
    DockLayout,
    add_dock,
    first_size,
    restore_layout,
    save_layout,
    set_corners,
    show_dock,
    tab_dock,
    toggle_dock,
)


class MainWindow(QMainWindow):
    """`open_dataset(path)`, `open_backend(choice)`, `run_current()`, `run_all()`; see the menus."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("SegScope[*]")  # [*]: the "*" of unsaved mask edits
        self.setAcceptDrops(True)
        self.resize(first_size())
        self.backend = BackendState(BackendChoice())
        self.session = Session(backend=self.backend)
        self._store_warned = False
        self.jobs = Jobs(self)

        self.slide = SlideView(self.jobs)
        self.panels = ResultPanels()
        self.dataset_panel = DatasetPanel()
        self.metrics_panel = MetricsPanel()
        self.messages = MessageArea()
        self.jobs.failed.connect(lambda _key, text, details: self.messages.add("error", text, details))
        self.scorer = Scorer(self.session, self.jobs, self)
        self.scorer.message.connect(self.messages.add)
        self.exporter = Exporter(self.jobs, self)
        self.exporter.message.connect(self.messages.add)
        self.exporter.note.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.exporter.finished.connect(self._on_exported)
        self.controller = RunController(self.backend, self.jobs, self)
        self.open_slide = OpenSlide(self.slide, lambda: self.backend.busy, self)  # viewer runs read from it

        self.setCentralWidget(self.slide)
        set_corners(self)
        area = Qt.DockWidgetArea
        self.dataset_dock = add_dock(self, "Dataset", self.dataset_panel, area.LeftDockWidgetArea)
        self.metrics_dock = add_dock(self, "Metrics", self.metrics_panel, area.RightDockWidgetArea, scroll=True)
        self.messages_dock = add_dock(self, "Messages", self.messages, area.RightDockWidgetArea)
        self.results_dock = add_dock(self, "Results", self.panels, area.BottomDockWidgetArea)
        self.dock_layout = DockLayout(self, self.results_dock, self.dataset_dock,
                                      [self.metrics_dock, self.messages_dock])

        self.roi_control = RoiControl(self.session, self.slide, self.slide_ready, self)
        self.main_actions = MainActions(self, self, self.dataset_panel, self.slide, self.panels, self.controller,
                                        self.roi_control)
        self.main_actions.build_toolbar()
        self.main_actions.build_menus(self.dataset_panel.recent_menu, (self.dataset_dock, self.metrics_dock,
                                                                        self.results_dock, self.messages_dock))
        self.status_labels = StatusLabels(self.statusBar())
        self.rows = RowStatus(self.session, self.dataset_panel.model)  # before _wire: a row is done, then drawn
        self.metrics_display = MetricsDisplay(self.session, self.metrics_panel, self.main_actions, self.status_labels,
                                              self.dataset_panel)
        self.display = ResultDisplay(self.session, self.open_slide, self.panels, self.metrics_display, self.rows,
                                     self.jobs, self)
        self.whole_slide = WholeSlide(self.session, self.controller, self.display, self.main_actions, self.jobs)
        self._wire()
        self.loading = SlideLoading(self.jobs, self)
        self.loading.loaded.connect(self._on_slide_loaded)
        self.loading.failed.connect(self._on_slide_failed)
        self.editing = MaskEditing(self.session, self.panels, self.dataset_panel.model, self.jobs, self)
        self.addToolBarBreak()
        self.addToolBar(self.editing.actions.toolbar)
        insert_menu(self, self.editing.actions.menu, 1)  # after File
        self.editing.message.connect(self.messages.add)
        self.editing.note.connect(self.statusBar().showMessage)
        self.editing.dirtyChanged.connect(self.setWindowModified)
        self.editing.blankMaskMade.connect(self.display.redraw)
        self.display.shown.connect(self.editing.result_shown)
        self.inspection = Inspection(self.session, self.dataset_panel, self.panels, self.slide, self.jobs, self)
        self._place_inspection()
        self.profile_dock = profile_dock(self.session, self._profile_sources, self.messages.add, self.jobs, self)
        tab_dock(self, self.profile_dock, self.messages_dock)
        self.main_actions.view_menu.addAction(self.profile_dock.toggleViewAction())
        self.editing.maskEdited.connect(lambda _item_id: self.inspection.refresh_review(force=True))
        self.quality_tools = QualityTools(self.session, self.jobs, self.controller.set_quality, self)
        self._place_quality()
        self.dock_layout.remember_default()
        self.dock_layout.size_on_show = not restore_layout(self)
        self._update_enabled()

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

    # ----------------------------------------------------------------------------------------- building
    def _wire(self) -> None:
        self.dataset_panel.openRequested.connect(self.open_dataset)
        self.dataset_panel.currentChanged.connect(self._on_item_selected)
        roi = self.roi_control
        roi.message.connect(self.messages.add)
        roi.note.connect(lambda text: self.statusBar().showMessage(text, 3000))
        roi.showItem.connect(self.dataset_panel.select_item)  # the image whose ROI moved back
        self.slide.hovered.connect(lambda text: self.status_labels.hover(text))
        self.messages.added.connect(self._on_message)
        for part in (self.display, self.whole_slide):
            part.message.connect(self.messages.add)
        self.whole_slide.note.connect(self.statusBar().showMessage)
        events = self.session.events
        events.roi_changed.connect(self._on_session_roi)
        events.result_added.connect(lambda item_id, record: self.status_labels.last_run(item_id, record.timings))
        events.store_failed.connect(self._on_store_failed)
        follow_backend(self.backend, self.status_labels, self.messages)
        backend = self.backend.events
        backend.opened.connect(self._on_backend_opened)
        for event in (backend.opening, backend.opened, backend.failed, backend.busy_changed):
            event.connect(lambda *_args: self._update_enabled())
        c = self.controller
        c.evaluated.connect(lambda evaluation: self.session.add_evaluation(evaluation))  # the views follow its events
        c.itemFailed.connect(lambda item_id, text, _d: self.rows.set(item_id, "error", error=text))
        c.message.connect(self.messages.add)
        c.progress.connect(self.main_actions.show_progress)
        c.usage.connect(self.status_labels.show_usage)
        c.batchFinished.connect(self._on_batch_finished)

    # ------------------------------------------------------------------------------------- dataset/slide
    def open_dataset(self, path: Path) -> bool:
        """Show the dataset folder `path` (False, with a message, when it cannot be opened now); runs kept on
        disk by an earlier session come back in the background, row by row."""
        if self.backend.busy:
            self.messages.add("warning", "Cancel the running batch (Esc) before opening another dataset")
            return False
        if not self.editing.confirm_leave(lambda: self.open_dataset(path)):
            return False
        try:
            dataset = Dataset.open(Path(path))
        except SegScopeError as exc:
            self.messages.add("error", str(exc))
            settings.forget_recent_dataset(Path(path))  # only datasets that opened are remembered
            return False
        self.jobs.cancel("restore")
        new_folder = self.session.open_dataset(dataset)
        self.open_slide.set(None, None)
        self.panels.clear()
        self.metrics_display.show(None)
        self.status_labels.clear_timings()
        settings.add_recent_dataset(dataset.root)
        self.setWindowTitle(f"SegScope — {dataset.root}[*]")
        self.dataset_panel.set_dataset(dataset.root, [item.id for item in dataset.items])
        kept = self.rows.restore()  # runs of this folder kept in this session
        self.metrics_display.update_means()
        self.messages.add("info", f"Opened {dataset.root}: {count(len(dataset), 'image')}, "
                                  f"{sum(i.has_mask for i in dataset.items)} with masks"
                                  + (f"; {count(kept, 'earlier run')} kept" if kept else ""))
        if new_folder:
            self._restore_runs(dataset)
        self._update_enabled()
        return True

    def _restore_runs(self, dataset: Dataset) -> None:
        """The runs an earlier session kept on disk, read and re-scored on a worker, taken one per step."""
        restored, notes = [0], []

        def each(entry: Restored) -> None:
            if entry.note:
                notes.append(entry.note)
            elif self.session.adopt_restored(entry):
                restored[0] += 1

        def finished() -> None:
            if restored[0]:
                self.messages.add("info", f"Restored {count(restored[0], 'earlier run')} of {dataset.root}")
            for note in notes:
                self.messages.add("warning", note)
            self._update_enabled()

        entries = self.session.restore_entries()
        self.jobs.stream("restore", lambda: entries, each, finished)

    def _on_item_selected(self, item_id: str) -> None:
        current = self.current
        if self.dataset is None or (current is not None and item_id == current.id):
            return
        if current is not None and not self.editing.confirm_leave(lambda: self.dataset_panel.select_item(item_id)):
            self.dataset_panel.select_item(current.id)  # stay (re-enters with the current id)
            return
        item = self.session.select(item_id)
        self.open_slide.set(None, None)
        self.panels.clear()
        self.panels.set_busy(f"Loading {item.id}…")
        self.slide.set_loading(f"Loading {item.id} ({item.image_path.name})…")
        self.metrics_display.show(None)
        self.loading.request(item, self.dataset)
        self.statusBar().showMessage(f"Loading {item.image_path}…")
        self._update_enabled()

    def _on_slide_loaded(self, item: DatasetItem, reader: SlideReader, base, mask) -> None:
        if self.dataset is None:
            reader.close()
            return
        self.open_slide.set(item.id, reader)
        self.session.slide_loaded(item.id, reader.size, mask)
        roi = self.session.roi
        assert roi is not None
        self.slide.set_reader(reader, base, roi)
        self.whole_slide.show_overlay(item.id)
        self.editing.slide_loaded(item)  # may restore auto-saved edits into the document
        w, h = reader.size
        self.statusBar().showMessage(f"{item.image_path}  {w} x {h}", 4000)
        self.display.show_current()  # a whole-slide run's part under the ROI, unless this ROI was run
        self._update_enabled()

    def _on_slide_failed(self, item: DatasetItem, text: str, details: str) -> None:
        """The slide cannot be opened: both views say so (none stays on "Loading…"), the row holds the reason."""
        self.open_slide.set(None, None)
        self.panels.clear()
        self.slide.set_loading(f"{item.id} cannot be opened (see Messages)")
        self.panels.set_busy(f"{item.id} cannot be opened: {text}")
        self.messages.add("error", text, details)
        self.rows.set(item.id, "unreadable", error=text)
        self.statusBar().clearMessage()
        self._update_enabled()

    def slide_ready(self) -> bool:
        """Whether the selected item's slide is decoded and shown."""
        return self.display.ready()

    def _on_session_roi(self, item_id: str, _roi: Roi) -> None:
        if self.current is not None and item_id == self.current.id and self.slide_ready():
            if not self.display.show_part():
                self.display.mark_if_stale()
        self._update_enabled()

    # ------------------------------------------------------------------------------------------ running
    def open_backend(self, choice: BackendChoice) -> None:
        """Open `choice` in the inference thread; the status bar says when it is ready. Should it fail, the
        backend open before comes back (and the messages say why)."""
        self.backend.open(choice)

    def choose_backend(self) -> None:
        dialog = BackendDialog(self.backend.choice, self.jobs, self)
        if dialog.exec() == BackendDialog.DialogCode.Accepted:
            self.open_backend(dialog.choice())

    def run_current(self) -> bool:
        if self.dataset is None or self.current is None or not self.slide_ready():
            self.statusBar().showMessage("Select an image first", 3000)
            return False
        self.roi_control.sync()
        return self._run([self.current])

    def run_all(self) -> bool:
        return self.dataset is not None and self._run(list(self.dataset.items))

    def run_whole_slide(self) -> bool:
        return self.whole_slide.run()

    def _run(self, items: list[DatasetItem]) -> bool:
        """Queue a batch on a snapshot of the ROIs: dragging during the run changes the next run only."""
        assert self.dataset is not None
        plan = self.session.run_plan([item.id for item in items])
        try:
            stream = StreamInput.of(self.backend.choice.pipeline)  # what an ROI becomes for this stream
        except SegScopeError as exc:
            self.messages.add("error", str(exc))
            return False
        sources = self.open_slide.sources(stream)  # the shown slide: no decode
        if not self.controller.run(self.dataset, items, plan, sources, self.session.held_masks(), stream):
            return False
        self.display.start_batch()
        self.rows.queued([item.id for item in items])
        self.main_actions.start_batch(len(items))
        if self.current is not None and self.current.id in plan and self.slide_ready():
            self.panels.set_busy(f"Running {self.current.id}…")
        return True

    def _on_batch_finished(self, done: int, failed: int, cancelled: bool) -> None:
        self.main_actions.end_batch()
        self.open_slide.idle()
        idle = self.panels.result is not None or not self.slide_ready()
        self.panels.set_busy("" if idle else self.display.run_hint())
        self.rows.batch_finished(cancelled)
        if cancelled or failed or done > 1:
            level = "warning" if cancelled or failed else "info"
            text = f"Run {'cancelled' if cancelled else 'finished'}: {done} done, {failed} failed"
            self.messages.add(level, text)
            self.statusBar().showMessage(text, 5000)

    def _on_backend_opened(self, choice: BackendChoice, capabilities: Capabilities) -> None:
        """A backend is ready: class names, panel titles and paint classes follow its model; results of
        another model are dimmed (kept for comparison)."""
        self.panels.set_class_names(capabilities.class_names)
        self.editing.model_changed(capabilities.class_names)
        self.panels.follow_card(choice.pipeline, self.jobs)
        self.metrics_display.offer_rankings()
        self.rows.mark_all_stale()
        if self.current is not None:
            self.display.redraw(self.current.id)

    def _place_inspection(self) -> None:
        """The Review and Timing docks, the dataset filter and the Inspect menu (before Help)."""
        inspection = self.inspection
        self.dataset_panel.insert_widget(2, inspection.filter_bar)  # between the path and the table
        tab_dock(self, inspection.review_dock, self.metrics_dock)
        tab_dock(self, inspection.timing_dock, self.messages_dock)
        insert_menu(self, inspection.menu, -1)
        self.controller.progress.connect(inspection.result_arriving)
        inspection.message.connect(self.messages.add)
        inspection.note.connect(self.statusBar().showMessage)

    def _place_quality(self) -> None:
        """The Defects and Reliability docks (tabbed with Review and Timing) and their Inspect menu entries."""
        quality, inspection = self.quality_tools, self.inspection
        tab_dock(self, quality.defects_dock, inspection.review_dock)
        tab_dock(self, quality.reliability_dock, inspection.timing_dock)
        add_entries(inspection.menu, quality.entries)
        quality.defects.defectActivated.connect(inspection.zoom_to_box)
        quality.message.connect(self.messages.add)
        quality.note.connect(self.statusBar().showMessage)

    def _profile_sources(self) -> tuple[Path | None, Path | None]:
        """Where the Profile dock looks for profiles: the pipeline's folder and the dataset's."""
        return self.backend.choice.pipeline, self.dataset.root if self.dataset is not None else None

    def _on_store_failed(self, text: str) -> None:
        if not self._store_warned:  # once per window: every result would say the same
            self._store_warned = True
            self.messages.add("warning", text)

    # ------------------------------------------------------------------------------------------- export
    def export(self) -> None:
        """Ask what and where, then write in the background (see `export_flow`)."""
        if self.dataset is None or not (self.session.result_ids or self.session.slide_runs):
            self.statusBar().showMessage("Run at least one image (or a whole slide) before exporting", 4000)
            return
        choices = ask_export(self.session, self.capabilities, self)
        if choices is not None:
            self.write_export(choices)

    def write_export(self, choices: ExportChoices) -> bool:
        """Start writing `choices` in the background (the files: `exporter.finished`); False when it could not
        start. Metrics re-scored meanwhile are scored again in the export, so its table is the fresh one."""
        return self.exporter.start(self.session, self.capabilities, choices)

    def _on_exported(self, written: list[Path]) -> None:
        if written:
            show_dock(self.messages_dock)
        self._update_enabled()

    # --------------------------------------------------------------------------------------------- misc
    def _update_enabled(self) -> None:
        session = self.session
        self.main_actions.update_enabled(self.backend.busy, self.capabilities is not None, self.slide_ready(),
                                         self.dataset is not None, session.roi_moves.can_undo,
                                         session.roi_moves.can_redo,
                                         bool(session.result_ids or session.slide_runs) and not self.exporter.running)

    def _on_message(self, level: str) -> None:
        if level == "error":
            show_dock(self.messages_dock)

    def toggle_messages(self) -> None:
        toggle_dock(self.messages_dock)

    def reset_layout(self) -> None:
        self.dock_layout.reset()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if DatasetPanel.dropped_folder(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        folder = DatasetPanel.dropped_folder(event)
        if folder is not None:
            event.acceptProposedAction()
            self.open_dataset(folder)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Ask about unsaved edits (a save runs first, then the window closes), then finish what was started:
        the backend closes on its lane, the running jobs and the session's writes end before the window goes."""
        if not self.editing.confirm_leave(self.close):
            event.ignore()
            return
        save_layout(self)
        self.hide()
        self.editing.shutdown()
        self.controller.shutdown()
        self.jobs.shutdown()
        self.session.flush()
        self.open_slide.close()
        super().closeEvent(event)

