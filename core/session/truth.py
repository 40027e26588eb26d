"""Which ground truth each image is scored against, as part of the session's state (shown on its row).

An image's `Truth` is the mask file the dataset names for it (`DatasetItem.truth_path`: a saved correction
`mask_corrected.png` wins over the original), plus the unsaved edits on top of it: edits on screen, or edits a
crash left in a recovery file (`core.editing.files`) that are not on screen yet. Every change of the mask an
image is scored against gives its truth a new `version`; a score of another version is stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..dataset.dataset import CORRECTED_SUFFIX
from ..editing.files import Recovery

NO_MASK = "no mask"
UNSAVED = "unsaved edits"


@dataclass(frozen=True)
class Truth:
    """The mask an image is scored against: `path` (None: the image has no mask file) with unsaved `edits` on
    top (held by the mask document on screen, or by `recovered` while the image is not on screen)."""

    path: Path | None
    version: int
    edits: bool = False
    recovered: Recovery | None = field(default=None, compare=False)  # edits a crash left, not yet on screen

    @property
    def label(self) -> str:
        """What the row shows: "mask.png", "mask_corrected.png + unsaved edits", "no mask"."""
        name = self.path.name if self.path is not None else NO_MASK
        return f"{name} + {UNSAVED}" if self.edits and self.path is not None else (UNSAVED if self.edits else name)

    @property
    def kind(self) -> str:
        """In a word: "original", "corrected" (a saved correction), "edited" (with unsaved edits) or "none"."""
        if self.edits:
            return "edited"
        if self.path is None:
            return "none"
        return "corrected" if self.path.stem.endswith(CORRECTED_SUFFIX) else "original"

    @property
    def exists(self) -> bool:
        """Whether there is anything to score against."""
        return self.path is not None or self.edits
