"""The registered result views (`core.views`) as extra panels of the Results area: each drawn with its colour
map beside the three core panels (heatmap | argmax | ground truth, which carry editing and the error map), on
the same slide coordinates and linked camera, shown while its action under View > Panels is checked.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF
from PySide6.QtGui import QAction

from ...core.result import InferenceResult
from ...core.views import load_views


class ExtraPanels:
    """The registered views' panels in the Results area, each shown while its action is checked."""

    def __init__(self, layout: pg.GraphicsLayout, first_column: int, camera: pg.ViewBox, parent: QObject) -> None:
        self.layout, self.first_column, self.camera = layout, first_column, camera
        self.views = load_views()
        self.shown: dict[str, tuple[pg.LabelItem, pg.ViewBox, pg.ImageItem]] = {}
        self.actions: dict[str, QAction] = {}
        self._last: tuple[InferenceResult, int, QRectF, np.ndarray | None] | None = None
        for name, view in self.views.items():
            action = QAction(f"{view.title} panel", parent, checkable=True)
            action.setToolTip(view.tooltip)
            action.toggled.connect(lambda on, n=name: self.set_shown(n, on))
            self.actions[name] = action

    def set_shown(self, name: str, shown: bool) -> None:
        if shown and name not in self.shown:
            column = self.first_column + len(self.shown)
            title = pg.LabelItem(self.views[name].title)
            self.layout.addItem(title, row=0, col=column)
            box = self.layout.addViewBox(row=1, col=column, lockAspect=True, invertY=True)
            box.setMenuEnabled(False)
            box.setXLink(self.camera)
            box.setYLink(self.camera)
            image = pg.ImageItem(axisOrder="row-major")
            image.setLookupTable(pg.colormap.get(self.views[name].colormap).getLookupTable(nPts=256))
            box.addItem(image)
            self.layout.layout.setColumnStretchFactor(column, 1)
            self.shown[name] = (title, box, image)
            if self._last is not None:
                self._draw(name, *self._last)
        elif not shown and name in self.shown:
            title, box, _image = self.shown.pop(name)
            self.layout.removeItem(title)
            self.layout.removeItem(box)

    def show(self, result: InferenceResult, class_index: int, rect: QRectF, truth: np.ndarray | None = None) -> None:
        self._last = (result, class_index, rect, truth)
        for name in self.shown:
            self._draw(name, result, class_index, rect, truth)

    def _draw(self, name: str, result: InferenceResult, class_index: int, rect: QRectF,
              truth: np.ndarray | None) -> None:
        values = self.views[name].image(result, class_index, truth)
        self.shown[name][2].setImage(values, autoLevels=False, levels=(0.0, 1.0), rect=rect)

    def image(self, name: str) -> np.ndarray | None:
        """What a shown view draws (None when it is hidden or empty)."""
        return self.shown[name][2].image if name in self.shown else None

    def clear(self) -> None:
        self._last = None
        for _title, _box, image in self.shown.values():
            image.clear()
