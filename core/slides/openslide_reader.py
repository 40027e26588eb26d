"""Vendor whole-slide formats (SVS, NDPI, MRXS, SCN, VMS/VMU, BIF, Philips TIFF...) through OpenSlide.

OpenSlide is the optional extra `slides` (openslide-python + the openslide-bin library wheel), detected when
a file needs it. Generic tiled TIFFs stay with the tifffile reader (`core.slides.tiff_reader`), which
OpenSlide agrees with pixel for pixel on levels with an integer downsample (tests/core/test_slides_openslide.py);
on a level whose downsample is not an integer (a last level of odd size) OpenSlide places the region at a
fractional position and resamples it, so its pixels there may differ from the file's by a level or two.

Every call into OpenSlide holds one lock: OpenSlide documents its API as thread-safe, yet format detection
from several threads at once has crashed it (openslide/openslide#161), and a detection on the slide loader
thread beside reads on other threads segfaulted here once. Region reads are tile-sized, so the wait is short.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..files.imageheader import image_format
from .base import Level, SlideReader

INSTALL = 'pip install "segscope[slides]"'
#: Formats only OpenSlide reads (not TIFF inside): without it, these get the install line.
OPENSLIDE_ONLY_SUFFIXES = (".mrxs", ".vms", ".vmu", ".svslide")
#: Image formats none of OpenSlide's is (they are TIFF or JPEG based, or files of their own): a PNG dataset
#: never asks OpenSlide, nor imports it (~15 ms, with Pillow).
NOT_OPENSLIDE_FORMATS = ("PNG", "BMP", "GIF", "WebP", "PNM")
#: Held around every OpenSlide call (detection, open, region reads, close), from whichever thread.
OPENSLIDE_LOCK = threading.Lock()


def _openslide() -> Any | None:
    try:
        import openslide
    except (ImportError, OSError):  # OSError: openslide-python without the library (no openslide-bin)
        return None
    return openslide


def openslide_missing() -> str:
    """What a user runs to read vendor slides here, or "" where OpenSlide is installed."""
    return "" if _openslide() is not None else f"needs {INSTALL}"


def wants_openslide(path: Path, head: bytes) -> bool:
    """A vendor slide: one OpenSlide detects as a format other than generic TIFF, or (OpenSlide missing)
    one only OpenSlide reads. Without OpenSlide, TIFF-based vendor files go on to the tifffile reader."""
    if image_format(head) in NOT_OPENSLIDE_FORMATS and path.suffix.lower() not in OPENSLIDE_ONLY_SUFFIXES:
        return False
    openslide = _openslide()
    if openslide is None:
        return path.suffix.lower() in OPENSLIDE_ONLY_SUFFIXES
    try:
        with OPENSLIDE_LOCK:
            vendor = openslide.OpenSlide.detect_format(str(path))
    except Exception:  # OpenSlide's own error types on unreadable files: not a slide it reads
        return False
    return vendor not in (None, "generic-tiff")


class OpenSlideSlide(SlideReader):
    """A slide opened by OpenSlide; regions come from its tile cache, composited over the slide's background."""

    kind = "openslide"

    def __init__(self, path: Path, slide: Any):
        self._slide = slide
        levels = tuple(Level(w, h, float(ds)) for (w, h), ds in zip(slide.level_dimensions, slide.level_downsamples))
        props = slide.properties
        mpp = (props.get("openslide.mpp-x"), props.get("openslide.mpp-y"))
        pixel_size = (float(mpp[0]), float(mpp[1])) if mpp[0] and mpp[1] else None
        super().__init__(path, levels, pixel_size)
        background = props.get("openslide.background-color") or "FFFFFF"
        self._background = np.array([int(background[i:i + 2], 16) for i in (4, 2, 0)], np.float32)  # BGR

    @classmethod
    def open(cls, path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> OpenSlideSlide:
        """Open `path`; `max_pixels` does not apply (nothing is decoded whole)."""
        openslide = _openslide()
        if openslide is None:
            raise SegScopeError(f"{path}: reading this slide format needs OpenSlide: {INSTALL}")
        try:
            with OPENSLIDE_LOCK:  # the constructor reads the levels and properties
                return cls(path, openslide.OpenSlide(str(path)))
        except Exception as exc:  # OpenSlideError / OpenSlideUnsupportedFormatError / OSError
            raise SegScopeError(f"{path}: OpenSlide cannot read this slide ({exc})") from None

    def _read(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        downsample = self.levels[level].downsample
        slide = self._slide
        if slide is None:
            raise SegScopeError(f"{self.path}: the slide is closed")
        # OpenSlide takes the corner in level-0 pixels.
        with OPENSLIDE_LOCK:
            region = slide.read_region((round(x * downsample), round(y * downsample)), level, (width, height))
        rgba = np.asarray(region)
        bgr = rgba[..., 2::-1]
        alpha = rgba[..., 3:]
        if alpha.min() == 255:
            return np.ascontiguousarray(bgr)
        # Transparent where the scanner left no tile: over the slide's background colour, as viewers show it.
        weight = alpha.astype(np.float32) / 255.0
        return np.rint(bgr * weight + self._background * (1.0 - weight)).astype(np.uint8)

    def close(self) -> None:
        slide, self._slide = self._slide, None
        if slide is not None:
            with OPENSLIDE_LOCK:
                slide.close()
