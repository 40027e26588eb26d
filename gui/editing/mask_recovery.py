"""Nothing of a mask edit is lost: unsaved edits are auto-saved to a recovery file on the job runner's `AUTOSAVE`
lane (one write at a time, on a snapshot of the mask it copies while the edits go on), brought back by the
session when the dataset is reopened after a crash (and asked about once), and asked about before they go."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from ...core.editing.annotation import MaskEditor
from ...core.editing.files import write_recovery
from ..runtime.jobs import AUTOSAVE, Job, Jobs

#: Auto-save period while there are unsaved edits: a crash loses at most this much work.
AUTOSAVE_MS = 3000

Button = QMessageBox.StandardButton


class Autosaver(QObject):
    """While `timer` runs (`follow(dirty)`), it calls `autosave`, which hands a snapshot to `submit`."""

    #: a one-line warning for the message area
    failed = Signal(str)

    def __init__(self, autosave: Callable[[], None], jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self.timer = QTimer(self, interval=AUTOSAVE_MS)
        self.timer.timeout.connect(autosave)
        self.job: Job | None = None
        self.saved_version = 0  # the editor version the recovery file holds

    def follow(self, dirty: bool) -> None:
        if dirty and not self.timer.isActive():
            self.timer.start()
        elif not dirty:
            self.timer.stop()

    def submit(self, editor: MaskEditor, source: Path, recovery_dir: Path | None) -> None:
        """Write the recovery file of `editor`'s mask unless it holds this version or a write is running."""
        version = editor.version
        if not editor.dirty or self.job is not None or version == self.saved_version:
            return
        self.job = self.jobs.submit(None, partial(_write, editor, source, recovery_dir),
                                    partial(self._on_finished, version), self._on_failed, lane=AUTOSAVE)

    def _on_finished(self, version: int, error: str) -> None:
        self.job = None
        if error:
            self.failed.emit(f"Auto-save of the mask edits failed: {error}")
        else:
            self.saved_version = version

    def _on_failed(self, text: str, _details: str) -> None:
        self._on_finished(0, text)

    def wait(self) -> None:
        """Let a running auto-save finish, so it cannot recreate a recovery file after a save or discard."""
        if self.job is not None:
            self.job.wait()
            self.job = None

    def shutdown(self) -> None:
        self.timer.stop()
        self.wait()


def _write(editor: MaskEditor, source: Path, recovery_dir: Path | None) -> str:
    """On the lane: the recovery file from a snapshot of the mask; "" or why it could not be written (a full
    disk, a read-only folder: the user's to fix, said as such)."""
    try:
        write_recovery(editor.snapshot(), source, recovery_dir)
    except OSError as exc:
        return str(exc)
    return ""


def ask_restore(parent: QWidget, item_ids: tuple[str, ...], saved_at: float) -> bool:
    """Whether to keep the edits a crash left of these images (No: they are deleted)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(saved_at))
    answer = QMessageBox.question(
        parent, "Restore unsaved edits",
        f"Unsaved mask edits of {', '.join(item_ids)} (auto-saved up to {when}) were kept after SegScope stopped. "
        "They are these images' unsaved edits again: their rows say unsaved and their numbers are of them.\n\n"
        "Restore them? (No deletes them.)",
        Button.Yes | Button.No, Button.Yes)
    return answer == Button.Yes


def ask_unsaved(parent: QWidget, item_id: str) -> QMessageBox.StandardButton:
    """Save, Discard or Cancel, before the unsaved edits of `item_id` would go."""
    return QMessageBox.question(parent, "Unsaved mask edits",
                                f"The mask of {item_id} has unsaved edits. Save them?",
                                Button.Save | Button.Discard | Button.Cancel, Button.Save)
