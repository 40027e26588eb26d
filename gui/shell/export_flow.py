"""File > Export: ask what and where (`ExportDialog`, offering what the session's results really write), then
run the export job of `core.export.job` on a worker, one image per step; progress goes to the status bar,
problems and the list of published files to the message area. The export is all or nothing: the folder
changes only when every file is written. File > Cancel export stops it before its next image (the folder as it
was); whatever way it ends, it is no longer running (`session.exporting`)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ...core.backends.base import Capabilities
from ...core.errors import SegScopeError
from ...core.export.job import Exportable, ExportChoices, ExportSession, Progress
from ...core.wording import plural
from ..dialogs.export_dialog import ExportDialog
from ..runtime.jobs import Flag, Jobs


def ask_export(session: ExportSession, capabilities: Capabilities | None, parent: QWidget) -> ExportChoices | None:
    """The user's choices (None: cancelled); the current image is offered when it has a result or a
    whole-slide run."""
    dialog = ExportDialog(Exportable(session, capabilities), parent)
    return dialog.choices() if dialog.exec() == ExportDialog.DialogCode.Accepted else None


class Exporter(QObject):
    """Runs one export at a time on the job runner; `finished(list of paths)` when it ends (empty after a
    failure: nothing was published)."""

    finished = Signal(list)
    #: (level, text, details) for the message area
    message = Signal(str, str, str)
    #: a short note for the status bar
    note = Signal(str)

    def __init__(self, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self._cancel: Flag | None = None  # the running export's (None: none runs)

    @property
    def running(self) -> bool:
        return self._cancel is not None

    def start(self, session: ExportSession, capabilities: Capabilities | None, choices: ExportChoices) -> bool:
        """Start writing `choices` (False, with a note or a message, when an export is already running or it
        cannot be planned)."""
        if self.running:
            self.note.emit("An export is running: wait for it to finish or cancel it")
            return False
        cancel = Flag()
        try:
            work = Exportable(session, capabilities).steps(choices, cancel)
        except SegScopeError as exc:
            self.message.emit("error", f"Export: {exc}", "")
            return False
        written: list[Path] = []

        def step(progress: Progress) -> None:
            written.extend(progress.written)
            for line in progress.notes:
                self.message.emit("warning", line, "")
            self.note.emit(f"Exporting to {choices.folder}: {progress.done} of {plural(progress.total, 'image')}…")

        def end(error: str = "", details: str = "") -> None:
            self._cancel, session.exporting = None, False
            if error and cancel.is_set():
                self.message.emit("warning", f"Export cancelled: {choices.folder} was left as it was", "")
            elif error:
                self.message.emit("error", f"Export: {error} ({choices.folder} was left as it was)", details)
            if written:
                self.message.emit("info", f"Exported {plural(len(written), 'file')} to {choices.folder}",
                                  "\n".join(str(p) for p in written))
            self.note.emit("Export finished" if not error else "Export cancelled" if cancel.is_set()
                           else "Export failed")
            self.finished.emit(written)

        self._cancel, session.exporting = cancel, True
        self.note.emit(f"Exporting to {choices.folder}…")
        self.jobs.stream("export", work, step, end, end)
        return True

    def cancel(self) -> None:
        """Stop the running export before its next image; nothing of it is published."""
        if self._cancel is not None:
            self._cancel.set()
