"""Mask editing without Qt: brush, eraser, fill, polygon, accepting a prediction, undo/redo (saving and
crash recovery: `core.editing.files`).

`MaskEditor` edits a full-slide uint8 mask in the file's own convention (0/255 or 0/1 for binary models,
class indices otherwise). Every operation touches only the bounding box it draws into and returns the box
that changed (or None), so the GUI redraws just that region; a `Clip` (the ROI, and where a class is likely
there) limits it without any slide-sized array. Undo keeps, per edit, the tight box of changed pixels with
its old and new bytes (zlib-compressed above a few KiB): a long history of strokes costs little. An editor
may edit the array it is given in place (`copy=False`: nothing slide-sized is made on the first edit, and
`revert()` gives the array back as it was); `snapshot()` copies the mask for another thread while edits go on.

A mouse drag is one undo step: the GUI calls `begin_edit()` on press, `stroke()` per mouse move and
`end_edit()` on release; an operation made outside `begin_edit`/`end_edit` is a step of its own.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np

from ..compat import pairwise
from ..dataset.masks import BINARY_FOREGROUND
from ..errors import SegScopeError
from ..metrics.scores import argmax_at_roi
from ..result import InferenceResult
from ..roi import Roi

Point = tuple[float, float]  # (x, y) in mask pixels

#: Deltas larger than this are stored zlib-compressed.
COMPRESS_ABOVE = 4096
#: Rows a snapshot copies at a time (a 16k-wide band of 256 rows is 4 MiB).
SNAPSHOT_ROWS = 256


@dataclass(frozen=True)
class Clip:
    """Where a tool may paint: inside `box`, and where `allowed` (bool, box-sized; None: all of it) is True."""

    box: Roi
    allowed: np.ndarray | None = None

    def where(self, box: Roi, drawn: np.ndarray) -> tuple[Roi, np.ndarray] | None:
        """The part of `box` inside the clip and the pixels of `drawn` (bool, box-sized) it allows there."""
        inside = box.intersection(self.box)
        if inside is None:
            return None
        where = _view(drawn, _local(inside, box))
        if self.allowed is not None:
            where = where & _view(self.allowed, _local(inside, self.box))
        return inside, where


@dataclass(frozen=True)
class _Delta:
    """One undo step: the box that changed and its pixels before and after (raw or zlib bytes)."""

    id: int
    box: Roi
    before: bytes
    after: bytes
    compressed: bool

    @classmethod
    def make(cls, delta_id: int, box: Roi, before: np.ndarray, after: np.ndarray) -> _Delta:
        raw_before, raw_after = before.tobytes(), after.tobytes()
        compressed = len(raw_before) > COMPRESS_ABOVE
        if compressed:
            raw_before, raw_after = zlib.compress(raw_before, 1), zlib.compress(raw_after, 1)
        return cls(delta_id, box, raw_before, raw_after, compressed)

    def pixels(self, which: Literal["before", "after"]) -> np.ndarray:
        data = self.before if which == "before" else self.after
        raw = zlib.decompress(data) if self.compressed else data
        return np.frombuffer(raw, np.uint8).reshape(self.box.height, self.box.width)

    @property
    def nbytes(self) -> int:
        return len(self.before) + len(self.after)


def binary_foreground(mask: np.ndarray) -> int:
    """The value a binary mask stores its foreground as: 1 in a 0/1 file, else 255 (a blank mask gets 0/255)."""
    return 1 if int(mask.max(initial=0)) == 1 else BINARY_FOREGROUND


def _union(boxes: Sequence[Roi]) -> Roi:
    return Roi(min(b.x0 for b in boxes), min(b.y0 for b in boxes), max(b.x1 for b in boxes), max(b.y1 for b in boxes))


def _view(array: np.ndarray, box: Roi) -> np.ndarray:
    return array[box.y0 : box.y1, box.x0 : box.x1]


def _local(box: Roi, origin: Roi) -> Roi:
    """`box` in the coordinates of an array cut out at `origin`."""
    return Roi(box.x0 - origin.x0, box.y0 - origin.y0, box.x1 - origin.x0, box.y1 - origin.y0)


def _changed_box(before: np.ndarray, after: np.ndarray, origin: Roi) -> Roi | None:
    """The tight box (in mask coordinates) of the pixels that differ, or None."""
    changed = before != after
    rows, cols = np.flatnonzero(changed.any(axis=1)), np.flatnonzero(changed.any(axis=0))
    if rows.size == 0:
        return None
    return Roi(origin.x0 + int(cols[0]), origin.y0 + int(rows[0]),
               origin.x0 + int(cols[-1]) + 1, origin.y0 + int(rows[-1]) + 1)


class MaskEditor:
    """Undoable edits of one H x W uint8 mask (`editor.mask`; change it only through the editor).

    `copy=False` edits `mask` itself (a C-contiguous array; others are copied): no slide-sized copy on the
    first edit, and `revert()` restores it exactly. `foreground`: the mask's `binary_foreground`, when known
    (reading it scans the whole mask).
    """

    def __init__(self, mask: np.ndarray, num_classes: int = 2, *, copy: bool = True,
                 foreground: int | None = None):
        if mask.ndim != 2 or mask.dtype != np.uint8:
            raise SegScopeError(f"mask must be a 2-D uint8 array, got {mask.dtype} {mask.shape}")
        self.mask = np.array(mask, order="C", copy=True) if copy else np.ascontiguousarray(mask)
        self.num_classes = num_classes
        self.foreground = foreground if foreground is not None else binary_foreground(mask)
        self._undo: list[_Delta] = []
        self._redo: list[_Delta] = []
        self._next_id = 1
        self._saved_version = 0
        self._pieces: list[tuple[Roi, np.ndarray]] | None = None  # old pixels of each change in an open edit
        # Every write of `mask` holds the lock and tells the snapshots being copied which box it changed.
        self._lock = threading.Lock()
        self._snapshots: list[list[Roi]] = []

    # --- values and state ---------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int]:
        height, width = self.mask.shape
        return height, width

    def value_of(self, class_index: int) -> int:
        """The pixel value that stores `class_index` in this mask's convention (eraser: class 0)."""
        if not 0 <= class_index < self.num_classes:
            raise SegScopeError(f"class {class_index} is not one of the model's {self.num_classes} classes")
        return self.foreground * class_index if self.num_classes == 2 else class_index

    def labels_to_values(self, labels: np.ndarray) -> np.ndarray:
        return labels.astype(np.uint8) * np.uint8(self.foreground) if self.num_classes == 2 else labels.astype(np.uint8)

    @property
    def version(self) -> int:
        """Identifies the current content: changes on every edit, undo and redo (0 = as loaded)."""
        return self._undo[-1].id if self._undo else 0

    @property
    def dirty(self) -> bool:
        return bool(self._pieces) or self.version != self._saved_version

    @property
    def untouched(self) -> bool:
        """Whether the mask holds what the editor was given (nothing painted, or every step undone)."""
        return not self._pieces and not self._undo

    def mark_saved(self) -> None:
        self.end_edit()
        self._saved_version = self.version

    @property
    def can_undo(self) -> bool:
        return bool(self._undo) or bool(self._pieces)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo) and self._pieces is None

    @property
    def history_bytes(self) -> int:
        """Memory held by the undo and redo history."""
        return sum(d.nbytes for d in self._undo) + sum(d.nbytes for d in self._redo)

    # --- grouping -----------------------------------------------------------------------------------

    def begin_edit(self) -> None:
        """Start one undo step spanning several operations (a mouse drag); ends a step left open."""
        self.end_edit()
        self._pieces = []

    def end_edit(self) -> Roi | None:
        """Close the open step and record it; returns the box it changed (None when nothing changed)."""
        pieces, self._pieces = self._pieces, None
        if not pieces:
            return None
        union = _union([box for box, _ in pieces])
        after = _view(self.mask, union)
        before = after.copy()
        for box, old in reversed(pieces):  # the earliest piece holds the original pixels
            _view(before, _local(box, union))[...] = old
        box = _changed_box(before, after, union)
        if box is None:  # e.g. painted then erased the same pixels
            return None
        inner = _local(box, union)
        self._undo.append(_Delta.make(self._next_id, box, _view(before, inner), _view(after, inner)))
        self._next_id += 1
        self._redo.clear()
        return box

    def _write(self, box: Roi, values: int | np.ndarray, where: np.ndarray | bool = True) -> None:
        """The one way `mask` changes: `values` into `box` where `where` (both box-sized or scalars)."""
        with self._lock:
            np.copyto(_view(self.mask, box), values, where=where, casting="unsafe")
            for changed in self._snapshots:
                changed.append(box)

    def _checked(self, clip: Clip | None) -> Clip:
        """`clip` (None: the whole mask), or an error when it does not fit the mask."""
        height, width = self.mask.shape
        if clip is None:
            return Clip(Roi.whole(width, height))
        allowed = clip.allowed
        if not clip.box.fits(width, height) or (allowed is not None and allowed.shape != (clip.box.height,
                                                                                          clip.box.width)):
            shape = "" if allowed is None else f" with an allowed map of {allowed.shape[::-1]}"
            raise SegScopeError(f"clip box {clip.box}{shape} does not fit the {width}x{height} mask")
        return clip

    def _apply(self, box: Roi, where: np.ndarray, values: int | np.ndarray, clip: Clip | None) -> Roi | None:
        """Set the pixels of `box` selected by `where` (bool, box-sized) to `values` (a value or box-sized),
        only inside `clip`."""
        if clip is not None:
            inside = self._checked(clip).where(box, where)
            if inside is None:
                return None
            if isinstance(values, np.ndarray):
                values = _view(values, _local(inside[0], box))
            box, where = inside
        old = _view(self.mask, box).copy()
        self._write(box, values, where)
        changed = _changed_box(old, _view(self.mask, box), box)
        if changed is None:
            return None
        single = self._pieces is None
        if single:
            self._pieces = []
        self._pieces.append((changed, _view(old, _local(changed, box)).copy()))  # type: ignore[union-attr]
        if single:
            self.end_edit()
        return changed

    def _rasterise(self, points: Sequence[Point], pad: int,
                   draw: Callable[[np.ndarray, np.ndarray], object]) -> tuple[Roi, np.ndarray] | None:
        """Run `draw(canvas, points)` on a 0 canvas around the points (`pad` pixels more), then return the
        box inside the mask and the drawn pixels there (bool). The canvas is not clipped to the mask, so a
        shape crossing the border keeps exactly the pixels it has when drawn whole."""
        pts = np.rint(np.asarray(points, np.float64)).astype(np.int64).reshape(-1, 2)
        x0, y0 = (int(v) - pad for v in pts.min(axis=0))
        x1, y1 = (int(v) + pad + 1 for v in pts.max(axis=0))
        height, width = self.mask.shape
        box = Roi(max(x0, 0), max(y0, 0), min(x1, width), min(y1, height))
        if box.x0 >= box.x1 or box.y0 >= box.y1:
            return None
        canvas = np.zeros((y1 - y0, x1 - x0), np.uint8)
        draw(canvas, (pts - (x0, y0)).astype(np.int32))
        return box, canvas[box.y0 - y0 : box.y1 - y0, box.x0 - x0 : box.x1 - x0].view(bool)

    # --- tools --------------------------------------------------------------------------------------

    def stroke(self, points: Sequence[Point], radius: int, value: int, clip: Clip | None = None) -> Roi | None:
        """Brush (or eraser with value 0): round-capped segments of `radius` through `points`.

        Paints every pixel within `radius` of the path (and none farther than `radius` + 0.7), only inside
        `clip` (e.g. the ROI where `probability >= threshold`).
        """
        radius = max(int(radius), 0)

        def draw(canvas: np.ndarray, pts: np.ndarray) -> None:
            for start, end in pairwise(pts.tolist()):
                cv2.line(canvas, start, end, 1, max(2 * radius, 1))
            for point in pts.tolist():
                cv2.circle(canvas, point, radius, 1, -1)

        # OpenCV's thick lines reach up to 0.7 px beyond half their thickness: pad by 2 more.
        drawn = self._rasterise(points, radius + 2, draw) if len(points) else None
        return self._apply(*drawn, value, clip) if drawn else None

    def polygon(self, points: Sequence[Point], value: int, clip: Clip | None = None) -> Roi | None:
        """Fill the closed polygon (or lasso path) through `points`, edges included."""
        if len(points) < 3:
            return None
        drawn = self._rasterise(points, 1, lambda canvas, pts: cv2.fillPoly(canvas, [pts], 1))
        return self._apply(*drawn, value, clip) if drawn else None

    def fill(self, seed: tuple[int, int], value: int, clip: Clip | None = None) -> Roi | None:
        """Flood fill: the 4-connected pixels of the seed's value (inside `clip`) become `value`."""
        clip = self._checked(clip)
        box, x, y = clip.box, int(seed[0]), int(seed[1])
        allowed = np.ones((box.height, box.width), bool) if clip.allowed is None else clip.allowed
        if not (box.x0 <= x < box.x1 and box.y0 <= y < box.y1) or not allowed[y - box.y0, x - box.x0]:
            return None
        # floodFill never enters pixels already set in its mask: mark the disallowed ones with 1, fill with 2.
        # The fill stays inside the clip's box, so only that part of the mask is filled in (a copy of it).
        flood = np.zeros((box.height + 2, box.width + 2), np.uint8)
        flood[1:-1, 1:-1] = ~allowed
        _, _, _, (rx, ry, rw, rh) = cv2.floodFill(np.ascontiguousarray(_view(self.mask, box)), flood,
                                                  (x - box.x0, y - box.y0), 0, 0, 0,
                                                  4 | cv2.FLOODFILL_MASK_ONLY | cv2.FLOODFILL_FIXED_RANGE | (2 << 8))
        filled = Roi(rx, ry, rx + rw, ry + rh)  # in the box's coordinates
        return self._apply(Roi(box.x0 + rx, box.y0 + ry, box.x0 + rx + rw, box.y0 + ry + rh),
                           _view(flood[1:-1, 1:-1], filled) == 2, value, None)

    def replace(self, values: np.ndarray, box: Roi | None = None) -> Roi | None:
        """Put `values` (mask pixel values) into `box` (default: the whole mask)."""
        box = box or Roi.whole(self.mask.shape[1], self.mask.shape[0])
        if values.shape != (box.height, box.width) or not box.fits(self.mask.shape[1], self.mask.shape[0]):
            raise SegScopeError(f"cannot put a {values.shape[::-1]} array into box {box} of a "
                                f"{self.mask.shape[1]}x{self.mask.shape[0]} mask")
        return self._apply(box, np.ones(values.shape, bool), values, None)

    def revert(self) -> None:
        """Undo every step, an open one too: the mask holds what the editor was given again."""
        self.end_edit()
        while self.undo() is not None:
            pass

    def accept_prediction(self, labels: np.ndarray, roi: Roi) -> Roi | None:
        """Replace the ROI's pixels with predicted class `labels` (ROI-sized, e.g. `prediction_labels`)."""
        return self.replace(self.labels_to_values(labels), roi)

    # --- undo / redo --------------------------------------------------------------------------------

    def undo(self) -> Roi | None:
        """Revert the last step; returns the box to redraw, or None when there is nothing to undo."""
        self.end_edit()
        if not self._undo:
            return None
        delta = self._undo.pop()
        self._write(delta.box, delta.pixels("before"))
        self._redo.append(delta)
        return delta.box

    def redo(self) -> Roi | None:
        if self._pieces is not None or not self._redo:
            return None
        delta = self._redo.pop()
        self._write(delta.box, delta.pixels("after"))
        self._undo.append(delta)
        return delta.box

    def snapshot(self) -> np.ndarray:
        """A copy of the mask as it is at one moment, for another thread while this one goes on editing: it is
        copied in bands without holding up the edits, then the boxes they changed meanwhile are copied again."""
        copy = np.empty_like(self.mask)
        changed: list[Roi] = []
        with self._lock:
            self._snapshots.append(changed)
        try:
            for y in range(0, copy.shape[0], SNAPSHOT_ROWS):
                copy[y : y + SNAPSHOT_ROWS] = self.mask[y : y + SNAPSHOT_ROWS]
            with self._lock:
                for box in changed:
                    _view(copy, box)[...] = _view(self.mask, box)
                return copy
        finally:
            with self._lock:
                self._snapshots.remove(changed)


# --- predictions as masks ---------------------------------------------------------------------------


def probability_at_roi(result: InferenceResult, class_index: int = 1) -> np.ndarray:
    """One class's probability resized (linear, as `argmax_at_roi`) to the ROI: float32 ROI-sized."""
    p = result.probabilities[..., class_index]
    size = (result.roi.width, result.roi.height)
    return p if p.shape[::-1] == size else cv2.resize(p, size, interpolation=cv2.INTER_LINEAR)


def prediction_labels(result: InferenceResult, threshold: float | None = None, class_index: int = 1) -> np.ndarray:
    """Predicted classes at ROI resolution: the argmax, or `class_index` where its probability >= threshold."""
    if threshold is None:
        return argmax_at_roi(result)
    return np.where(probability_at_roi(result, class_index) >= threshold, class_index, 0).astype(np.uint8)


def allowed_map(result: InferenceResult, class_index: int, threshold: float) -> Clip:
    """Where the probability-aware brush paints: the ROI (outside it there is no prediction), where the
    class's probability >= threshold (an ROI-sized map)."""
    return Clip(result.roi, probability_at_roi(result, class_index) >= threshold)
