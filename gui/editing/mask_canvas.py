"""The editing layer: a transparent item over the ROI of the ground-truth panel that turns mouse input into
edit gestures and draws their previews (the brush circle on the cursor, the lasso or polygon in progress).

The layer sits in the panel's ViewBox, so its coordinates are slide pixels: slide pixel (x, y) covers
[x, x + 1) x [y, y + 1). It takes left-button input only while `accepts()` says an edit is possible;
otherwise the press falls through to the ViewBox, which pans (the middle button and the wheel always
navigate).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsObject, QGraphicsSceneHoverEvent, QGraphicsSceneMouseEvent

PREVIEW_COLOR = QColor(255, 255, 255, 220)
PATH_COLOR = QColor(0, 200, 255, 230)


class EditLayer(QGraphicsObject):
    """Emits `pressed`/`moved`/`released`/`doubleClicked` with slide positions (QPointF)."""

    pressed = Signal(QPointF)
    moved = Signal(QPointF)
    released = Signal(QPointF)
    doubleClicked = Signal(QPointF)

    def __init__(self, accepts: Callable[[], bool]) -> None:
        super().__init__()
        self._accepts = accepts
        self._rect = QRectF()  # the ROI: where input is taken
        self._radius = 0.0  # brush preview radius in slide pixels (0: no circle)
        self._cursor: QPointF | None = None
        self._path = QPolygonF()  # lasso / polygon in progress
        self.setZValue(5)  # over the panel image, under the crosshair
        self.setAcceptHoverEvents(True)
        self.setAcceptedMouseButtons(Qt.MouseButton.LeftButton)

    # --------------------------------------------------------------------------------------- state
    def set_rect(self, rect: QRectF) -> None:
        self.prepareGeometryChange()
        self._rect = QRectF(rect)

    def set_brush_radius(self, radius: float) -> None:
        """Preview circle radius (0 hides it)."""
        self.prepareGeometryChange()
        self._radius = radius

    def set_path(self, points: list[QPointF]) -> None:
        self.update(self._path.boundingRect().adjusted(-2, -2, 2, 2))
        self._path = QPolygonF(points)
        self.update(self._path.boundingRect().adjusted(-2, -2, 2, 2))

    def set_cursor_pos(self, pos: QPointF | None) -> None:
        self.update(self._circle_rect())
        self._cursor = pos
        self.update(self._circle_rect())

    # ------------------------------------------------------------------------------------ geometry
    def _circle_rect(self) -> QRectF:
        if self._cursor is None or self._radius <= 0:
            return QRectF()
        r = self._radius + 1
        return QRectF(self._cursor.x() - r, self._cursor.y() - r, 2 * r, 2 * r)

    def boundingRect(self) -> QRectF:
        margin = self._radius + 2
        return self._rect.adjusted(-margin, -margin, margin, margin)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRect(self._rect)
        return path

    def paint(self, painter: QPainter, _option, _widget=None) -> None:
        if self._radius > 0 and self._cursor is not None:
            pen = QPen(PREVIEW_COLOR, 1.5)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawEllipse(self._cursor, self._radius, self._radius)
        if self._path.count():
            pen = QPen(PATH_COLOR, 1.5, Qt.PenStyle.DashLine)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.drawPolyline(self._path)

    # ---------------------------------------------------------------------------------------- input
    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton or not self._accepts():
            event.ignore()  # the ViewBox underneath pans
            return
        event.accept()
        self.pressed.emit(event.pos())

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        self.set_cursor_pos(event.pos())
        self.moved.emit(event.pos())

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        self.released.emit(event.pos())

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton or not self._accepts():
            event.ignore()
            return
        event.accept()
        self.doubleClicked.emit(event.pos())

    def hoverMoveEvent(self, event: QGraphicsSceneHoverEvent) -> None:
        self.set_cursor_pos(event.pos() if self._accepts() else None)

    def hoverLeaveEvent(self, _event: QGraphicsSceneHoverEvent) -> None:
        self.set_cursor_pos(None)
