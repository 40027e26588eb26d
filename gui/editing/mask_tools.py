"""The pointer tools on the ground-truth panel: brush, eraser, fill and lasso (or polygon), as mouse
gestures on the panel's edit layer turned into the mask document's tool calls (which clip to the ROI and,
with the probability limit, to where P(class) >= t). Which document and how a change is shown is the target's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
from PySide6.QtCore import QPointF

from ...core.editing.document import MaskDocument
from ...core.result import InferenceResult
from ...core.roi import Roi
from .mask_canvas import EditLayer
from .mask_toolbar import MaskEditActions


def slide_point(pos: QPointF) -> tuple[float, float]:
    """A position in the view (pixel x covers [x, x + 1)) as mask pixel coordinates (pixel x centred on x)."""
    return pos.x() - 0.5, pos.y() - 0.5


class EditTarget(Protocol):
    """What the tools edit (the mask editing of the image on screen)."""

    def document_for_edit(self) -> MaskDocument | None: ...
    def shown_result(self) -> InferenceResult | None: ...
    def changed(self, box: Roi | None) -> None: ...
    def edit_finished(self) -> None: ...


class PointerTools:
    """Mouse gestures on `layer` with the tool and settings of `actions`, applied to `target`."""

    def __init__(self, layer: EditLayer, actions: MaskEditActions, target: EditTarget) -> None:
        self.layer, self.actions, self.target = layer, actions, target
        self._last_point: tuple[float, float] | None = None  # brush/eraser drag in progress
        self._path: list[QPointF] = []  # lasso or polygon in progress
        self._dragged = False
        layer.pressed.connect(self._on_press)
        layer.moved.connect(self._on_move)
        layer.released.connect(self._on_release)
        layer.doubleClicked.connect(self._on_double_click)

    def reset(self) -> None:
        """Forget any gesture in progress (another image)."""
        self._last_point = None
        self.cancel_path()

    def end_stroke(self) -> None:
        self._last_point = None

    def _limit(self) -> float | None:
        """The probability limit of brush, fill and lasso (None: off)."""
        return self.actions.threshold() if self.actions.limit_action.isChecked() else None

    def _class(self) -> int:
        return 0 if self.actions.tool == "eraser" else self.actions.class_index()

    def edit(self, operation: Callable[[MaskDocument, InferenceResult], Roi | None]) -> None:
        """Run one document operation on the shown result; show what it changed."""
        document, result = self.target.document_for_edit(), self.target.shown_result()
        if document is not None and result is not None:
            self.target.changed(operation(document, result))

    def _on_press(self, pos: QPointF) -> None:
        tool = self.actions.tool
        if tool in ("brush", "eraser"):
            document, result = self.target.document_for_edit(), self.target.shown_result()
            if document is None or result is None:
                return
            document.begin_stroke(result)  # the whole drag is one undo step
            self._last_point = slide_point(pos)
            self._stroke_to(pos)
        elif tool == "fill":
            seed = (int(np.floor(pos.x())), int(np.floor(pos.y())))
            self.edit(lambda d, r: d.fill(r, seed, self._class(), self._limit()))
            self.target.edit_finished()
        elif tool == "lasso":
            self._dragged = False
            self._path.append(pos)
            self.layer.set_path(self._path)

    def _stroke_to(self, pos: QPointF) -> None:
        start, end = self._last_point, slide_point(pos)
        self._last_point = end
        assert start is not None
        limit = self._limit() if self.actions.tool == "brush" else None  # the eraser always erases
        self.edit(lambda d, r: d.stroke(r, [start, end], self.actions.radius(), self._class(), limit))

    def _on_move(self, pos: QPointF) -> None:
        if self._last_point is not None:
            self._stroke_to(pos)
        elif self.actions.tool == "lasso" and self._path:
            if not self._dragged and (pos - self._path[-1]).manhattanLength() < 1:
                return
            self._dragged = True
            self._path.append(pos)
            self.layer.set_path(self._path)

    def _on_release(self, pos: QPointF) -> None:
        if self._last_point is not None:
            self._last_point = None
            document = self.target.document_for_edit()
            if document is not None:
                self.target.changed(document.end_stroke())
            self.target.edit_finished()
        elif self.actions.tool == "lasso" and self._dragged:
            self._fill_path()
        # a lasso click without a drag keeps its point as a polygon corner

    def _on_double_click(self, _pos: QPointF) -> None:
        if self.actions.tool == "lasso":
            self._fill_path()

    def _fill_path(self) -> None:
        points = [slide_point(p) for p in self._path]
        self.cancel_path()
        if len(points) >= 3:
            self.edit(lambda d, r: d.polygon(r, points, self._class(), self._limit()))
            self.target.edit_finished()

    def cancel_path(self) -> None:
        self._path = []
        self._dragged = False
        self.layer.set_path([])
