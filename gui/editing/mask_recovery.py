"""Nothing of a mask edit is lost: the window's timer triggers the session's auto-save (`core.editing.autosave`)
on the job runner's `AUTOSAVE` lane (one write at a time, on a snapshot of the mask it copies while the edits go
on); edits a crash left are brought back by the session when the dataset is reopened (and asked about once);
unsaved edits are asked about before they go, and a save another writer got in first asks what to keep."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from ...core.editing.annotation import MaskEditor
from ...core.editing.autosave import AutoSave
from ...core.session.events import SaveConflict
from ..runtime.jobs import AUTOSAVE, Job, Jobs

#: Auto-save period while there are unsaved edits: a crash loses at most this much work.
AUTOSAVE_MS = 3000

Button = QMessageBox.StandardButton


class Autosaver(QObject):
    """While `timer` runs (`follow(dirty)`), it calls `autosave`, which hands a snapshot to `submit`; the
    service (`AutoSave`, the session's) does the rest."""

    #: a one-line warning for the message area (once per run of failures)
    failed = Signal(str)

    def __init__(self, autosave: Callable[[], None], jobs: Jobs, service: AutoSave,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs, self.service = jobs, service
        self.timer = QTimer(self, interval=AUTOSAVE_MS)
        self.timer.timeout.connect(autosave)
        self.job: Job | None = None

    @property
    def saved_version(self) -> int:
        return self.service.saved_version

    @saved_version.setter
    def saved_version(self, version: int) -> None:
        self.service.saved_version = version

    def follow(self, dirty: bool) -> None:
        if dirty and not self.timer.isActive():
            self.timer.start()
        elif not dirty:
            self.timer.stop()

    def submit(self, editor: MaskEditor, source: Path, recovery_dir: Path | None) -> None:
        """Write the recovery file of `editor`'s mask unless it holds this version or a write is running."""
        if self.job is not None or not self.service.due(editor):
            return
        version = editor.version
        self.job = self.jobs.submit(None, lambda: self.service.write(editor.snapshot(), source, recovery_dir),
                                    lambda error: self._on_finished(version, error), self._on_failed, lane=AUTOSAVE)

    def _on_finished(self, version: int, error: str) -> None:
        self.job = None
        warning = self.service.finished(version, error)
        if warning:
            self.failed.emit(warning)

    def _on_failed(self, text: str, _details: str) -> None:
        self._on_finished(0, text)

    def after_write(self, work: Callable[[], object]) -> None:
        """Run `work` on this lane after a running auto-save (e.g. remove the recovery file it may recreate
        after a discard), without the window waiting for that write; nothing runs when none is running."""
        if self.job is not None:
            self.jobs.submit(None, work, lane=AUTOSAVE)

    def wait(self) -> None:
        """Let a running auto-save finish, so it cannot recreate a recovery file after a save or discard."""
        if self.job is not None:
            self.job.wait()
            self.job = None

    def shutdown(self) -> None:
        self.timer.stop()
        self.wait()


def ask_conflict(parent: QWidget, conflict: SaveConflict) -> str | None:
    """What to keep when another viewer or program changed the mask first: "copy" (mine as a copy, then
    theirs), "theirs", "overwrite", or None (keep the edits unsaved, decide later)."""
    box = QMessageBox(QMessageBox.Icon.Warning, "The mask changed on disk",
                      f"{conflict.text}.\n\nYour edits of {conflict.item_id} are not saved yet.", parent=parent)
    choices = {box.addButton("Keep mine as a copy", QMessageBox.ButtonRole.AcceptRole): "copy",
               box.addButton("Take theirs", QMessageBox.ButtonRole.DestructiveRole): "theirs",
               box.addButton("Overwrite theirs", QMessageBox.ButtonRole.DestructiveRole): "overwrite"}
    box.addButton(Button.Cancel)
    box.exec()
    try:
        return choices.get(box.clickedButton())  # type: ignore[call-overload]
    except RuntimeError:  # the window closed under the question (its box with it): nothing was chosen
        return None


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
