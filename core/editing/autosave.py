"""Auto-save of unsaved mask edits as a Qt-free service the session owns (`Session.autosave`): which version the
recovery file holds, the write itself (any thread), and its failures said once, in words.

A window only triggers it on a timer and runs `write` on a worker: a full disk or a read-only dataset is one
warning when the first write fails ("... cannot be kept here: ..."), not one every few seconds; the next
successful write ends the failure, so a later one is said again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import SegScopeError
from .annotation import MaskEditor
from .files import write_recovery


class AutoSave:
    """The recovery file of the document's edits: `due` to write, `write` (any thread), `finished` (the
    session's thread) gives the warning to show, at most once per run of failures."""

    def __init__(self) -> None:
        self.saved_version = 0  # the editor version the recovery file holds
        self._failing = False

    def due(self, editor: MaskEditor) -> bool:
        """Whether `editor` holds unsaved edits the recovery file does not."""
        return editor.dirty and editor.version != self.saved_version

    @staticmethod
    def write(mask: np.ndarray, source: Path, recovery_dir: Path | None) -> str:
        """Write the recovery file of `source`'s edited `mask` (a snapshot); "" or why it could not be written,
        one line naming the file."""
        try:
            write_recovery(mask, source, recovery_dir)
        except SegScopeError as exc:
            return str(exc)
        except OSError as exc:
            return f"{exc.filename or source}: {exc.strerror or exc}"
        return ""

    def finished(self, version: int, error: str) -> str:
        """A `write` of `version` ended with `error` (""): the warning to show now, "" when there is none (a
        success, or a failure already said)."""
        if not error:
            self.saved_version, self._failing = version, False
            return ""
        if self._failing:
            return ""
        self._failing = True
        return (f"Unsaved mask edits cannot be kept here, so a crash would lose them: {error}. Save them "
                "elsewhere or free the folder (said once)")
