"""What the user asks of the viewer, as the session's commands: open a folder, pick an image, run it, run all, run
its whole slide, export, open a backend. Each asks what only the window can ask (unsaved edits first, the export
dialog), calls the session's command and hands the job it returns to the window's job runner (`gui/runtime/jobs.py`;
inference to the run controller, which owns the backend's lane). Nothing here draws: the views follow the
session's events.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ...core.backend_choice import BackendChoice
from ...core.dataset.dataset import Dataset, DatasetItem
from ...core.errors import SegScopeError
from ...core.session.jobs import StreamJob
from ...core.session.restore import FIRST_ROWS
from ...core.session.session import Found, Loaded, Session
from ...core.session.truth import TruthFiles, truth_files
from ...core.slides import SlideReader
from ...core.stream.input import StreamInput
from ..canvas.open_slide import OpenSlide
from ..dialogs.backend_dialog import BackendDialog
from ..dialogs.export_dialog import ExportChoices
from ..docks.dataset_panel import DatasetPanel
from ..runtime import settings
from ..runtime.jobs import Jobs, started_after
from ..runtime.run_controller import RunController
from ..runtime.slide_loader import SlideLoading
from .export_flow import Exporter, ask_export
from .mask_editing import MaskEditing
from .roi_control import RoiControl
from .whole_slide import WholeSlide

#: How long the jobs over all images of a dataset just opened wait on their worker before they start
#: (`jobs.started_after`): the window lays out and draws its table and first image meanwhile, without them holding
#: the interpreter lock beside it (100,000 images, interleaved: the GUI thread's longest stall 166-330 ms without the
#: wait, for 9 ms of its own work; 42-55 ms with it).
FIRST_DRAW_S = 0.15

#: The job key of a dataset folder being listed (`Jobs.busy(OPENING)`: an open is under way).
OPENING = "open"


class ViewerCommands(QObject):
    """The window's commands (its menus, keys and drops call these); `message(level, text, details)` and
    `note(text, ms)` say what could not be done."""

    message = Signal(str, str, str)
    note = Signal(str, int)
    #: What a long preparation of the dataset being opened is doing, for the empty views ("": it ended).
    preparing = Signal(str)

    def __init__(self, session: Session, jobs: Jobs, controller: RunController, open_slide: OpenSlide,
                 panel: DatasetPanel, editing: MaskEditing, roi_control: RoiControl, whole_slide: WholeSlide,
                 exporter: Exporter, host: QWidget) -> None:
        super().__init__(host)
        self.session, self.jobs, self.controller, self.open_slide = session, jobs, controller, open_slide
        self.panel, self.editing, self.roi_control, self.whole_slide = panel, editing, roi_control, whole_slide
        self.exporter, self.host = exporter, host
        self._background: Callable[[], None] | None = None  # the open dataset's jobs, once its first image shows
        self.loading = SlideLoading(jobs, self)
        self.loading.loaded.connect(self._on_slide_loaded)
        self.loading.failed.connect(self._on_slide_failed)
        panel.openRequested.connect(self.open_dataset)
        panel.currentChanged.connect(self.select)
        if session.backend is not None:  # another model: its mask rule reads the truths
            session.backend.events.opened.connect(lambda _opened: self._check_truths())

    # ---------------------------------------------------------------------------------- dataset, image
    def open_dataset(self, path: Path, prepare: Callable[[Path], object] | None = None, saying: str = "") -> bool:
        """Open the dataset folder `path`: it is listed on a worker (`OPENING`: the window stays live, the status bar
        says so, a newer open supersedes it) and shown once listed; edits a crash left and runs an earlier session
        kept come back in the background after that. `prepare(path)` runs on that worker first (the demo dataset
        generated on a first start), `saying` what the window says meanwhile ("": "Opening <path>…"). False when
        it cannot start now (a run in progress, unsaved edits not settled); a folder that does not open is an error
        in Messages, forgotten from the recent list."""
        if not self._may_leave(lambda: self.open_dataset(path, prepare, saying)):
            return False
        path = Path(path)
        self.note.emit(saying or f"Opening {path}…", 0)
        if saying:
            self.preparing.emit(saying)
        self.jobs.submit(OPENING, partial(_open_folder, path, prepare), self._show_dataset,
                         partial(self._open_failed, path))
        return True

    def _may_leave(self, retry: Callable[[], object]) -> bool:
        """Whether the dataset on screen may be left now (no run in progress, unsaved edits settled)."""
        backend = self.session.backend
        if backend is not None and backend.busy:
            self.message.emit("warning", "Cancel the running batch (Esc) before opening another dataset", "")
            return False
        return self.editing.confirm_leave(retry)

    def _show_dataset(self, opened: tuple[Dataset, TruthFiles]) -> None:
        """The folder is listed: show it, unless a run started or the image on screen was edited meanwhile (asked
        again, as when the open was asked)."""
        if not self._may_leave(lambda: self._show_dataset(opened)):
            self.note.emit("", 0)
            return
        dataset, read = opened
        self.jobs.cancel("restore")
        self.open_slide.set(None, None)
        restore = self.session.open_dataset(dataset, read)
        self._background = partial(self._start_background, restore, dataset.root)
        if self.session.current is None:  # (no image to show first)
            self._first_image_shown()
        self.note.emit("", 0)

    def _start_background(self, restore: StreamJob[Found], root: Path) -> None:
        settings.add_recent_dataset(root)  # (a settings file written: 14 ms, not beside the table's first layout)
        self.jobs.stream("restore", started_after(FIRST_DRAW_S, restore.work), restore.each, restore.finished)
        self._check_truths(reload=False)  # (the image on screen was read by the rule already)

    def _first_image_shown(self) -> None:
        """The dataset just opened shows its first image (or cannot): the jobs over all its images start now (its
        masks counted and checked, its stored runs and crash edits restored), not while the table and the first
        image are being shown: on 2 cores, two walks over 100,000 images beside them froze the window a second."""
        start, self._background = self._background, None
        if start is not None:
            start()

    def _open_failed(self, path: Path, text: str, details: str) -> None:
        self.message.emit("error", text, details)
        self.note.emit("", 0)
        self.preparing.emit("")
        settings.forget_recent_dataset(path)  # only datasets that opened are remembered

    def _check_truths(self, reload: bool = True) -> None:
        """Once a dataset and a backend are open, read the truths by the model's mask rule: every truth is checked
        (refused masks come back as errors in Messages) and (`reload`) the current image's mask is read again by
        it; without `reload`, a dataset just opened: once its first image is drawn (`FIRST_DRAW_S`)."""
        session = self.session
        check = session.truths_by_model()
        if check is None:
            return
        self.jobs.stream(check.name, check.work if reload else started_after(FIRST_DRAW_S, check.work), check.each,
                         check.finished)
        current, document = session.current, session.document
        if reload and current is not None and (document is None or not (document.dirty or document.saving)):
            self._load(current.id)

    def select(self, item_id: str) -> None:
        """The dataset list's choice: ask about unsaved edits first, then load the image (on the slide lane)."""
        session = self.session
        current = session.current
        if session.dataset is None or (current is not None and item_id == current.id):
            return
        if current is not None and not self.editing.confirm_leave(lambda: self.panel.select_item(item_id)):
            self.panel.select_item(current.id)  # stay (re-enters with the current id)
            return
        self._load(item_id)

    def reload_current(self) -> None:
        """Load the image on screen and its mask again (its mask file changed on disk, and it has no edits)."""
        current = self.session.current
        if current is not None and not (self.session.document is not None and self.session.document.dirty):
            self._load(current.id)

    def prefetch(self, item_id: str) -> None:
        """Open an image's slide ahead, while another is on screen (the review queue's next image)."""
        dataset = self.session.dataset
        if dataset is not None and item_id in dataset:
            self.loading.prefetch(dataset.item(item_id), dataset)

    def _load(self, item_id: str) -> None:
        """Make `item_id` current and load its slide and mask (a newer request supersedes this one)."""
        session = self.session
        assert session.dataset is not None
        load = session.select(item_id)
        item = session.dataset.item(item_id)
        self.open_slide.set(None, None)
        self.open_slide.view.set_loading(f"Loading {item.id} ({item.image_path.name})…")
        self.loading.request(load, item, session.dataset)
        self.note.emit(f"Loading {item.image_path}…", 0)

    def _on_slide_loaded(self, item: DatasetItem, reader: SlideReader, base: np.ndarray | None,
                         answer: Loaded) -> None:
        session = self.session
        if session.dataset is None or session.current is None or session.current.id != item.id:
            reader.close()
            return
        self.open_slide.set(item.id, reader)
        self.open_slide.view.set_reader(reader, base, session.dataset.roi_for(item, reader.size))
        session.slide_loaded(item.id, *answer)  # (size, mask, its stamps): the views follow
        width, height = reader.size
        self.note.emit(f"{item.image_path}  {width} x {height}", 4000)
        self._first_image_shown()

    def _on_slide_failed(self, item: DatasetItem, text: str, details: str) -> None:
        """The slide cannot be opened: both views say so (none stays on "Loading…"), the row holds the reason."""
        self.open_slide.set(None, None)
        self.open_slide.view.set_loading(f"{item.id} cannot be opened (see Messages)")
        self.session.slide_failed(item.id, text, details)
        self.message.emit("error", text, details)
        self.note.emit("", 0)
        self._first_image_shown()

    # ------------------------------------------------------------------------------------------ running
    def run_current(self) -> bool:
        session = self.session
        if session.dataset is None or session.current is None or not self.open_slide.shows(session.current.id):
            self.note.emit("Select an image first", 3000)
            return False
        self.roi_control.sync()
        return self._run([session.current.id])

    def run_all(self) -> bool:
        dataset = self.session.dataset
        return dataset is not None and self._run([item.id for item in dataset.items])

    def run_whole_slide(self) -> bool:
        return self.whole_slide.run()

    def _run(self, item_ids: list[str]) -> bool:
        """Run on a snapshot of the ROIs (dragging during the run changes the next run only); the shown slide
        is read from its open reader, not decoded again."""
        backend = self.session.backend
        if backend is not None and backend.busy:
            self.message.emit("warning", "A run is in progress: wait for it or cancel it (Esc)", "")
            return False
        try:
            stream = StreamInput.of(backend.choice.pipeline if backend is not None else None)
        except SegScopeError as exc:
            self.message.emit("error", str(exc), "")
            return False
        return self.controller.run(self.session.run(item_ids, self.open_slide.sources(stream), stream))

    # ---------------------------------------------------------------------------------- backend, export
    def open_backend(self, choice: BackendChoice) -> None:
        """Open `choice` on the backend lane; the status bar says when it is ready. Should it fail, the backend
        open before comes back (and the messages say why)."""
        if self.session.backend is not None:
            self.session.backend.open(choice)

    def choose_backend(self) -> None:
        backend = self.session.backend
        assert backend is not None
        dialog = BackendDialog(backend.choice, self.jobs, self.host)
        if dialog.exec() == BackendDialog.DialogCode.Accepted:
            self.open_backend(dialog.choice())

    def choose_slide_scale(self) -> None:
        """Run > Whole-slide output scale…"""
        self.whole_slide.choose_scale()

    def export(self) -> None:
        """Ask what and where, then write in the background (see `export_flow`)."""
        if not self.session.can_export:
            self.note.emit("An export is running: wait for it to finish or cancel it" if self.session.exporting
                           else "Run at least one image (or a whole slide) before exporting", 4000)
            return
        choices = ask_export(self.session, self.session.capabilities, self.host)
        if choices is not None:
            self.write_export(choices)

    def write_export(self, choices: ExportChoices) -> bool:
        """Start writing `choices` in the background (the files: `exporter.finished`); False when it could not
        start. Numbers re-scored meanwhile are scored again in the export, so its table is the fresh one."""
        return self.exporter.start(self.session, choices)

    def cancel_export(self) -> None:
        """File > Cancel export: the running export stops before its next image, its folder as it was."""
        self.session.cancel_export()


def _open_folder(path: Path, prepare: Callable[[Path], object] | None) -> tuple[Dataset, TruthFiles]:
    """`Dataset.open` of `path` after `prepare(path)` (an unreadable image folder is a row that says so), with the
    truth files of the rows it shows first (`FIRST_ROWS`), read here rather than as the table draws them."""
    if prepare is not None:
        prepare(path)
    dataset = Dataset.open(path, partial=True)
    return dataset, truth_files(dataset, dataset.items[:FIRST_ROWS])
