"""Slide readers behind one interface (`SlideReader`), chosen by a registry from the file.

`open_slide(path)` asks each registered kind, in order, whether it reads the file (by its content, not only
its name) and opens it with the first that does. Add a format by adding a `SlideKind` to `SLIDE_READERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS, image_size, read_bytes
from ..files.imageheader import image_format
from ..files.kinds import what_is
from .base import Level, SlideReader
from .opencv_reader import ImageSlide
from .openslide_reader import OpenSlideSlide, openslide_missing, wants_openslide
from .tiff_reader import TiffSlide, wants_tiff_reader

__all__ = ["SLIDE_READERS", "Level", "SlideKind", "SlideReader", "open_slide", "slide_kind_for", "slide_size"]


@dataclass(frozen=True)
class SlideKind:
    """A reader kind: `accepts(path, head)` says from the file's first bytes whether it reads the file;
    `missing()` what this machine lacks to use it ("" when nothing)."""

    name: str
    accepts: Callable[[Path, bytes], bool]
    open: Callable[[Path, int], SlideReader]
    summary: str
    missing: Callable[[], str] = lambda: ""

    def describe(self) -> str:
        """"name: summary", with what this machine lacks to use it."""
        missing = self.missing()
        return f"{self.name}: {self.summary}" + (f" ({missing})" if missing else "")


def _opencv_accepts(path: Path, head: bytes) -> bool:
    return image_format(head) is not None


SLIDE_READERS: list[SlideKind] = [
    SlideKind("openslide", wants_openslide, OpenSlideSlide.open,
              "SVS, NDPI, MRXS, SCN, VMS, BIF and other vendor slides", openslide_missing),
    SlideKind("tiff", wants_tiff_reader, TiffSlide.open,
              "tiled or pyramidal TIFF, BigTIFF, OME-TIFF (reads only the tiles a region needs)"),
    SlideKind("opencv", _opencv_accepts, ImageSlide.open, "PNG, JPEG, BMP, WebP, GIF, PNM, plain TIFF (decoded whole)"),
]


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(4096)
    except OSError:
        return read_bytes(path)[:4096]  # raises the one-line error (missing, a folder, unreadable)


#: What to do with a mask no reader takes (a mask is saved by the user's tools, not a scanner's: its advice is not
#: the slide formats).
MASK_ADVICE = "save the mask as a PNG (lossless, one value a pixel) at the image's size, or as a tiled TIFF"


def slide_kind_for(path: Path, mask: bool = False) -> SlideKind:
    """The first registered kind that reads `path`, or a one-line error naming the kinds there are (for a
    `mask`: what to save it as)."""
    head = _head(path)
    for kind in SLIDE_READERS:
        if kind.accepts(path, head):
            return kind
    if mask:
        raise SegScopeError(f"{path}: cannot read this mask: it is {what_is(path)}; {MASK_ADVICE}")
    known = "; ".join(kind.describe() for kind in SLIDE_READERS)
    raise SegScopeError(f"{path}: no slide reader reads this file: it is {what_is(path)}; give one that a "
                        f"reader takes ({known})")


def open_slide(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> SlideReader:
    """Open `path` with the reader kind that reads it."""
    return slide_kind_for(path).open(path, max_pixels)


def slide_size(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS, mask: bool = False) -> tuple[int, int]:
    """(width, height) of a slide's (or a `mask`'s) level 0 without decoding it. The `max_pixels` guard applies
    to files the OpenCV reader decodes whole, not to those read region by region."""
    kind = slide_kind_for(path, mask)
    if kind.name == "opencv":
        return image_size(path, max_pixels)
    with kind.open(path, max_pixels) as slide:
        return slide.size
