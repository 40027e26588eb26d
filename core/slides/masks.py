"""Ground-truth masks as large as their slides: region reads of mask values, without decoding the whole mask
where the file allows it (a tiled or pyramidal TIFF); other masks are decoded whole (within --max-pixels).

Values follow `core.dataset.masks.to_mask` (0/255, 0/1 or class indices; 16-bit 0/65535 read as 0/255), applied per
region, so a region's values equal the whole mask's read cropped; with a `MaskRule`, each region is checked and
put in SegScope's own convention by it (`MaskRule.canonical`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cache.decoded import TruthMask, read_truth
from ..dataset.masks import MaskRule, relabelled, to_mask
from ..errors import SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..roi import Roi
from . import slide_kind_for
from .tiff_reader import TiffSlide


class MaskReader:
    """A mask file opened for region reads in level-0 pixels; use it as a context manager."""

    def __init__(self, path: Path, max_pixels: int = DEFAULT_MAX_PIXELS, rule: MaskRule | None = None):
        self.path, self.rule = path, rule
        self._tiff: TiffSlide | None = None
        self._whole: TruthMask | None = None
        self._table: np.ndarray | None = None  # the rule's canonical values of the whole mask's values
        if slide_kind_for(path, mask=True).name == "tiff":
            self._tiff = TiffSlide.open(path)
            self.size = self._tiff.size
        else:
            self._whole = read_truth(path, max_pixels)  # through the decoded-input cache; regions unpacked as read
            if rule is not None:  # the whole mask checked by its counts
                self._table = rule.canonical_table(self._whole.counts, str(path))
            self.size = self._whole.size

    def read_roi(self, roi: Roi) -> np.ndarray:
        """H x W uint8 mask values of `roi` (which must lie inside the mask)."""
        if not roi.fits(*self.size):
            raise SegScopeError(f"{self.path}: region {roi} lies outside the {self.size[0]}x{self.size[1]} mask")
        if self._whole is not None:
            return relabelled(self._whole.region(roi), self._table)
        assert self._tiff is not None
        samples = self._tiff.read_samples(0, roi.x0, roi.y0, roi.width, roi.height)
        region = to_mask(samples[..., 0] if samples.shape[2] == 1 else samples, str(self.path))
        return region if self.rule is None else self.rule.canonical(region, str(self.path))

    def close(self) -> None:
        if self._tiff is not None:
            self._tiff.close()

    def __enter__(self) -> MaskReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
