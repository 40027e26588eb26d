"""The full slide with smooth pan/zoom and the ROI rectangle the stream crops.

The slide comes as a `SlideReader` and is shown on its own levels, never decoded whole by the view: the
coarsest level (read by the loader) is always shown, stretched over the slide; when the user zooms in past
its resolution, `TileLayer` shows the visible tiles of the level the zoom needs, read off the GUI thread.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QLabel,
    QSpinBox,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...core.roi import Roi
from ...core.slides import SlideReader
from ..runtime.jobs import Jobs
from ..widgets.shortcuts import with_key
from .slide_overlay import ROI_Z, SlideOverlay
from .tile_layer import TileLayer

#: Part of the visible width/height added on each side of the tiles asked for, so short pans find them read.
DETAIL_MARGIN = 0.25
ROI_COLOR = QColor(255, 200, 0)


#: A left drag inside the ROI pans instead of moving it when the ROI covers this share of the visible view
#: (zoomed in, there is nothing else to grab); its edge, handles, the arrow keys and the fields still move it.
PAN_INSIDE_SHARE = 0.5
HANDLE_SIZE = 11


class _RoiRect(pg.ROI):
    """The ROI rectangle: integer pixel snapping, handles on corners (and edges unless square)."""

    handleSize = HANDLE_SIZE

    def __init__(self, bounds: QRectF, square: bool = False) -> None:
        pen = pg.mkPen(ROI_COLOR, width=2)
        super().__init__(
            (0, 0), (1, 1), maxBounds=bounds, snapSize=1.0, translateSnap=True, scaleSnap=True,
            rotatable=False, pen=pen, hoverPen=pg.mkPen(ROI_COLOR.lighter(130), width=3),
            handlePen=pg.mkPen(ROI_COLOR), handleHoverPen=pg.mkPen("w", width=2),
        )
        self.setZValue(10)
        self.set_square(square)  # (its handles made once: an image shown after another makes a new ROI)

    def _covers_view(self) -> bool:
        view = self.getViewBox()
        if view is None:
            return False
        visible = view.viewRect()
        pos, size = self.pos(), self.size()
        inside = visible.intersected(QRectF(pos.x(), pos.y(), size.x(), size.y()))
        area = visible.width() * visible.height()
        return area > 0 and inside.width() * inside.height() >= PAN_INSIDE_SHARE * area

    def hoverEvent(self, ev) -> None:
        if not ev.isExit() and self._covers_view():  # do not claim the left drag: the ViewBox under it pans
            self.currentPen = self.pen
            self.update()
            return
        super().hoverEvent(ev)

    def mouseDragEvent(self, ev) -> None:
        if ev.isStart() and ev.button() == Qt.MouseButton.LeftButton and self._covers_view():
            ev.ignore()
            return
        super().mouseDragEvent(ev)

    def set_square(self, square: bool) -> None:
        for handle in list(self.getHandles()):
            self.removeHandle(handle)
        self.aspectLocked = square
        for x in (0, 1):
            for y in (0, 1):
                self.addScaleHandle((x, y), (1 - x, 1 - y), lockAspect=square)
        if not square:
            for pos, center in (((0.5, 0), (0.5, 1)), ((0.5, 1), (0.5, 0)), ((0, 0.5), (1, 0.5)), ((1, 0.5), (0, 0.5))):
                self.addScaleHandle(pos, center)


class _SlideGraphicsView(pg.GraphicsView):
    """The drawing surface; arrow keys nudge the ROI (Shift: 10 px)."""

    nudged = Signal(int, int)

    _ARROWS: ClassVar[dict[Qt.Key, tuple[int, int]]] = {
        Qt.Key.Key_Left: (-1, 0), Qt.Key.Key_Right: (1, 0), Qt.Key.Key_Up: (0, -1), Qt.Key.Key_Down: (0, 1)}

    def keyPressEvent(self, event: QKeyEvent) -> None:
        step = self._ARROWS.get(Qt.Key(event.key()))
        if step is None:
            super().keyPressEvent(event)
            return
        n = 10 if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else 1
        self.nudged.emit(step[0] * n, step[1] * n)
        event.accept()


class SlideView(QWidget):
    """Slide + ROI editor. `roiChanged(Roi)` fires when the user finishes changing the ROI (not on set_roi)."""

    roiChanged = Signal(object)
    resetRoiRequested = Signal()
    hovered = Signal(str)

    def __init__(self, jobs: Jobs, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reader: SlideReader | None = None
        self._syncing = False

        self.view = _SlideGraphicsView(background="#1b1d22")
        self.view.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.view.setToolTip("Wheel: zoom · drag: pan · drag the yellow box or its handles: move/resize the ROI "
                             "(zoomed into the ROI, a drag inside it pans)")
        self.notice = QLabel("", self.view)
        self.notice.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.notice.setStyleSheet("color: #e3e5e8; background: rgba(38, 40, 45, 220); padding: 10px 16px;"
                                  "border-radius: 6px; font-size: 14px;")
        self.notice.hide()
        self.vb = pg.ViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.view.setCentralItem(self.vb)
        self.base = pg.ImageItem(axisOrder="row-major")
        self.vb.addItem(self.base)
        self.tiles = TileLayer(self.vb, jobs, parent=self)
        self.overlay = SlideOverlay(self.vb)  # a whole-slide run's heatmap and seams
        self.roi_item: _RoiRect | None = None

        self._detail_timer = QTimer(self, singleShot=True, interval=15)
        self._detail_timer.timeout.connect(self._update_detail)
        self.vb.sigRangeChanged.connect(lambda *_: self._detail_timer.isActive() or self._detail_timer.start())
        self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.view.viewport().installEventFilter(self)
        self.view.nudged.connect(self.nudge)

        self.spins: dict[str, QSpinBox] = {}
        # What does not fit a narrow window goes behind the bar's » button (from the end), never widening it: the
        # ROI's four fields come first, so they show in the narrowest first window (1177 px wide), and the view's
        # Fit and 1:1 (also View menu keys) after them.
        bar = QToolBar()
        bar.setContentsMargins(4, 0, 4, 0)
        self.fit_button = self._tool_button("Fit", with_key("Fit the whole slide in the view", "fit"), self.fit)
        self.one_button = self._tool_button("1:1", with_key("One slide pixel per screen pixel", "one_to_one"),
                                            self.one_to_one)
        bar.addWidget(QLabel("ROI "))
        for name in ("x0", "y0", "x1", "y1"):
            spin = QSpinBox()
            spin.setKeyboardTracking(False)
            spin.setPrefix(f"{name} ")
            # no arrow buttons (the wheel and the arrow keys still step): the four fit the bar in a 1177 px window
            spin.setButtonSymbols(QAbstractSpinBox.ButtonSymbols.NoButtons)
            spin.setRange(0, 0)
            spin.setToolTip(f"ROI {name} in slide pixels (the box is [x0, x1) x [y0, y1))")
            spin.valueChanged.connect(lambda _v, n=name: self._on_spin_changed(n))
            self.spins[name] = spin
            bar.addWidget(spin)
        bar.addSeparator()
        bar.addWidget(self.fit_button)
        bar.addWidget(self.one_button)
        bar.addSeparator()
        self.size_label = QLabel("")
        self.size_label.setContentsMargins(6, 0, 6, 0)
        self.size_label.setToolTip("The ROI's size in slide pixels")
        bar.addWidget(self.size_label)
        self.square_check = QCheckBox("Square")
        self.square_check.setToolTip(with_key("Keep the ROI square (the model input is square)", "roi_square"))
        self.square_check.toggled.connect(self.set_square)
        bar.addWidget(self.square_check)
        self.reset_button = self._tool_button(
            "Reset ROI", with_key("Back to the dataset's default ROI for this image", "roi_reset"),
            self.resetRoiRequested.emit)
        bar.addWidget(self.reset_button)
        self.controls = bar

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(bar)
        layout.addWidget(self.view, 1)
        self._set_controls_enabled(False)

    def _tool_button(self, text: str, tip: str, slot) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    def _set_controls_enabled(self, enabled: bool) -> None:
        for widget in (*self.spins.values(), self.square_check, self.reset_button, self.fit_button, self.one_button):
            widget.setEnabled(enabled)

    # ----------------------------------------------------------------- image
    def set_loading(self, text: str) -> None:
        """Empty the view and say what is being loaded (a big slide takes seconds to decode)."""
        self.clear()
        self.notice.setText(text)
        self.notice.adjustSize()
        self._place_notice()
        self.notice.show()

    def _place_notice(self) -> None:
        rect = self.view.rect()
        self.notice.move(rect.center() - self.notice.rect().center())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place_notice()

    def set_reader(self, reader: SlideReader, base_rgb: np.ndarray | None, roi: Roi) -> None:
        """Show a slide with its ROI and fit it; `base_rgb` is its coarsest level (read off the GUI thread),
        or None where that level is too big to hold (then only the tiles of finer levels show)."""
        self.notice.hide()
        self.reader = reader
        w, h = reader.size
        if base_rgb is not None:
            self.base.setImage(base_rgb, autoLevels=False, levels=(0, 255))
            self.base.setRect(QRectF(0, 0, w, h))
        else:
            self.base.clear()
        self.tiles.set_reader(reader)
        self.overlay.clear()
        if self.roi_item is None:
            self.roi_item = _RoiRect(QRectF(0, 0, w, h), self.square_check.isChecked())
            self.roi_item.setZValue(ROI_Z)
            self.roi_item.sigRegionChanged.connect(self._on_roi_dragging)
            self.roi_item.sigRegionChangeFinished.connect(self._on_roi_drag_finished)
            self.vb.addItem(self.roi_item)
        else:  # (kept from the image before, hidden meanwhile: a new one and its handles took 5 ms of each PgDown)
            self.roi_item.maxBounds = QRectF(0, 0, w, h)
            self.roi_item.show()
        self._syncing = True
        for name, spin in self.spins.items():
            spin.setRange(0, w - 1 if name == "x0" else h - 1 if name == "y0" else w if name == "x1" else h)
        self._syncing = False
        self.vb.setLimits(xMin=-w, xMax=2 * w, yMin=-h, yMax=2 * h, minXRange=8, minYRange=8)
        self._set_controls_enabled(True)
        self.set_roi(roi)
        self.fit()

    def clear(self) -> None:
        self.reader = None
        self.base.clear()
        self.tiles.set_reader(None)
        self.overlay.clear()
        if self.roi_item is not None:
            self.roi_item.hide()
        self.size_label.setText("")
        self._set_controls_enabled(False)

    def shutdown(self) -> None:
        """Drop the tile reads not started yet (call once, when the window closes)."""
        self.tiles.shutdown()

    def fit(self) -> None:
        if self.reader:
            w, h = self.reader.size
            self.vb.setRange(QRectF(0, 0, w, h), padding=0.02)

    def one_to_one(self) -> None:
        """Zoom so one slide pixel covers one screen pixel, keeping the view centre."""
        if self.reader:
            px, _ = self.vb.viewPixelSize()
            self.vb.scaleBy(s=(1 / px, 1 / px), center=self.vb.viewRect().center())

    def _on_mouse_moved(self, pos) -> None:
        if not self.reader:
            return
        point = self.vb.mapSceneToView(pos)
        x, y = math.floor(point.x()), math.floor(point.y())
        w, h = self.reader.size
        if 0 <= x < w and 0 <= y < h:
            rgb = self.tiles.pixel(x, y)
            self.hovered.emit(f"slide x={x} y={y}" + (f"  RGB {rgb[0]} {rgb[1]} {rgb[2]}" if rgb else ""))

    def eventFilter(self, watched, event) -> bool:
        """The hover readout goes when the mouse leaves the slide (`hovered("")`)."""
        if event.type() == QEvent.Type.Leave:
            self.hovered.emit("")
        return False

    def _update_detail(self) -> None:
        """Show the visible tiles of the level the zoom needs, when the base level is too coarse (and the
        whole-slide overlay's level for the zoom)."""
        reader = self.reader
        if reader is None:
            return
        self.overlay.update_level()
        px, _ = self.vb.viewPixelSize()
        level = reader.level_for(px)
        view = self.vb.viewRect()
        if level == len(reader.levels) - 1 and self.base.image is not None:
            self.tiles.update(None, view)
            return
        mx, my = view.width() * DETAIL_MARGIN, view.height() * DETAIL_MARGIN
        self.tiles.update(level, view.adjusted(-mx, -my, mx, my))

    # ------------------------------------------------------------------- ROI
    def roi(self) -> Roi | None:
        """The ROI as drawn, in whole slide pixels, inside the image."""
        if self.roi_item is None or self.reader is None:
            return None
        pos, size = self.roi_item.pos(), self.roi_item.size()
        x0, y0 = round(pos.x()), round(pos.y())
        w, h = self.reader.size
        return Roi(x0, y0, x0 + max(round(size.x()), 1), y0 + max(round(size.y()), 1)).clamped(w, h)

    def set_roi(self, roi: Roi) -> None:
        """Place the rectangle (clamped into the image); does not emit `roiChanged`."""
        if self.roi_item is None or self.reader is None:
            return
        roi = roi.clamped(*self.reader.size)
        self._syncing = True
        try:
            self.roi_item.setPos((roi.x0, roi.y0), update=False, finish=False)
            self.roi_item.setSize((roi.width, roi.height), update=True, finish=False)
            self._sync_spins(roi)
        finally:
            self._syncing = False

    def set_square(self, square: bool) -> None:
        """Lock the ROI to a square; turning it on shrinks the box to its shorter side."""
        if self.square_check.isChecked() != square:
            self.square_check.setChecked(square)  # re-enters through toggled
            return
        if self.roi_item is None:
            return
        self.roi_item.set_square(square)
        roi = self.roi()
        if square and roi is not None and roi.width != roi.height:
            side = min(roi.width, roi.height)
            self._apply_user_roi(Roi(roi.x0, roi.y0, roi.x0 + side, roi.y0 + side))

    def nudge(self, dx: int, dy: int) -> None:
        roi = self.roi()
        if roi is not None:
            self._apply_user_roi(Roi(roi.x0 + dx, roi.y0 + dy, roi.x1 + dx, roi.y1 + dy))

    def _apply_user_roi(self, roi: Roi) -> None:
        self.set_roi(roi)
        self.roiChanged.emit(self.roi())

    def _sync_spins(self, roi: Roi) -> None:
        for name, value in zip(("x0", "y0", "x1", "y1"), roi.as_tuple()):
            spin = self.spins[name]
            spin.blockSignals(True)
            spin.setValue(value)
            spin.blockSignals(False)
        self.size_label.setText(f"{roi.width} × {roi.height}")

    def _on_roi_dragging(self) -> None:
        if not self._syncing and (roi := self.roi()) is not None:
            self._sync_spins(roi)

    def _on_roi_drag_finished(self) -> None:
        if not self._syncing and (roi := self.roi()) is not None:
            self._sync_spins(roi)
            self.roiChanged.emit(roi)

    def _on_spin_changed(self, name: str) -> None:
        current = self.roi()
        if self._syncing or current is None:
            return
        values = {n: s.value() for n, s in self.spins.items()}
        if self.square_check.isChecked():  # the edited edge decides the side; the opposite edges follow
            side = values["x1"] - values["x0"] if name in ("x0", "x1") else values["y1"] - values["y0"]
            if name in ("x0", "x1"):
                values["y1"] = values["y0"] + side
            else:
                values["x1"] = values["x0"] + side
        roi = Roi(values["x0"], values["y0"], values["x1"], values["y1"])
        if roi.x1 <= roi.x0 or roi.y1 <= roi.y0:
            self._sync_spins(current)  # an empty box: put the fields back
            return
        self._apply_user_roi(roi)

