"""File > Export: ask what and where (`ExportDialog` never lets a file be replaced silently), then write the
chosen files with `core.export`; problems and the list of written files go to the message area."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget

from ..core.backends.base import Capabilities
from ..core.errors import SegScopeError
from ..core.export import ExportFolder
from ..core.provenance import source_for
from ..core.session import Session
from .export_dialog import ExportChoices, ExportDialog
from .message_area import MessageArea
from .status_labels import count


def ask_export(session: Session, parent: QWidget) -> ExportChoices | None:
    """The user's choices (None: cancelled); the current image is offered when it has a result."""
    result_ids = session.result_ids
    current = session.current.id if session.current is not None and session.current.id in result_ids else None
    dialog = ExportDialog(current, result_ids, parent)
    return dialog.choices() if dialog.exec() == ExportDialog.DialogCode.Accepted else None


def write_export(session: Session, capabilities: Capabilities | None, choices: ExportChoices,
                 messages: MessageArea) -> list[Path]:
    """Write the chosen files as one export (its folder locked throughout); the metrics table and the COCO
    file hold the exported images only (the current one for "Current image"). Returns what was written (also
    when a later file failed)."""
    dataset = session.dataset
    assert dataset is not None
    folder = ExportFolder(choices.folder, choices.overwrite, dataset.root)
    QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
    try:
        with folder:
            for item_id in choices.item_ids:
                result = session.result(item_id)
                if result is None:
                    raise SegScopeError(f"{item_id}: its result is no longer in memory; run it again to export")
                folder.export_result(result, source_for(dataset.item(item_id), capabilities), choices.kinds)
            folder.write_coco()
            if choices.metrics:
                rows, means = session.metrics_table(list(choices.item_ids))
                folder.write_metrics(rows, means, session.ranking)
    except SegScopeError as exc:
        messages.add("error", f"Export: {exc}")
    finally:
        QApplication.restoreOverrideCursor()
    written = folder.written
    if written:
        messages.add("info", f"Exported {count(len(written), 'file')} to {choices.folder}",
                     "\n".join(str(p) for p in written))
    return written
