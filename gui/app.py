"""`segscope` with no subcommand: the viewer on a dataset (default: the demo dataset) with the saved backend.

On a first start the demo dataset is generated into the per-user data folder (GenericDataLocation/SegScope/
demo) on the window's job runner while the window is already up and says so; it opens when ready.
"""

from __future__ import annotations

import shutil
import sys
from functools import partial
from pathlib import Path

from PySide6.QtCore import QStandardPaths
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QToolTip

from ..core.dataset.demo import generate_demo_dataset
from ..core.files.fileio import staging_folder
from .dialogs.backend_dialog import BackendChoice
from .runtime import settings
from .shell.main_window import MainWindow

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
    QToolTip.setPalette(palette)  # some styles draw tooltips with their own (white) palette otherwise


def demo_dir() -> Path:
    """Where the demo dataset lives for this user (e.g. ~/.local/share/SegScope/demo)."""
    data = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation))
    return data / settings.APPLICATION / "demo"


def ensure_demo_dataset(target: Path) -> Path:
    """Generate the demo dataset into `target` unless it is there (made in a `fileio.staging_folder`, then
    renamed into place, so an interrupted first start never leaves half a dataset behind, nor debris after
    the next start)."""
    if (target / "001" / "image.png").is_file():
        return target
    with staging_folder(target.parent) as staging:
        made = staging / target.name
        generate_demo_dataset(made, count=DEMO_COUNT)
        if target.exists():  # a partial folder from an older version: replace it
            shutil.rmtree(target)
        made.rename(target)
    return target


def make_demo(target: Path) -> tuple[Path | None, str]:
    """`ensure_demo_dataset` on a worker: the folder, or why it could not be written (a full disk, a
    read-only folder: said as such, not as a bug)."""
    try:
        return ensure_demo_dataset(target), ""
    except OSError as exc:
        return None, str(exc)


def open_demo(window: MainWindow, target: Path) -> None:
    """Open the demo dataset; on a first start generate it in the background, saying so in the window."""
    if (target / "001" / "image.png").is_file():
        window.commands.open_dataset(target)
        return
    text = "Generating the demo dataset (first start only, about 20 s)…"
    window.slide.set_loading(text)
    window.panels.set_busy("The demo slides are being generated; they open here when ready")
    window.statusBar().showMessage(text)

    def finished(answer: tuple[Path | None, str]) -> None:
        path, error = answer
        window.statusBar().clearMessage()
        if path is None:
            window.slide.set_loading("")
            window.messages.add("error", f"Generating the demo dataset in {target}: {error}")
        else:
            window.commands.open_dataset(path)

    window.jobs.submit("demo", partial(make_demo, target), finished,
                       lambda error, details: finished((None, error)))


def main(argv: list[str] | None = None) -> int:
    """Open the viewer; `argv` may hold one dataset folder."""
    argv = sys.argv[1:] if argv is None else argv
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0] if sys.argv else "segscope"])
    app.setOrganizationName(settings.ORGANIZATION)
    app.setApplicationName(settings.APPLICATION)
    apply_dark_theme(app)
    window = MainWindow()
    window.commands.open_backend(BackendChoice.from_profile(settings.backend_profile()))
    window.show()
    if argv:
        window.commands.open_dataset(Path(argv[0]))
    else:
        open_demo(window, demo_dir())
    return app.exec()
