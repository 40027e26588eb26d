"""A slide and its halved copies, so a viewer can show a 16k x 16k image one screen of pixels at a time.

`levels[0]` is the full-resolution BGR image; each next level is half the size (area-averaged) down to a
base level of at most `BASE_MAX_SIDE` px, which a viewer can always keep on screen as one modest texture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

#: Longest side of the always-shown base level of the pyramid (one modest texture).
BASE_MAX_SIDE = 2048


@dataclass
class Pyramid:
    """A BGR slide and its 2x-downsampled copies; `levels[0]` is full resolution, `levels[-1]` the base."""

    levels: list[np.ndarray]

    @classmethod
    def build(cls, image_bgr: np.ndarray, base_max_side: int = BASE_MAX_SIDE) -> Pyramid:
        levels = [image_bgr]
        while max(levels[-1].shape[:2]) > base_max_side:
            h, w = levels[-1].shape[:2]
            levels.append(cv2.resize(levels[-1], ((w + 1) // 2, (h + 1) // 2), interpolation=cv2.INTER_AREA))
        return cls(levels)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the full-resolution slide."""
        return self.levels[0].shape[1], self.levels[0].shape[0]

    def level_for(self, slide_px_per_screen_px: float) -> int:
        """The coarsest level that still has at least one pixel per screen pixel at this zoom."""
        wanted = math.floor(math.log2(max(slide_px_per_screen_px, 1.0)))
        return min(wanted, len(self.levels) - 1)

    def crop(self, level: int, rect: tuple[int, int, int, int]) -> tuple[np.ndarray, tuple[int, int, int, int]]:
        """RGB pixels of `level` covering `rect` (x0, y0, x1, y1 in full-resolution pixels).

        Returns the pixels and the full-resolution rectangle they actually cover (aligned to the level).
        """
        scale = 2**level
        image = self.levels[level]
        h, w = image.shape[:2]
        x0, y0 = max(rect[0] // scale, 0), max(rect[1] // scale, 0)
        x1, y1 = min(-(-rect[2] // scale), w), min(-(-rect[3] // scale), h)
        pixels = cv2.cvtColor(image[y0:y1, x0:x1], cv2.COLOR_BGR2RGB)
        full_w, full_h = self.size
        covered = (x0 * scale, y0 * scale, min(x1 * scale, full_w), min(y1 * scale, full_h))
        return pixels, covered
