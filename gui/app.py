"""`segscope` with no subcommand: the viewer on a dataset (default: the demo dataset) with the saved backend.

On first run the demo dataset is generated into the per-user data folder (AppDataLocation/demo) behind a
progress dialog; it is written to a temporary folder and renamed into place, so an interrupted first run
never leaves half a dataset behind.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from pathlib import Path

from PySide6.QtCore import QStandardPaths, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QMessageBox, QProgressDialog

from ..core.demo_data import generate_demo_dataset
from ..core.errors import SegScopeError
from . import settings
from .backend_dialog import BackendChoice
from .main_window import MainWindow

DEMO_COUNT = 8


def apply_dark_theme(app: QApplication) -> None:
    app.setStyle("Fusion")
    palette = QPalette()
    colors = {
        QPalette.ColorRole.Window: "#26282d", QPalette.ColorRole.WindowText: "#e3e5e8",
        QPalette.ColorRole.Base: "#1d1f23", QPalette.ColorRole.AlternateBase: "#24272c",
        QPalette.ColorRole.ToolTipBase: "#30333a", QPalette.ColorRole.ToolTipText: "#e3e5e8",
        QPalette.ColorRole.Text: "#e3e5e8", QPalette.ColorRole.Button: "#30333a",
        QPalette.ColorRole.ButtonText: "#e3e5e8", QPalette.ColorRole.BrightText: "#ff7b72",
        QPalette.ColorRole.Highlight: "#3d6fb4", QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#79b8ff", QPalette.ColorRole.PlaceholderText: "#80858c",
    }
    for role, color in colors.items():
        palette.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b7078"))
    app.setPalette(palette)


def demo_dir() -> Path:
    """Where the demo dataset lives for this user (e.g. ~/.local/share/SegScope/SegScope/demo)."""
    return Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)) / "demo"


def ensure_demo_dataset(target: Path, parent=None) -> Path:
    """Generate the demo dataset into `target` unless it is there, with a progress dialog meanwhile."""
    if (target / "001" / "image.png").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".demo-", dir=target.parent))
    outcome: list[BaseException | None] = []

    def work() -> None:
        try:
            generate_demo_dataset(staging, count=DEMO_COUNT)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the GUI thread
            outcome.append(exc)

    dialog = QProgressDialog("Generating the demo dataset (first run only)…", "", 0, 0, parent)
    dialog.setWindowTitle("SegScope")
    dialog.setCancelButton(None)
    dialog.setWindowModality(Qt.WindowModality.ApplicationModal)
    dialog.setMinimumDuration(0)
    dialog.show()
    thread = threading.Thread(target=work, name="segscope-demo", daemon=True)
    thread.start()
    while thread.is_alive():
        QApplication.processEvents()
        thread.join(0.05)
    dialog.close()
    if outcome[0] is not None:
        shutil.rmtree(staging, ignore_errors=True)
        raise outcome[0]
    if target.exists():  # a partial folder from an older version: replace it
        shutil.rmtree(target)
    staging.rename(target)
    return target


def main(argv: list[str] | None = None) -> int:
    """Open the viewer; `argv` may hold one dataset folder."""
    argv = sys.argv[1:] if argv is None else argv
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0] if sys.argv else "segscope"])
    app.setOrganizationName(settings.ORGANIZATION)
    app.setApplicationName(settings.APPLICATION)
    apply_dark_theme(app)
    window = MainWindow()
    window.open_backend(BackendChoice.from_profile(settings.backend_profile()))
    window.show()
    try:
        dataset = Path(argv[0]) if argv else ensure_demo_dataset(demo_dir(), window)
    except SegScopeError as exc:
        QMessageBox.critical(window, "SegScope", str(exc))
        dataset = None
    if dataset is not None:
        window.open_dataset(dataset)
    return app.exec()
