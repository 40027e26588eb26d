"""A dataset folder dropped on a widget (the window, the dataset panel): a dropped folder, or a dropped file's
folder, handed to the widget's `folder_dropped`."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QDragEnterEvent, QDropEvent


def dropped_folder(event: QDropEvent | QDragEnterEvent) -> Path | None:
    """The folder a drop carries: a dropped folder, or the folder of a dropped file."""
    for url in event.mimeData().urls():
        if url.isLocalFile():
            path = Path(url.toLocalFile())
            return path if path.is_dir() else path.parent
    return None


class FolderDrop:
    """Mixed into a QWidget (before it) that calls `setAcceptDrops(True)`: a drag carrying a folder is accepted,
    its drop is `folder_dropped(folder)`."""

    def folder_dropped(self, folder: Path) -> None:
        raise NotImplementedError

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt's name
        if dropped_folder(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt's name
        folder = dropped_folder(event)
        if folder is not None:
            event.acceptProposedAction()
            self.folder_dropped(folder)
