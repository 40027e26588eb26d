"""Which ground truth each image is scored against in the viewer, as part of the session's state (shown on its
row).

An image's `ImageTruth` is the truth file the dataset names for it (`Dataset.truth`, `core.dataset.truth`: a
saved correction `mask_corrected.png` wins over the original under the `auto` rule) plus the unsaved edits on
top of it: edits on screen, or edits a crash left in a recovery file (`core.editing.files`) that are not on
screen yet. Every change of the mask an image is scored against gives its truth a new `version`; a score of
another version is stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.truth import Truth
from ..editing.files import Recovery
from ..errors import SegScopeError
from ..files.stamp import Stamp

NO_MASK = "no mask"
UNSAVED = "unsaved edits"
#: `ImageTruth.kind` while unsaved edits are on top of the file, and without any truth.
EDITED, NONE = "edited", "none"


@dataclass(frozen=True)
class ImageTruth:
    """The mask an image is scored against: its truth `file` (None: it has none) with unsaved `edits` on top (held
    by the mask document on screen, or by `recovered` while the image is not on screen)."""

    file: Truth | None
    version: int
    edits: bool = False
    recovered: Recovery | None = field(default=None, compare=False)  # edits a crash left, not yet on screen
    stamp: Stamp = field(default=Stamp(), compare=False)  # the truth file as it was read (missing: none)

    @property
    def path(self) -> Path | None:
        return self.file.path if self.file is not None else None

    @property
    def label(self) -> str:
        """What the row shows on hover: "mask.png", "mask_corrected.png + unsaved edits", "no mask"."""
        name = self.file.path.name if self.file is not None else ""
        if self.edits:
            return f"{name} + {UNSAVED}" if name else UNSAVED
        return name or NO_MASK

    @property
    def kind(self) -> str:
        """In a word: "original", "replaced" (an original a replace save rewrote), "corrected" (a saved correction),
        "edited" (with unsaved edits) or "none"."""
        if self.edits:
            return EDITED
        return self.file.kind if self.file is not None else NONE

    def describe(self, root: Path | None = None) -> dict[str, str] | None:
        """How metrics files and provenance name it: its file's `Truth.describe` (relative to the dataset `root`),
        of kind "edited" with unsaved edits on top; None without any truth."""
        if self.file is None:
            return {"kind": EDITED} if self.edits else None
        return {**self.file.describe(root), "kind": self.kind}

    @property
    def exists(self) -> bool:
        """Whether there is anything to score against."""
        return self.file is not None or self.edits


def stamp_of(file: Truth | None) -> Stamp:
    """The truth file as it is now (missing: no file, or one that cannot be read: not the file scored)."""
    try:
        return Stamp.of(file.path) if file is not None else Stamp()
    except SegScopeError:
        return Stamp()


#: Each image's truth file and its stamp as read (`truth_files`), by id.
TruthFiles = Mapping[str, "tuple[Truth | None, Stamp]"]


def truth_files(dataset: Dataset, items: Iterable[DatasetItem]) -> dict[str, tuple[Truth | None, Stamp]]:
    """Each item's truth file (`Dataset.truth`) and its stamp as they are now: what `Session.truth` reads of an
    image when first asked (a `stat` or three), read ahead on a worker for the rows a dataset shows when it opens
    (`Session.open_dataset`), so that drawing them reads no file in the GUI thread."""
    found = {}
    for item in items:
        file = dataset.truth(item)
        found[item.id] = (file, stamp_of(file))
    return found
