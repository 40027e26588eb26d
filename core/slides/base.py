"""The one interface every slide reader implements, whatever the file (PNG, tiled/pyramidal TIFF, SVS...).

A slide has one or more levels: `levels[0]` is full resolution, each next one a downsampled copy the file
holds (or the reader computes). Pixels come out as the stream's decoder gives them: H x W x 3 BGR uint8,
C-contiguous. Regions are read in a level's own pixel coordinates and must lie inside it; a reader reads
only what a region needs where the format allows, and `read_region` may be called from several threads.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SegScopeError
from ..roi import Roi


@dataclass(frozen=True)
class Level:
    """One level of a slide: its size in its own pixels and how many level-0 pixels one of them spans."""

    width: int
    height: int
    downsample: float


def pyramid_sizes(width: int, height: int, max_side: int, levels: int | None = None) -> list[tuple[int, int]]:
    """Level sizes halved (rounding up) until the longest side is at most `max_side`, or `levels` of them."""
    sizes = [(width, height)]
    while (levels is None and max(sizes[-1]) > max_side) or (levels is not None and len(sizes) < levels):
        sizes.append(((sizes[-1][0] + 1) // 2, (sizes[-1][1] + 1) // 2))
    return sizes


class SlideReader(abc.ABC):
    """An open slide; use it as a context manager (or call `close`) so file handles are released."""

    #: Registry name of the reader kind (see `core.slides.SLIDE_READERS`).
    kind = ""

    def __init__(self, path: Path, levels: tuple[Level, ...], pixel_size_um: tuple[float, float] | None = None):
        self.path = path
        self.levels = levels
        self.pixel_size_um = pixel_size_um  # (x, y) micrometres per level-0 pixel, where the file says

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of level 0."""
        return self.levels[0].width, self.levels[0].height

    def level_for(self, downsample: float) -> int:
        """The coarsest level whose pixels are no larger than `downsample` level-0 pixels (0 when none is)."""
        fitting = [i for i, level in enumerate(self.levels) if level.downsample <= max(downsample, 1.0) + 1e-9]
        return max(fitting) if fitting else 0

    def read_region(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        """BGR uint8 pixels of the box (x, y, width, height) of `level`, in that level's pixels."""
        self.check_region(level, x, y, width, height)
        try:
            region = self._read(level, x, y, width, height)
        except SegScopeError:
            raise
        except Exception as exc:  # noqa: BLE001 - each decoder library fails on a damaged file in its own way
            lv = self.levels[level]
            raise SegScopeError(f"{self.path}: cannot read the region x={x} y={y} {width}x{height} of the "
                                f"{lv.width}x{lv.height} slide ({type(exc).__name__}: {exc}): is the file "
                                "damaged?") from None
        assert region.shape == (height, width, 3) and region.dtype == np.uint8, (self.kind, region.shape)
        return region

    def check_region(self, level: int, x: int, y: int, width: int, height: int) -> None:
        """A one-line error unless the box lies inside `level`."""
        if not 0 <= level < len(self.levels):
            raise SegScopeError(f"{self.path}: no level {level} (the slide has {len(self.levels)})")
        lv = self.levels[level]
        if not Roi(x, y, x + width, y + height).fits(lv.width, lv.height):
            raise SegScopeError(f"{self.path}: region x={x} y={y} {width}x{height} lies outside level {level} "
                                f"({lv.width}x{lv.height})")

    def read_roi(self, roi: Roi) -> np.ndarray:
        """Full-resolution BGR pixels of `roi` (slide pixels)."""
        return self.read_region(0, roi.x0, roi.y0, roi.width, roi.height)

    @abc.abstractmethod
    def _read(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        """The region, already checked to lie inside the level."""

    def close(self) -> None:  # noqa: B027 - readers holding no handle have nothing to release
        """Release file handles; safe to call twice."""

    def __enter__(self) -> SlideReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
