"""`segscope` with no subcommand: the viewer on a dataset (default: the demo dataset) with the saved backend.

On a first start the demo dataset is generated into the per-user data folder (GenericDataLocation/SegScope/
demo) on the window's job runner while the window is already up and says so (`ViewerCommands.open_dataset`'s
`prepare`); it opens when ready.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QStandardPaths, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QToolTip

from ..core.backend_choice import BackendChoice
from ..core.dataset.demo import ensure_demo_dataset, has_demo_dataset
from .runtime import settings
from .runtime.collector import freeze_startup_objects
from .shell.main_window import MainWindow


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


def open_demo(window: MainWindow, target: Path) -> None:
    """Open the demo dataset; on a first start it is generated in the background first, the window saying so."""
    first = not has_demo_dataset(target)
    window.commands.open_dataset(target, ensure_demo_dataset,
                                 "Generating the demo dataset (first start only, about 20 s)…" if first else "")


def close_on_interrupt(window: MainWindow) -> Callable[[], bool]:
    """Ctrl+C in the terminal that started the viewer closes its window as its close button does (the decisions and
    edits still waiting are written). Python runs a signal handler only between its own bytecodes, so a timer wakes
    it while Qt's loop waits: without this the KeyboardInterrupt came out as a traceback of whatever slot ran next,
    and the window stayed. Returns whether it was interrupted."""
    interrupted: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        interrupted.append(signum)
        window.close()
    signal.signal(signal.SIGINT, interrupt)
    waking = QTimer(window)
    waking.timeout.connect(lambda: None)
    waking.start(200)
    return lambda: bool(interrupted)


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
    freeze_startup_objects()
    if argv:
        window.commands.open_dataset(Path(argv[0]))
    else:
        open_demo(window, demo_dir())
    previous = signal.getsignal(signal.SIGINT)
    try:
        interrupted = close_on_interrupt(window)
        code = app.exec()
    finally:
        signal.signal(signal.SIGINT, previous)
    return 130 if interrupted() else code  # (as the command line's Ctrl+C)
