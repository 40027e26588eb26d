"""The ground truth of the image on screen as a document: the mask as on disk, its edits, save and discard.

One owner for "which mask are the metrics of": `document.mask` is the mask on screen (the edited one while
there are edits, else the one on disk). Saving writes it through `core.editing.files.save_mask` and adopts a new
file into the dataset; discarding goes back to the mask on disk; `restore` takes back edits a crash left. Each
change is announced by `events.changed` so the session re-scores and the views redraw. A save can run on a
worker: `save_job` is the writing (encoding a slide-sized PNG takes seconds), `saved` adopts it; `saving` is
set in between, when the tools must not edit (the job reads the mask in place).

The editing tools work through the document (`stroke`, `fill`, `polygon`, `accept_prediction`,
`review_decision`, `undo`, `redo`): each paints a class on the mask of the result's image, clipped to the
result's ROI (the part the user sees) and, with a `limit`, to where the class's probability is at least that
threshold; each returns the box it changed (None: nothing) and announces the edit. A view only turns gestures
into these calls.

The editor edits the mask the document holds in place: the first edit of a slide-sized mask copies nothing
(a 16k x 16k mask is 256 MiB) and scans nothing (the mask's binary convention is read on a worker thread as
the document is made). While it holds edits, the mask as on disk is not in memory (`disk_mask` is None: a
run reads the file); discarding reverts the edits in place, and a save keeps a copy made by its job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.masks import BINARY_FOREGROUND
from ..dataset.truth import default_mask_path
from ..errors import SegScopeError
from ..events import Signal, SignalGroup
from ..files.stamp import Stamp
from ..metrics.scores import argmax_at_roi, mask_piece_labels
from ..result import InferenceResult
from ..review.decisions import apply_decision
from ..review.queue import ReviewEntry
from ..roi import Roi
from .annotation import Clip, MaskEditor, Point, allowed_map, binary_foreground, prediction_labels
from .files import SavedMask, SaveMode, discard_recovery, read_stamps, save_mask

#: Probability clips kept per document (each is ROI-sized; a drag reuses one on every mouse move).
CLIP_MAPS_KEPT = 4
#: Reads each new document's mask convention (a scan of the whole mask) off the caller's thread.
_CONVENTIONS = ThreadPoolExecutor(1, thread_name_prefix="segscope-mask-convention")


def mask_source(item: DatasetItem) -> Path:
    """The mask file an item's edits belong to: its ground truth, or where a new one goes."""
    return item.mask_path or default_mask_path(item.image_path)


class DocumentEvents(SignalGroup):
    #: After every change of `mask`: "edit" (also undo/redo), "save", "discard" or "restore".
    changed = Signal(str)


class MaskDocument:
    """The mask of one dataset item at one image size (width, height); `disk_mask` None: the item has none."""

    def __init__(self, dataset: Dataset, item: DatasetItem, image_size: tuple[int, int],
                 disk_mask: np.ndarray | None, recovery_dir: Path | None = None,
                 stamps: dict[Path, Stamp] | None = None) -> None:
        self.dataset = dataset
        self.item = item
        self.image_size = image_size
        self._hold(disk_mask)
        self.recovery_dir = recovery_dir  # None: beside each mask (core.editing.annotation's default)
        #: The truth files as the mask on disk was read (`stamps`: taken just before the read; else now): a save
        #: refuses to overwrite what another writer put there since (`files.save_mask`).
        self.stamps: dict[Path, Stamp] = stamps if stamps is not None else read_stamps(mask_source(item))
        self.editor: MaskEditor | None = None
        self.events = DocumentEvents()
        self.saving = False  # a save job is writing the mask: no edits until `saved` (or `save_failed`)
        self._clip_maps: list[tuple[tuple, InferenceResult, Clip]] = []
        self._prediction: tuple[InferenceResult, np.ndarray] | None = None  # the last decision's (`_predicted`)

    def _hold(self, disk_mask: np.ndarray | None) -> None:
        """Hold the mask as on disk (None: no file) and read its binary convention on the worker."""
        self._disk = disk_mask  # as loaded or last saved; the editor may be editing this very array
        self._foreground: Future[int] | None = (None if disk_mask is None else
                                                _CONVENTIONS.submit(binary_foreground, disk_mask))

    @property
    def mask(self) -> np.ndarray | None:
        """The mask on screen: the edited one, else the one on disk (None: no mask and no edits)."""
        return self.editor.mask if self.editor is not None else self._disk

    @property
    def disk_mask(self) -> np.ndarray | None:
        """The mask exactly as its file holds it, when memory holds it: None when the item has no mask, or
        while the editor's changes are in the array that held it."""
        editor = self.editor
        if editor is not None and editor.mask is self._disk and not editor.untouched:
            return None
        return self._disk

    @property
    def dirty(self) -> bool:
        return self.editor is not None and self.editor.dirty

    @property
    def source(self) -> Path:
        return mask_source(self.item)

    def ensure_editor(self, num_classes: int) -> MaskEditor:
        """The editor, made on the first edit (on a blank mask when the item has none)."""
        if self.editor is not None:
            return self.editor
        width, height = self.image_size
        mask = self._disk if self._disk is not None else np.zeros((height, width), np.uint8)
        if mask.shape != (height, width):
            raise SegScopeError(f"{self.item.truth_path}: mask is {mask.shape[1]}x{mask.shape[0]} but the "
                                f"image is {width}x{height}; it cannot be edited")
        foreground = self._foreground.result() if self._foreground is not None else BINARY_FOREGROUND
        self.editor = MaskEditor(mask, num_classes, copy=False, foreground=foreground)
        return self.editor

    def edited(self) -> None:
        """Call after an editor operation (stroke, fill, undo, ...): announces the change."""
        self.events.changed.emit("edit")

    def restore(self, recovered: np.ndarray, num_classes: int) -> None:
        """Edits a crash left (a recovery file's mask) become this document's edits: one undo step back to the
        mask on disk. SegScopeError when they do not fit the image."""
        editor = self.ensure_editor(num_classes)
        if recovered.shape != editor.mask.shape:
            raise SegScopeError(f"the recovered mask is {recovered.shape[1]}x{recovered.shape[0]} but the image is "
                                f"{self.image_size[0]}x{self.image_size[1]}")
        editor.replace(recovered)
        self.events.changed.emit("restore")

    def save(self, mode: SaveMode, overwrite: bool = False) -> Path:
        """Write the edited mask the chosen way, here; the saved file becomes the mask on disk."""
        saved, copy = self.save_job(mode, overwrite)()
        self.saved(saved, copy)
        return saved.path

    def save_job(self, mode: SaveMode, overwrite: bool = False) -> Callable[[], tuple[SavedMask, np.ndarray]]:
        """The save as work for any thread: it writes the mask on screen, removes the recovery file and returns
        (the save, a copy of the mask it holds: the mask on disk from then on, while the editor goes on in its
        own array). Sets `saving` until `saved` or `save_failed`. A truth file another writer changed since it
        was read raises `WriteConflict` and nothing is written, unless `overwrite` (the user chose so)."""
        if self.editor is None:
            raise SegScopeError(f"{self.item.id}: no mask edits to save")
        mask, source, recovery_dir = self.editor.mask, self.source, self.recovery_dir
        expected = None if overwrite else dict(self.stamps)
        self.saving = True

        def work() -> tuple[SavedMask, np.ndarray]:
            saved = save_mask(mask, source, mode, expected)
            discard_recovery(source, recovery_dir)
            return saved, mask.copy()
        return work

    def saved(self, saved: SavedMask, disk_mask: np.ndarray) -> None:
        """Adopt a finished `save_job`: the file becomes the mask on disk (and the item's, if it had none)."""
        self.saving = False
        if self.editor is not None:
            self.editor.mark_saved()
        self._hold(disk_mask)
        self.stamps = saved.stamps
        self.item = self.dataset.adopt_mask(self.item, saved.path)
        self.events.changed.emit("save")

    def reload(self, disk_mask: np.ndarray | None, stamps: dict[Path, Stamp]) -> None:
        """The mask as another writer left it on disk (read with `stamps`, taken before the read) replaces this
        document's edits and mask on disk: "take theirs" after a `WriteConflict`."""
        self.editor = None
        self._hold(disk_mask)
        self.stamps = stamps
        self.item = self.dataset.item(self.item.id)
        self.events.changed.emit("discard")

    def save_failed(self) -> None:
        """A `save_job` failed: the edits stay unsaved and editable."""
        self.saving = False

    def discard(self) -> None:
        """Forget the edits and their recovery file: the mask on disk is the mask again (reverted in place
        when the editor edited the array that held it)."""
        if self.editor is None:
            return
        discard_recovery(self.source, self.recovery_dir)
        if self.editor.mask is self._disk:
            self.editor.revert()
        self.editor = None
        self.events.changed.emit("discard")

    # ------------------------------------------------------------------------------------------- tools
    def clip_map(self, result: InferenceResult, class_index: int = 1, limit: float | None = None) -> Clip:
        """Where a tool may paint: the result's ROI; with `limit`, only where P(class_index) >= limit."""
        if limit is None:
            return Clip(result.roi)
        key = (class_index, limit)
        for cached_key, cached_result, clip in self._clip_maps:
            if cached_key == key and cached_result is result:
                return clip
        clip = allowed_map(result, class_index, limit)
        self._clip_maps = [*self._clip_maps, (key, result, clip)][-CLIP_MAPS_KEPT:]
        return clip

    def _edit(self, result: InferenceResult, change: Callable[[MaskEditor], Roi | None]) -> Roi | None:
        box = change(self.ensure_editor(result.num_classes))
        if box is not None:
            self.edited()
        return box

    def begin_stroke(self, result: InferenceResult) -> None:
        """The strokes until `end_stroke` are one undo step (a brush drag)."""
        self.ensure_editor(result.num_classes).begin_edit()

    def end_stroke(self) -> Roi | None:
        """The box the whole drag changed."""
        box = self.editor.end_edit() if self.editor is not None else None
        if box is not None:
            self.edited()
        return box

    def stroke(self, result: InferenceResult, points: Sequence[Point], radius: int, class_index: int,
               limit: float | None = None) -> Roi | None:
        """Brush (class 0: eraser) along `points` (mask pixel centres) with `radius` pixels."""
        clip = self.clip_map(result, class_index, limit)
        return self._edit(result, lambda e: e.stroke(points, radius, e.value_of(class_index), clip))

    def fill(self, result: InferenceResult, seed: tuple[int, int], class_index: int,
             limit: float | None = None) -> Roi | None:
        """Flood-fill the 4-connected region of the pixel `seed` (x, y) with the class."""
        clip = self.clip_map(result, class_index, limit)
        return self._edit(result, lambda e: e.fill(seed, e.value_of(class_index), clip))

    def polygon(self, result: InferenceResult, points: Sequence[Point], class_index: int,
                limit: float | None = None) -> Roi | None:
        """Fill the polygon (lasso) through `points` with the class."""
        clip = self.clip_map(result, class_index, limit)
        return self._edit(result, lambda e: e.polygon(points, e.value_of(class_index), clip))

    def accept_prediction(self, result: InferenceResult, threshold: float | None = None,
                          class_index: int = 1) -> Roi | None:
        """The ROI's mask becomes the prediction: the argmax, or the class where P >= threshold (one step)."""
        labels = prediction_labels(result, threshold, class_index)
        return self._edit(result, lambda e: e.accept_prediction(labels, result.roi))

    def review_decision(self, result: InferenceResult, entry: ReviewEntry, decision: str,
                        min_area: int = 1) -> tuple[Roi, np.ndarray] | None:
        """A review queue's decision on `entry` (`core.review.decisions`: accept, remove, keep) as one undoable
        edit of the pixels it changes (the rest of the mask keeps its values). Returns the box it changed and the
        mask's values there before (`put_back` restores them), or None: nothing changed."""
        editor = self.ensure_editor(result.num_classes)
        roi = result.roi
        piece = editor.mask[roi.y0 : roi.y1, roi.x0 : roi.x1]
        labels = mask_piece_labels(piece, result.num_classes, editor.foreground).copy()
        before = labels.copy()
        box = apply_decision(labels, self._predicted(result), roi, entry, decision, min_area)
        if box is None:
            return None
        local = (slice(box.y0 - roi.y0, box.y1 - roi.y0), slice(box.x0 - roi.x0, box.x1 - roi.x0))
        old = piece[local].copy()
        values = old.copy()
        changed = labels[local] != before[local]
        values[changed] = editor.labels_to_values(labels[local])[changed]
        self._edit(result, lambda e: e.replace(values, box))
        return box, old

    def _predicted(self, result: InferenceResult) -> np.ndarray:
        """The result's predicted classes under its ROI, kept for the next decision on it (resizing a 960 x 960
        output to an 1800 x 1800 ROI takes ~35 ms)."""
        if self._prediction is None or self._prediction[0] is not result:
            self._prediction = (result, argmax_at_roi(result))
        return self._prediction[1]

    def put_back(self, result: InferenceResult, box: Roi, values: np.ndarray) -> Roi | None:
        """Put mask `values` back into `box` (a decision's `review_decision` returned them) as one edit, whatever
        was done since (a save, another image in between)."""
        return self._edit(result, lambda e: e.replace(values, box))

    def undo(self) -> Roi | None:
        box = self.editor.undo() if self.editor is not None else None
        if box is not None:
            self.edited()
        return box

    def redo(self) -> Roi | None:
        box = self.editor.redo() if self.editor is not None else None
        if box is not None:
            self.edited()
        return box
