"""File > Export: ask what and where (`ExportDialog`, offering what the session's results really write), then
run the export job of `core.export.job` on a worker, one image per step; progress goes to the status bar,
problems and the list of published files to the message area. The export is all or nothing: the folder
changes only when every file is written. File > Cancel export stops it before its next image (the folder as it
was); whatever way it ends, it is no longer running. The flag and the cancel are the session's
(`Session.start_export`, `cancel_export`, `export_ended`)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ...core.backends.base import Capabilities
from ...core.errors import SegScopeError
from ...core.export.job import Exportable, ExportChoices, ExportSession, Progress
from ...core.session.session import Session
from ...core.wording import plural
from ..dialogs.export_dialog import ExportDialog
from ..runtime.jobs import Jobs


def ask_export(session: ExportSession, capabilities: Capabilities | None, parent: QWidget) -> ExportChoices | None:
    """The user's choices (None: cancelled); the current image is offered when it has a result or a
    whole-slide run."""
    dialog = ExportDialog(Exportable(session, capabilities), parent)
    return dialog.choices() if dialog.exec() == ExportDialog.DialogCode.Accepted else None


class Exporter(QObject):
    """Runs the session's export (`Session.start_export`: one at a time, its flag and cancel the session's) on the
    job runner; `finished(list of paths)` when it ends (empty after a failure: nothing was published)."""

    finished = Signal(list)
    #: (level, text, details) for the message area
    message = Signal(str, str, str)
    #: a short note for the status bar
    note = Signal(str)

    def __init__(self, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs

    def start(self, session: Session, choices: ExportChoices) -> bool:
        """Start writing `choices` (False, with a note or a message, when an export is already running or it
        cannot be planned)."""
        if session.exporting:
            self.note.emit("An export is running: wait for it to finish or cancel it")
            return False
        try:
            work = session.start_export(choices)
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
            cancelled = session.export_ended()
            if error and cancelled:
                self.message.emit("warning", f"Export cancelled: {choices.folder} was left as it was", "")
            elif error:
                self.message.emit("error", f"Export: {error} ({choices.folder} was left as it was)", details)
            if written:
                self.message.emit("info", f"Exported {plural(len(written), 'file')} to {choices.folder}",
                                  "\n".join(str(p) for p in written))
            self.note.emit("Export finished" if not error else "Export cancelled" if cancelled else "Export failed")
            self.finished.emit(written)

        self.note.emit(f"Exporting to {choices.folder}…")
        self.jobs.stream("export", work, step, end, end)
        return True
