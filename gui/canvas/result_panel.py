"""One result panel (a ViewBox with the ROI image underneath, the drawn image, the ROI's frame and a crosshair),
its title, the notice over the panels, and the contour drawing of label images."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import cv2
import numpy as np
import pyqtgraph as pg
import pyqtgraph.functions as fn
from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QFontMetricsF, QPixmap
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPixmapItem, QGraphicsRectItem, QLabel, QWidget

from ..widgets.label_image import LabelImage

_CONTOUR_KERNEL = np.ones((3, 3), np.uint8)
#: The ROI's edge on every panel, so an empty mask or a dark heatmap still shows where the ROI ends.
FRAME_COLOR = (150, 156, 166)


def contour(labels: np.ndarray) -> np.ndarray:
    """`labels` kept only on region borders (a pixel whose 3x3 neighbourhood holds another label), else 0."""
    edge = cv2.morphologyEx(labels, cv2.MORPH_GRADIENT, _CONTOUR_KERNEL)
    return cv2.bitwise_and(labels, labels, mask=edge)


class PanelTitle(pg.LabelItem):
    """A panel title that never widens its column, so the three panels always have one size: a title longer
    than its panel is cut with "…" to the panel's width (never drawn over its neighbour, where a changed title
    left its old text behind) and shown whole as its tooltip."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape)

    def setText(self, text: str, **args: object) -> None:  # noqa: N802 - pyqtgraph's name
        if text == getattr(self, "text", None) and all(self.opts.get(key) == value for key, value in args.items()):
            return  # (pyqtgraph's setText lays the title out again: 0.4 ms, nine titles a shown image)
        self.whole = re.sub(r"<[^>]+>", "", text).replace("&#9632;", "■")
        self._full_html = ""  # taken from the text item by the resize pyqtgraph's setText ends with
        super().setText(text, **args)
        self.setToolTip(self.whole)
        self.update()

    def resizeEvent(self, ev: object) -> None:  # noqa: N802 - Qt's name
        """The whole title where it fits, else its plain text cut with "…" to the panel's width."""
        if not self._full_html:
            self._full_html = self.item.toHtml()
        else:
            self.item.setHtml(self._full_html)
        room = self.rect().width()
        if room > 0 and self.item.boundingRect().width() > room:
            cut = QFontMetricsF(self.item.font()).elidedText(self.whole, Qt.TextElideMode.ElideRight, room - 8)
            color = fn.mkColor(self.opts["color"] or pg.getConfigOption("foreground")).name()
            self.item.setHtml(f"<span style='color: {color}'>{html.escape(cut)}</span>")
        super().resizeEvent(ev)

    def updateMin(self) -> None:
        super().updateMin()
        self.setMinimumWidth(0)
        height = self._sizeHint[Qt.SizeHint.PreferredSize][1]
        self._sizeHint[Qt.SizeHint.MinimumSize] = self._sizeHint[Qt.SizeHint.PreferredSize] = (0, height)


class ResultPanel:
    """One ViewBox with the ROI image underneath (overlay mode), the panel image, a frame on the ROI's edge
    and a crosshair. Label panels draw through `LabelImage` (max-downsampled: thin structures stay whole)."""

    def __init__(self, layout: pg.GraphicsLayout, row: int, col: int, title: str, labels: bool = False) -> None:
        self.title = PanelTitle(title)
        layout.addItem(self.title, row=row, col=col)
        self.view: pg.ViewBox = layout.addViewBox(row=row + 1, col=col, lockAspect=True, invertY=True)
        self.view.setMenuEnabled(False)
        self.base = QGraphicsPixmapItem()  # the ROI image, one QPixmap shared by the three panels
        self.image = LabelImage() if labels else pg.ImageItem(axisOrder="row-major")
        self.view.addItem(self.base)
        self.view.addItem(self.image)
        self.frame = QGraphicsRectItem()
        frame_pen = pg.mkPen(FRAME_COLOR, width=1)
        frame_pen.setCosmetic(True)
        self.frame.setPen(frame_pen)
        self.frame.setZValue(5)
        self.frame.hide()
        self.view.addItem(self.frame, ignoreBounds=True)
        pen = pg.mkPen((255, 255, 255, 180), width=1, style=Qt.PenStyle.DashLine)
        self.vline = pg.InfiniteLine(angle=90, pen=pen, movable=False)
        self.hline = pg.InfiniteLine(angle=0, pen=pen, movable=False)
        for line in (self.vline, self.hline):
            line.setZValue(10)
            line.hide()
            self.view.addItem(line, ignoreBounds=True)

    def clear(self) -> None:
        self.base.setPixmap(QPixmap())
        self.image.clear()
        self.frame.hide()

    def set_rect(self, rect: QRectF) -> None:
        self.frame.setRect(rect)
        self.frame.show()


class Notice(QLabel):
    """A message centred over `parent` ("Loading…", "Running…", what to do next)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__("", parent)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setStyleSheet("color: #e3e5e8; background: rgba(38, 40, 45, 225); padding: 8px 14px;"
                           "border-radius: 6px;")
        self.over: Callable[[], QRect] | None = None  # the part of the parent it lies over (None: all of it)
        self.hide()

    def show_text(self, text: str, over: Callable[[], QRect] | None = None) -> None:
        """Show `text` ("" hides the notice), wrapped to the width of what it lies over: the parent, or the part
        `over()` gives (in the parent's coordinates)."""
        self.over = over
        self.setText(text)
        self.setVisible(bool(text))
        self.setWordWrap(True)
        self.center()

    def _area(self) -> QRect:
        parent = self.parentWidget()
        if self.over is not None:
            return self.over()
        return parent.rect() if parent is not None else QRect(0, 0, 640, 480)

    def center(self) -> None:
        """Sized to (and centred on) what it lies over."""
        area = self._area()
        self.setMaximumWidth(max(area.width() - (16 if self.over is not None else 40), 160))
        self.adjustSize()
        self.move(area.center() - self.rect().center())
