"""The ground truth of the image on screen as a document: the mask as on disk, its edits, save and discard.

One owner for "which mask are the metrics of": `document.mask` is the mask on screen (the edited one while
there are edits, else the one on disk). Saving writes it through `core.annotation.save_mask` and adopts a new
file into the dataset; discarding goes back to the mask on disk. Each change is announced by `events.changed`
so the session re-scores and the views redraw.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .annotation import MaskEditor, SaveMode, discard_recovery, save_mask
from .dataset import Dataset, DatasetItem, default_mask_path
from .errors import SegScopeError
from .events import Event


def mask_source(item: DatasetItem) -> Path:
    """The mask file an item's edits belong to: its ground truth, or where a new one goes."""
    return item.mask_path or default_mask_path(item.image_path)


class MaskDocument:
    """The mask of one dataset item at one image size (width, height); `disk_mask` None: the item has none."""

    def __init__(self, dataset: Dataset, item: DatasetItem, image_size: tuple[int, int],
                 disk_mask: np.ndarray | None, recovery_dir: Path | None = None) -> None:
        self.dataset = dataset
        self.item = item
        self.image_size = image_size
        self.disk_mask = disk_mask
        self.recovery_dir = recovery_dir  # None: beside each mask (core.annotation's default)
        self.editor: MaskEditor | None = None
        #: (document, kind) after every change of `mask`; kind is "edit" (also undo/redo), "save" or "discard".
        self.changed = Event("changed")

    @property
    def mask(self) -> np.ndarray | None:
        """The mask on screen: the edited one, else the one on disk (None: no mask and no edits)."""
        return self.editor.mask if self.editor is not None else self.disk_mask

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
        mask = self.disk_mask if self.disk_mask is not None else np.zeros((height, width), np.uint8)
        if mask.shape != (height, width):
            raise SegScopeError(f"{self.item.truth_path}: mask is {mask.shape[1]}x{mask.shape[0]} but the "
                                f"image is {width}x{height}; it cannot be edited")
        self.editor = MaskEditor(mask, num_classes)
        return self.editor

    def edited(self) -> None:
        """Call after an editor operation (stroke, fill, undo, ...): announces the change."""
        self.changed.emit(self, "edit")

    def save(self, mode: SaveMode) -> Path:
        """Write the edited mask the chosen way; the saved file becomes the mask on disk."""
        if self.editor is None:
            raise SegScopeError(f"{self.item.id}: no mask edits to save")
        written = save_mask(self.editor.mask, self.source, mode)
        self.editor.mark_saved()
        discard_recovery(self.source, self.recovery_dir)
        self.disk_mask = self.editor.mask.copy()
        self.item = self.dataset.adopt_mask(self.item, written)
        self.changed.emit(self, "save")
        return written

    def discard(self) -> None:
        """Forget the edits and their recovery file: the mask on disk is the mask again."""
        if self.editor is None:
            return
        discard_recovery(self.source, self.recovery_dir)
        self.editor = None
        self.changed.emit(self, "discard")
