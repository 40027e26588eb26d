"""The full slide with smooth pan/zoom and the ROI rectangle the stream crops.

Big slides are never handed to Qt as one texture: `Pyramid` keeps the decoded image plus halved copies
down to a base level of at most `BASE_MAX_SIDE` px. The base level is always shown; when the user zooms in
past its resolution, a detail layer shows only the visible part (plus a margin) from the finest level that
the zoom needs, so a 16k x 16k slide costs about one screen of pixels per update.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QKeyEvent
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSpinBox, QToolButton, QVBoxLayout, QWidget

from ..core.pyramid import Pyramid
from ..core.roi import Roi
from .shortcuts import with_key

#: Part of the visible width/height added on each side of the detail layer, so short pans need no update.
DETAIL_MARGIN = 0.5
ROI_COLOR = QColor(255, 200, 0)


#: A left drag inside the ROI pans instead of moving it when the ROI covers this share of the visible view
#: (zoomed in, there is nothing else to grab); its edge, handles, the arrow keys and the fields still move it.
PAN_INSIDE_SHARE = 0.5
HANDLE_SIZE = 11


class _RoiRect(pg.ROI):
    """The ROI rectangle: integer pixel snapping, handles on corners (and edges unless square)."""

    handleSize = HANDLE_SIZE

    def __init__(self, bounds: QRectF) -> None:
        pen = pg.mkPen(ROI_COLOR, width=2)
        super().__init__(
            (0, 0), (1, 1), maxBounds=bounds, snapSize=1.0, translateSnap=True, scaleSnap=True,
            rotatable=False, pen=pen, hoverPen=pg.mkPen(ROI_COLOR.lighter(130), width=3),
            handlePen=pg.mkPen(ROI_COLOR), handleHoverPen=pg.mkPen("w", width=2),
        )
        self.setZValue(10)
        self.set_square(False)

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

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pyramid: Pyramid | None = None
        self._syncing = False
        self._detail_level: int | None = None
        self._detail_rect: tuple[int, int, int, int] | None = None

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
        self.detail = pg.ImageItem(axisOrder="row-major")
        self.detail.setZValue(1)
        for item in (self.base, self.detail):
            self.vb.addItem(item)
        self.roi_item: _RoiRect | None = None

        self._detail_timer = QTimer(self, singleShot=True, interval=15)
        self._detail_timer.timeout.connect(self._update_detail)
        self.vb.sigRangeChanged.connect(lambda *_: self._detail_timer.isActive() or self._detail_timer.start())
        self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.view.viewport().installEventFilter(self)
        self.view.nudged.connect(self.nudge)

        self.spins: dict[str, QSpinBox] = {}
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        self.fit_button = self._tool_button("Fit", with_key("Fit the whole slide in the view", "fit"), self.fit)
        self.one_button = self._tool_button("1:1", with_key("One slide pixel per screen pixel", "one_to_one"),
                                            self.one_to_one)
        bar.addWidget(self.fit_button)
        bar.addWidget(self.one_button)
        bar.addSpacing(12)
        bar.addWidget(QLabel("ROI"))
        for name in ("x0", "y0", "x1", "y1"):
            spin = QSpinBox()
            spin.setKeyboardTracking(False)
            spin.setPrefix(f"{name} ")
            spin.setRange(0, 0)
            spin.setToolTip(f"ROI {name} in slide pixels (the box is [x0, x1) x [y0, y1))")
            spin.valueChanged.connect(lambda _v, n=name: self._on_spin_changed(n))
            self.spins[name] = spin
            bar.addWidget(spin)
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
        bar.addStretch(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
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
    @property
    def image_bgr(self) -> np.ndarray | None:
        """The full-resolution slide (BGR), or None when nothing is shown."""
        return self.pyramid.levels[0] if self.pyramid else None

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

    def set_pyramid(self, pyramid: Pyramid, roi: Roi) -> None:
        """Show a slide (built with `Pyramid.build`, ideally off the GUI thread) with its ROI; fit it."""
        self.notice.hide()
        self.pyramid = pyramid
        w, h = pyramid.size
        base_pixels, _ = pyramid.crop(len(pyramid.levels) - 1, (0, 0, w, h))
        self.base.setImage(base_pixels, autoLevels=False, levels=(0, 255))
        self.base.setRect(QRectF(0, 0, w, h))
        self.detail.clear()
        self.detail.hide()
        self._detail_level = self._detail_rect = None
        if self.roi_item is not None:
            self.vb.removeItem(self.roi_item)
        self.roi_item = _RoiRect(QRectF(0, 0, w, h))
        self.roi_item.set_square(self.square_check.isChecked())
        self.roi_item.sigRegionChanged.connect(self._on_roi_dragging)
        self.roi_item.sigRegionChangeFinished.connect(self._on_roi_drag_finished)
        self.vb.addItem(self.roi_item)
        self._syncing = True
        for name, spin in self.spins.items():
            spin.setRange(0, w - 1 if name == "x0" else h - 1 if name == "y0" else w if name == "x1" else h)
        self._syncing = False
        self.vb.setLimits(xMin=-w, xMax=2 * w, yMin=-h, yMax=2 * h, minXRange=8, minYRange=8)
        self._set_controls_enabled(True)
        self.set_roi(roi)
        self.fit()

    def clear(self) -> None:
        self.pyramid = None
        self.base.clear()
        self.detail.clear()
        if self.roi_item is not None:
            self.vb.removeItem(self.roi_item)
            self.roi_item = None
        self.size_label.setText("")
        self._set_controls_enabled(False)

    def fit(self) -> None:
        if self.pyramid:
            w, h = self.pyramid.size
            self.vb.setRange(QRectF(0, 0, w, h), padding=0.02)

    def one_to_one(self) -> None:
        """Zoom so one slide pixel covers one screen pixel, keeping the view centre."""
        if self.pyramid:
            px, _ = self.vb.viewPixelSize()
            self.vb.scaleBy(s=(1 / px, 1 / px), center=self.vb.viewRect().center())

    def _on_mouse_moved(self, pos) -> None:
        if not self.pyramid:
            return
        point = self.vb.mapSceneToView(pos)
        x, y = math.floor(point.x()), math.floor(point.y())
        w, h = self.pyramid.size
        if 0 <= x < w and 0 <= y < h:
            b, g, r = self.pyramid.levels[0][y, x]
            self.hovered.emit(f"slide x={x} y={y}  RGB {r} {g} {b}")

    def eventFilter(self, watched, event) -> bool:
        """The hover readout goes when the mouse leaves the slide (`hovered("")`)."""
        if event.type() == QEvent.Type.Leave:
            self.hovered.emit("")
        return False

    def _update_detail(self) -> None:
        """Show the visible part at the resolution the zoom needs, when the base level is too coarse."""
        if not self.pyramid:
            return
        px, _ = self.vb.viewPixelSize()
        level = self.pyramid.level_for(px)
        if level == len(self.pyramid.levels) - 1:
            self.detail.hide()
            return
        view = self.vb.viewRect()
        w, h = self.pyramid.size
        visible = (max(int(view.left()), 0), max(int(view.top()), 0),
                   min(math.ceil(view.right()), w), min(math.ceil(view.bottom()), h))
        if visible[0] >= visible[2] or visible[1] >= visible[3]:
            self.detail.hide()
            return
        if level == self._detail_level and self._detail_rect and _contains(self._detail_rect, visible):
            self.detail.show()
            return
        mx, my = int(view.width() * DETAIL_MARGIN), int(view.height() * DETAIL_MARGIN)
        wanted = (visible[0] - mx, visible[1] - my, visible[2] + mx, visible[3] + my)
        pixels, covered = self.pyramid.crop(level, wanted)
        self.detail.setImage(pixels, autoLevels=False, levels=(0, 255))
        self.detail.setRect(QRectF(covered[0], covered[1], covered[2] - covered[0], covered[3] - covered[1]))
        self.detail.show()
        self._detail_level, self._detail_rect = level, covered

    # ------------------------------------------------------------------- ROI
    def roi(self) -> Roi | None:
        """The ROI as drawn, in whole slide pixels, inside the image."""
        if self.roi_item is None or self.pyramid is None:
            return None
        pos, size = self.roi_item.pos(), self.roi_item.size()
        x0, y0 = round(pos.x()), round(pos.y())
        w, h = self.pyramid.size
        return Roi(x0, y0, x0 + max(round(size.x()), 1), y0 + max(round(size.y()), 1)).clamped(w, h)

    def set_roi(self, roi: Roi) -> None:
        """Place the rectangle (clamped into the image); does not emit `roiChanged`."""
        if self.roi_item is None or self.pyramid is None:
            return
        roi = roi.clamped(*self.pyramid.size)
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


def _contains(outer: tuple[int, int, int, int], inner: tuple[int, int, int, int]) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and outer[2] >= inner[2] and outer[3] >= inner[3]

