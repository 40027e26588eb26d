"""The pointer tools on the ground-truth panel: brush, eraser, fill and lasso (or polygon), as mouse
gestures on the panel's edit layer turned into `MaskEditor` operations, clipped to the ROI (with the
probability limit, also to where P(class) >= t). What is edited and how a change is shown is the target's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
from PySide6.QtCore import QPointF

from ..core.annotation import MaskEditor, allowed_map
from ..core.result import InferenceResult
from ..core.roi import Roi
from .mask_canvas import EditLayer
from .mask_toolbar import MaskEditActions


def slide_point(pos: QPointF) -> tuple[float, float]:
    """A position in the view (pixel x covers [x, x + 1)) as mask pixel coordinates (pixel x centred on x)."""
    return pos.x() - 0.5, pos.y() - 0.5


class EditTarget(Protocol):
    """What the tools edit (the mask editing of the image on screen)."""

    @property
    def editor(self) -> MaskEditor | None: ...
    def editor_for_edit(self) -> MaskEditor | None: ...
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
        self._allowed_cache: dict[tuple, np.ndarray] = {}
        layer.pressed.connect(self._on_press)
        layer.moved.connect(self._on_move)
        layer.released.connect(self._on_release)
        layer.doubleClicked.connect(self._on_double_click)

    def reset(self) -> None:
        """Forget any gesture in progress and the clip maps (another image)."""
        self._last_point = None
        self.cancel_path()
        self.clear_clip_maps()

    def clear_clip_maps(self) -> None:
        """A new result is shown: the clip maps are keyed by the shown result's id and never outlive it."""
        self._allowed_cache.clear()

    def end_stroke(self) -> None:
        self._last_point = None

    def _allowed(self, result: InferenceResult, limited: bool) -> np.ndarray:
        """Where an edit may paint: the ROI, and with the probability limit only where P(class) >= t."""
        class_index, threshold = self.actions.class_index(), self.actions.threshold()
        cache_key = (id(result), class_index, threshold) if limited else (result.roi, result.image_size)
        allowed = self._allowed_cache.get(cache_key)
        if allowed is None:
            if limited:
                allowed = allowed_map(result, class_index, threshold)
            else:
                allowed = np.zeros(result.image_size[::-1], bool)
                roi = result.roi
                allowed[roi.y0 : roi.y1, roi.x0 : roi.x1] = True
            if len(self._allowed_cache) > 4:
                self._allowed_cache.clear()
            self._allowed_cache[cache_key] = allowed
        return allowed

    def edit(self, operation: Callable[[MaskEditor, np.ndarray], Roi | None], limited: bool = True) -> None:
        """Run one editor operation with the current clip map; show what it changed."""
        editor, result = self.target.editor_for_edit(), self.target.shown_result()
        if editor is not None and result is not None:
            limited = limited and self.actions.limit_action.isChecked()
            self.target.changed(operation(editor, self._allowed(result, limited)))

    def _paint_value(self) -> int:
        editor = self.target.editor
        assert editor is not None
        return editor.value_of(0 if self.actions.tool == "eraser" else self.actions.class_index())

    def _on_press(self, pos: QPointF) -> None:
        tool = self.actions.tool
        if tool in ("brush", "eraser"):
            editor = self.target.editor_for_edit()
            if editor is None:
                return
            editor.begin_edit()  # the whole drag is one undo step
            self._last_point = slide_point(pos)
            self._stroke_to(pos)
        elif tool == "fill":
            seed = (int(np.floor(pos.x())), int(np.floor(pos.y())))
            self.edit(lambda e, a: e.fill(seed, self._paint_value(), a))
            self.target.edit_finished()
        elif tool == "lasso":
            self._dragged = False
            self._path.append(pos)
            self.layer.set_path(self._path)

    def _stroke_to(self, pos: QPointF) -> None:
        start, end = self._last_point, slide_point(pos)
        self._last_point = end
        limited = self.actions.tool == "brush"  # the eraser always erases
        self.edit(lambda e, a: e.stroke([start, end], self.actions.radius(), self._paint_value(), a), limited)

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
            editor = self.target.editor
            if editor is not None:
                self.target.changed(editor.end_edit())
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
            self.edit(lambda e, a: e.polygon(points, self._paint_value(), a))
            self.target.edit_finished()

    def cancel_path(self) -> None:
        self._path = []
        self._dragged = False
        self.layer.set_path([])
