"""Save a screenshot of the main window after a run (used by test_screenshot.py and for docs/screenshot.png).

    python tests/gui/screenshot.py DATASET OUT.png [--pipeline FILE] [--item ID] [--size 1600x1000]
                                   [--whole-slide X0,Y0,X1,Y1]

With `--whole-slide`, the item's whole slide is run instead of Run all, and the ROI then moved to the box.

Runs under whatever Qt platform is set (xcb under `xvfb-run`, or offscreen). Exit code 0 when the PNG was
written, 1 when the run did not finish.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSettings
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QDockWidget, QWidget

from segscope.core.roi import Roi


def clipped_widgets(window: QWidget) -> list[str]:
    """Every shown widget whose geometry leaves its parent's (a layout squeezed below its minimum cuts it off),
    as "Class 'text' (x, y, w, h) in Parent (w, h)"; the contents of scroll areas scroll, and docks behind
    another tab are parked off screen by Qt, so they do not count."""
    from segscope.gui.window_layout import dock_seen

    found = []
    for child in window.findChildren(QWidget):
        parent = child.parentWidget()
        if parent is None or not child.isVisibleTo(window) or child.isWindow():
            continue
        chain = [child, *_ancestors(child)]
        if any(isinstance(p, QAbstractScrollArea) for p in chain[1:]) or any(
                isinstance(p, QDockWidget) and not dock_seen(p) for p in chain):
            continue
        if not parent.rect().contains(child.geometry()):
            text = child.text() if hasattr(child, "text") and callable(child.text) else ""
            found.append(f"{type(child).__name__} {text!r} {child.geometry().getRect()} in "
                         f"{type(parent).__name__} {parent.width()}x{parent.height()}")
    return found


def _ancestors(widget: QWidget) -> list[QWidget]:
    chain, parent = [], widget.parentWidget()
    while parent is not None and not parent.isWindow():
        chain.append(parent)
        parent = parent.parentWidget()
    return chain


def capture(dataset: Path, out: Path, pipeline: Path | None = None, item: str | None = None,
            size: tuple[int, int] = (1600, 1000), timeout_s: float = 120.0,
            measure: dict[str, float] | None = None, whole_slide_roi: Roi | None = None) -> Path:
    """Open the window on `dataset`, run all images, show `item` with its result, save the window.
    `measure` receives what a user sees: the window's height and the result panels' on-screen height.
    With `whole_slide_roi`, run the shown image's whole slide instead, then move the ROI there."""
    from segscope.core.stream.pipeline import DEFAULT_PIPELINE
    from segscope.gui.app import apply_dark_theme
    from segscope.gui.backend_dialog import BackendChoice
    from segscope.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(["segscope-screenshot"])
    apply_dark_theme(app)
    window = MainWindow()
    window.resize(*size)
    window.show()
    window.commands.open_backend(BackendChoice(pipeline=pipeline or DEFAULT_PIPELINE))
    if not window.commands.open_dataset(dataset):
        raise RuntimeError(window.messages.messages[-1].text)

    def wait(condition, what: str) -> None:
        end = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > end:
                raise TimeoutError(f"screenshot: timed out waiting for {what}")
            app.processEvents()
            time.sleep(0.01)

    wait(lambda: window.capabilities is not None and window.slide_ready(), "the backend and the first slide")
    if whole_slide_roi is not None:
        if item is not None:
            window.dataset_panel.select_item(item)
            wait(lambda: window.slide_ready() and window.current.id == item, f"image {item}")
        window.commands.run_whole_slide()
        wait(lambda: not window.controller.busy, "the whole-slide run")
        window.slide.set_roi(whole_slide_roi)
        window.slide.roiChanged.emit(window.slide.roi())
    else:
        window.commands.run_all()
        wait(lambda: not window.controller.busy, "run all")
    if item is not None:
        window.dataset_panel.select_item(item)
        wait(lambda: window.slide_ready() and window.current.id == item and bool(window.panels.panel_arrays()),
             f"image {item}")
    window.panels.error_map_action.setChecked(True)
    for _ in range(20):  # let queued paints and the slide's detail layer settle
        app.processEvents()
        time.sleep(0.02)
    if measure is not None:
        graphics = window.panels.graphics  # the three image panels, without their controls and readout
        on_screen = QRect(graphics.mapTo(window, QPoint(0, 0)), graphics.size()).intersected(window.rect())
        measure.update(window_height=window.height(), window_width=window.width(),
                       results_dock_height=window.results_dock.height(),
                       panels_height=on_screen.height() if graphics.isVisible() else 0,
                       minimum_width=window.minimumSizeHint().width(), clipped=clipped_widgets(window))
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out)):
        raise OSError(f"{out}: could not save the screenshot")
    window.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pipeline", type=Path)
    parser.add_argument("--item")
    parser.add_argument("--size", default="1600x1000")
    parser.add_argument("--whole-slide", metavar="X0,Y0,X1,Y1",
                        help="run the item's whole slide, then show this ROI's part of it")
    parser.add_argument("--settings-dir", type=Path,
                        help="keep QSettings here (default: a fresh folder, so the shot shows a new user's layout)")
    args = parser.parse_args(argv)
    settings_dir = args.settings_dir or Path(tempfile.mkdtemp(prefix="segscope-screenshot-"))
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, str(settings_dir))
    width, height = (int(v) for v in args.size.lower().split("x"))
    try:
        roi = Roi(*(int(v) for v in args.whole_slide.split(","))) if args.whole_slide else None
        capture(args.dataset, args.out, args.pipeline, args.item, (width, height), whole_slide_roi=roi)
    except (TimeoutError, RuntimeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
