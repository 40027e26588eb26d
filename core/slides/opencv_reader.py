"""PNG, JPEG, BMP and the other formats OpenCV decodes whole: decoded once, halved copies made on demand."""

from __future__ import annotations

import threading
from pathlib import Path

import cv2
import numpy as np

from ..files.fileio import DEFAULT_MAX_PIXELS, read_image
from .base import Level, SlideReader, pyramid_sizes

#: Levels stop once the longest side is at most this (one modest texture a viewer can always show).
BASE_MAX_SIDE = 2048


def halved_levels(width: int, height: int, base_max_side: int = BASE_MAX_SIDE) -> tuple[Level, ...]:
    """Level sizes of a slide halved (rounding up) until its longest side is at most `base_max_side`."""
    return tuple(Level(w, h, width / w) for w, h in pyramid_sizes(width, height, base_max_side))


class ImageSlide(SlideReader):
    """A slide held in memory as one BGR array (the file decoded once, as the MindX opencv decoder reads it)."""

    kind = "opencv"

    def __init__(self, path: Path, image: np.ndarray):
        height, width = image.shape[:2]
        super().__init__(path, halved_levels(width, height))
        self._pixels: list[np.ndarray] = [image]
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> ImageSlide:
        return cls(path, read_image(path, max_pixels))

    def level_pixels(self, level: int) -> np.ndarray:
        """The whole of `level` (level 0 is the decoded image; the others are computed once, when first asked)."""
        with self._lock:
            while len(self._pixels) <= level:
                below = self._pixels[-1]
                lv = self.levels[len(self._pixels)]
                self._pixels.append(cv2.resize(below, (lv.width, lv.height), interpolation=cv2.INTER_AREA))
            return self._pixels[level]

    def _read(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        return np.ascontiguousarray(self.level_pixels(level)[y:y + height, x:x + width])
