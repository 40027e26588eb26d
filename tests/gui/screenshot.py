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

import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QSettings, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QApplication,
    QCheckBox,
    QComboBox,
    QDockWidget,
    QGraphicsView,
    QLabel,
    QPushButton,
    QRadioButton,
    QStatusBar,
    QStyle,
    QStyleOptionButton,
    QStyleOptionComboBox,
    QTabBar,
    QTableView,
    QWidget,
)

from segscope.core.roi import Roi


def clipped_widgets(window: QWidget) -> list[str]:
    """Every shown widget whose geometry leaves its parent's (a layout squeezed below its minimum cuts it off),
    as "Class 'text' (x, y, w, h) in Parent (w, h)"; the contents of scroll areas scroll, and docks behind
    another tab are parked off screen by Qt, so they do not count."""
    from segscope.gui.widgets.docking import dock_seen

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
    bars = [bar for bar in window.findChildren(QTabBar) if bar.parent() is window and bar.isVisible()]
    for index, bar in enumerate(bars):  # a dock tab bar Qt left behind lies over another part of the window
        for other in bars[index + 1:]:
            if bar.geometry().intersects(other.geometry()):
                found.append(f"QTabBar {[bar.tabText(i) for i in range(bar.count())]} {bar.geometry().getRect()} "
                             f"over QTabBar {[other.tabText(i) for i in range(other.count())]}")
    return found


def _seen(widget: QWidget, window: QWidget) -> bool:
    """Shown in `window` and not in a dock behind another tab."""
    from segscope.gui.widgets.docking import dock_seen

    return widget.isVisibleTo(window) and not any(isinstance(p, QDockWidget) and not dock_seen(p)
                                                  for p in [widget, *_ancestors(widget)])


def _plain(text: str) -> str:
    if "<" not in text:
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def _needed_and_room(widget: QWidget) -> tuple[str, int, int] | None:
    """The text `widget` shows, the pixels it needs in one line and the pixels its contents rect gives it
    (None: a widget that shows no one-line text, or one that wraps and has the height it needs)."""
    metrics = widget.fontMetrics()
    if isinstance(widget, QLabel):
        text = _plain(widget.text())
        if not text or widget.pixmap() is not None and not widget.pixmap().isNull():
            return None
        room = widget.contentsRect().width() - 2 * widget.margin() - max(widget.indent(), 0)
        if widget.wordWrap():  # wraps: cut only when it needs more height than it has
            needed = widget.heightForWidth(widget.width())
            return (text, 0, 0) if needed <= widget.height() + 1 else (text, needed, widget.height())
        return text, max(metrics.horizontalAdvance(line) for line in text.splitlines()), room
    if isinstance(widget, QComboBox):
        option = QStyleOptionComboBox()
        widget.initStyleOption(option)
        field = widget.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                              QStyle.SubControl.SC_ComboBoxEditField, widget)
        icon = widget.iconSize().width() + 4 if not widget.itemIcon(widget.currentIndex()).isNull() else 0
        text = widget.currentText() if widget.currentIndex() >= 0 else widget.placeholderText()  # (drawn when empty)
        return text, metrics.horizontalAdvance(text) + icon, field.width()
    if isinstance(widget, QAbstractButton):
        text = widget.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
        if not text:
            return None
        if isinstance(widget, (QPushButton, QCheckBox, QRadioButton)):
            option = QStyleOptionButton()
            widget.initStyleOption(option)
            element = (QStyle.SubElement.SE_PushButtonContents if isinstance(widget, QPushButton) else
                       QStyle.SubElement.SE_CheckBoxContents if isinstance(widget, QCheckBox) else
                       QStyle.SubElement.SE_RadioButtonContents)
            room = widget.style().subElementRect(element, option, widget).width()
            icon = widget.iconSize().width() + 4 if not widget.icon().isNull() else 0
            return text, metrics.horizontalAdvance(text) + icon, room
        return text, widget.sizeHint().width(), widget.width()  # a tool button's hint is its text and margins
    return None


def clipped_texts(window: QWidget) -> list[str]:
    """Every label, button and combo box shown whose text does not fit its contents rect, and a status bar
    message that does not fit left of the permanent widgets: "Class 'text' needs N px, has M". A text cut
    on purpose is not reported when it shows "…" and its tooltip holds it whole (`gui.compact`)."""
    from segscope.gui.widgets.compact import ELIDES, hover_text

    found = []
    for widget in window.findChildren(QWidget):
        if not _seen(widget, window):
            continue
        measured = _needed_and_room(widget)
        if measured is None or measured[1] <= measured[2] + 1:
            continue
        text, needed, room = measured
        if widget.property(ELIDES):  # drawn cut with "…": whole on hover, or it is lost
            if text not in hover_text(widget):
                found.append(f"{type(widget).__name__} {text!r} is cut with '…' and not whole on hover")
            continue
        found.append(f"{type(widget).__name__} {text!r} needs {needed} px, has {room}")
    for view, text, needed, room in cut_cells(window):  # a table's cell: cut only with "…", whole on hover
        tip = view.model().data(view.model().index(*_cell_of(view, text)), Qt.ItemDataRole.ToolTipRole) or ""
        if view.textElideMode() == Qt.TextElideMode.ElideNone:
            found.append(f"{type(view).__name__} cell {text!r} needs {needed} px, has {room}")
        elif text not in str(tip):
            found.append(f"{type(view).__name__} cell {text!r} is cut with '…' and not whole on hover")
    for view in window.findChildren(QTableView):  # a column title wider than its section: cut only with "…"
        header = view.horizontalHeader()
        if not _seen(view, window) or header.textElideMode() != Qt.TextElideMode.ElideNone:
            continue
        for section in range(header.count()):
            title = str(view.model().headerData(section, Qt.Orientation.Horizontal) or "")
            needed = header.fontMetrics().horizontalAdvance(title) + 2 * header.style().pixelMetric(
                QStyle.PixelMetric.PM_HeaderMargin, None, header)  # the section's margins
            if not header.isSectionHidden(section) and title and needed > header.sectionSize(section):
                found.append(f"QHeaderView section {title!r} needs {needed} px, has {header.sectionSize(section)}")
    for view in window.findChildren(QAbstractItemView):  # columns a view without a scroll bar cannot show
        header = view.horizontalHeader() if isinstance(view, QTableView) else None
        if (header is not None and _seen(view, window) and header.length() > view.viewport().width() + 1
                and view.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff):
            found.append(f"{type(view).__name__} columns need {header.length()} px, the view has "
                         f"{view.viewport().width()} and no scroll bar")
    for graphics in window.findChildren(QGraphicsView):  # titles drawn in plots and panels
        if not _seen(graphics, window):
            continue
        for item in graphics.scene().items():
            if isinstance(item, pg.LabelItem) and item.isVisible() and item.item.toPlainText().strip():
                text, room = item.itemRect(), item.rect()
                if text.width() > room.width() + 1 or text.height() > room.height() + 1:
                    found.append(f"{type(item).__name__} {item.item.toPlainText()!r} needs "
                                 f"{text.width():.0f} x {text.height():.0f} px, has {room.width():.0f} x "
                                 f"{room.height():.0f}")
    for bar in window.findChildren(QStatusBar):
        message = bar.currentMessage()
        if message and bar.isVisible():
            starts = [w.x() for w in bar.children() if isinstance(w, QWidget) and w.isVisible() and w.x() > 0
                      and type(w).__name__ != "QSizeGrip"]
            room = min(starts, default=bar.width()) - 8  # the message is drawn a few px in from the left
            needed = bar.fontMetrics().horizontalAdvance(message)
            if needed > room:
                found.append(f"QStatusBar message {message!r} needs {needed} px, has {room}")
    return found


def cut_cells(window: QWidget) -> list[tuple[QTableView, str, int, int]]:
    """Every cell of a table shown whose text does not fit its column on screen (on purpose or not): (the view,
    the text, the pixels it needs, the pixels it has). A cell's text is drawn inside a margin on each side."""
    found = []
    for view in window.findChildren(QTableView):
        if not _seen(view, window):
            continue
        model, metrics = view.model(), view.fontMetrics()
        margin = view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1
        rows = [r for r in range(model.rowCount()) if not view.isRowHidden(r)
                and view.rowViewportPosition(r) < view.viewport().height()]
        for column in range(model.columnCount()):
            left = view.columnViewportPosition(column)
            if view.isColumnHidden(column) or left >= view.viewport().width():
                continue
            room = min(view.columnWidth(column), view.viewport().width() - left) - 2 * margin
            for row in rows:
                text = str(model.data(model.index(row, column)) or "")
                needed = metrics.horizontalAdvance(text)
                if text and needed > room:
                    found.append((view, text, needed, room))
    return found


def _cell_of(view: QTableView, text: str) -> tuple[int, int]:
    """The (row, column) of the first cell of `view` showing `text`."""
    model = view.model()
    return next((r, c) for r in range(model.rowCount()) for c in range(model.columnCount())
                if str(model.data(model.index(r, c)) or "") == text)


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
    from segscope.core.backend_choice import BackendChoice
    from segscope.core.stream.pipeline import DEFAULT_PIPELINE
    from segscope.gui.app import apply_dark_theme
    from segscope.gui.shell.main_window import MainWindow

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
    settle(app)
    if measure is not None:
        graphics = window.panels.graphics  # the three image panels, without their controls and readout
        on_screen = QRect(graphics.mapTo(window, QPoint(0, 0)), graphics.size()).intersected(window.rect())
        measure.update(window_height=window.height(), window_width=window.width(),
                       results_dock_height=window.results_dock.height(),
                       panels_height=on_screen.height() if graphics.isVisible() else 0,
                       minimum_width=window.minimumSizeHint().width(), clipped=clipped_widgets(window),
                       roi_fields_shown=all(spin.isVisible() and window.slide.controls.rect().contains(spin.geometry())
                                            for spin in window.slide.spins.values()),
                       clipped_texts=clipped_texts(window))
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out)):
        raise OSError(f"{out}: could not save the screenshot")
    if measure is not None and whole_slide_roi is None:
        window.editing.accept_prediction(None)  # unsaved edits: the row says "done · unsaved"
        settle(app)
        measure["statuses"] = [row.status for row in window.dataset_panel.model.rows]
        measure["cut_cells"] = [text for _view, text, _needed, _room in cut_cells(window)]
        measure["clipped_texts"] += [f"{text} (with unsaved edits)" for text in clipped_texts(window)]
        measure["clipped_texts"] += [f"{text} (after the ROI moved, with the brush)"
                                     for text in _texts_after_an_roi_move(window, app)]
        window.editing.discard()  # (closing asks nothing)
    if measure is not None and whole_slide_roi is None:
        measure["docks"] = _texts_in_each_dock(window, app, out.with_suffix(""))
    window.close()
    return out


def _texts_in_each_dock(window: QWidget, app: QApplication, stem: Path) -> dict[str, list[str]]:
    """Whether the Metrics histogram's axis shows without scrolling (default metrics, and every QA metric), then
    each dock that shares a tab (Defects, Profile, Timing, Reliability, Metrics, Review, Messages) raised in turn,
    with every QA metric computed: its clipped texts; its screenshot saved as `<stem>-<dock>.png`."""
    found: dict[str, list[str]] = {"Metrics histogram": []}
    window.metrics_dock.show()
    window.metrics_dock.raise_()
    plot, panel = window.metrics_panel.plot, window.metrics_panel
    for spec in ("", "all"):  # the default metrics, then every QA metric (a dozen rows more): the axis shows
        window.quality_tools.set_spec(spec, remember=False)
        for _ in range(50):  # (the QA metrics are scored on a worker)
            settle(app)
            if not spec or panel.value_labels["brier"].isVisibleTo(panel):
                break
        bottom = plot.mapTo(window.metrics_dock, QPoint(0, plot.height())).y()
        if bottom > window.metrics_dock.height() or not plot.isVisibleTo(window):
            found["Metrics histogram"].append(f"with metrics {spec or 'default'!r} it ends at {bottom} px, below "
                                              f"the dock's {window.metrics_dock.height()} px")
    for dock in (window.quality_tools.defects_dock, window.quality_tools.reliability_dock, window.profile_dock,
                 window.inspection.timing_dock, window.inspection.review_dock, window.metrics_dock,
                 window.messages_dock):
        dock.show()
        dock.raise_()
        cut = ["not settled"]
        for _ in range(10):  # a dock shown (or its numbers computed) just now lays out over a few event rounds
            settle(app)
            cut = clipped_texts(window) + clipped_widgets(window)
            if not cut:
                break
        found[dock.windowTitle()] = cut
        window.grab().save(f"{stem}-{dock.windowTitle().lower()}.png")
    return found


def _texts_after_an_roi_move(window: QWidget, app: QApplication) -> list[str]:
    """Clipped texts in the states that cut them before: the result dimmed as "ROI changed: run again" (panel
    titles, the row's status, the headline), the brush's note in the status bar and a hover readout."""
    roi = window.slide.roi()
    window.slide.set_roi(Roi(roi.x0 + 8, roi.y0 + 8, roi.x1 + 8, roi.y1 + 8))
    window.slide.roiChanged.emit(window.slide.roi())
    window.editing.actions.set_tool("brush")
    result = window.panels.result
    if result is not None:
        window.panels.readout_at(result.roi.x0 + result.roi.width / 2, result.roi.y0 + result.roi.height / 2)
    settle(app)
    return clipped_texts(window)


def settle(app: QApplication) -> None:
    """Let queued paints, re-scoring and the slide's detail layer settle."""
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)


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
