"""Tiled and pyramidal TIFF / BigTIFF / OME-TIFF through tifffile, reading only the tiles a region needs.

The levels are tifffile's series levels (OME/SubIFD pyramids and reduced-resolution pages alike). A region
read seeks to each tile (or strip) it touches, reads its bytes under a lock and decodes them outside it with
the page's own decoder (`TiffPage.decode`), so no level is ever decoded whole and threads decode in parallel.
tifffile's zarr store (`aszarr`) would do the same through zarr, one more dependency for no gain here.

Pixels come out as OpenCV's IMREAD_COLOR gives them for the same file (what `fileio.decode_image` and the
stream's opencv decoder see; tests/core/test_slides_tiff.py compares with `cv2.imread`): gray is repeated
to BGR; RGB is reversed; unassociated alpha is premultiplied (rounded, as libtiff's RGBA reader does),
associated alpha dropped; 16-bit gray keeps its high byte and 16-bit RGB is scaled by 255/65535. JPEG tiles
are decoded by imagecodecs' libjpeg-turbo, which may differ from another libjpeg by a level here and there.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..errors import SegScopeError, first_line
from ..files.fileio import DEFAULT_MAX_PIXELS, open_regular
from .base import Level, SlideReader

_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
#: Photometric interpretations read: MINISBLACK, RGB, and YCbCr (JPEG tiles, which decode to RGB).
_PHOTOMETRIC = {1: "gray", 2: "rgb", 6: "rgb"}
#: ExtraSamples values: 1 = associated (premultiplied) alpha, 2 = unassociated alpha.
_ASSOCIATED, _UNASSOCIATED = 1, 2
#: The largest tile (or strip) decoded at once; a header claiming more is refused as damaged.
MAX_SEGMENT_BYTES = 256 << 20
_UM_PER_UNIT = {"pm": 1e-6, "nm": 1e-3, "µm": 1.0, "um": 1.0, "\u03bcm": 1.0, "mm": 1e3, "cm": 1e4, "m": 1e6}


def _tifffile() -> Any:
    """tifffile, imported when a TIFF is read: the remote worker imports this package on hosts without it."""
    import tifffile
    return tifffile


def is_tiff(head: bytes) -> bool:
    return head[:4] in _TIFF_MAGIC


def wants_tiff_reader(path: Path, head: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> bool:
    """A TIFF this reader should take: tiled, with several levels, or too large to decode whole. A small
    plain strip TIFF stays with OpenCV, which decodes it exactly as the stream's opencv decoder does."""
    if not is_tiff(head):
        return False
    try:
        with _tifffile().TiffFile(path) as tif:
            series = tif.series[0]
            page = series.levels[0].keyframe
            return bool(page.is_tiled or len(series.levels) > 1 or page.imagewidth * page.imagelength > max_pixels)
    except Exception:  # not a TIFF tifffile reads: let the next kind (OpenCV) say what is wrong
        return False


class TiffSlide(SlideReader):
    """A TIFF opened by tifffile; each level's tiles are read when a region needs them."""

    kind = "tiff"

    def __init__(self, path: Path, tif: Any, pages: list[Any]):
        self._tif = tif
        self._pages = pages
        for index, page in enumerate(self._pages):
            _check_page(path, page, index)
        width0 = self._pages[0].imagewidth
        levels = tuple(Level(p.imagewidth, p.imagelength, width0 / p.imagewidth) for p in self._pages)
        super().__init__(path, levels, _pixel_size(tif))
        self._file = open_regular(path, "TIFF slide")
        self._file_size = os.fstat(self._file.fileno()).st_size
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> TiffSlide:
        """Open `path`; `max_pixels` does not apply (nothing is decoded whole)."""
        try:
            tif = _tifffile().TiffFile(path)
        except Exception as exc:  # tifffile raises its own error types (and struct/ValueError) on bad files
            raise SegScopeError(f"{path}: tifffile cannot read this TIFF ({exc})") from None
        try:
            pages = [level.keyframe for level in tif.series[0].levels] if tif.series else []
            if not pages:
                raise SegScopeError(f"{path}: the TIFF holds no image tifffile can read (damaged or empty)")
            return cls(path, tif, pages)
        except BaseException:
            tif.close()
            raise

    def _segment_bytes(self, page: Any, index: int) -> bytes | None:
        offset, count = int(page.dataoffsets[index]), int(page.databytecounts[index])
        if count == 0:
            return None  # a tile the writer left out: tifffile decodes it as zeros
        if offset + count > self._file_size:
            raise SegScopeError(f"{self.path}: tile {index} lies at bytes {offset:,}..{offset + count:,}, past the end "
                                f"of the {self._file_size:,}-byte file: the file is damaged or truncated")
        with self._lock:
            self._file.seek(offset)
            return self._file.read(count)

    def _decode(self, page: Any, index: int) -> Any:
        """One tile (or strip) as the page's own codec decodes it (None: left out); a damaged one is a one-line
        error."""
        try:
            segment, _, _ = page.decode(self._segment_bytes(page, index), index, jpegtables=page.jpegtables)
        except SegScopeError:
            raise
        except Exception as exc:  # imagecodecs' and tifffile's own error types (DeflateError, JpegError, ...)
            raise SegScopeError(f"{self.path}: tile {index} cannot be decoded ({first_line(exc)}): the file is "
                                "damaged") from None
        return segment

    def _read(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        return _to_bgr(self._samples(level, x, y, width, height), self._pages[level])

    def read_samples(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        """The box's samples as the file stores them (H x W x samples, 8/16-bit): for masks, not images."""
        self.check_region(level, x, y, width, height)
        return self._samples(level, x, y, width, height)

    def _samples(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        page = self._pages[level]
        tile_h, tile_w = _segment_size(page)
        across = math.ceil(page.imagewidth / tile_w)
        per_plane = across * math.ceil(page.imagelength / tile_h)
        samples = page.samplesperpixel
        separate = page.planarconfig == 2
        out = np.zeros((height, width, samples), page.dtype)
        for ty in range(y // tile_h, (y + height - 1) // tile_h + 1):
            for tx in range(x // tile_w, (x + width - 1) // tile_w + 1):
                for plane in range(samples if separate else 1):
                    index = plane * per_plane + ty * across + tx
                    segment = self._decode(page, index)
                    if segment is None:
                        continue
                    tile = segment.reshape(segment.shape[-3:])  # (length, width, contig samples)
                    x0, y0 = tx * tile_w, ty * tile_h
                    ix0, iy0 = max(x, x0), max(y, y0)
                    ix1, iy1 = min(x + width, x0 + tile.shape[1]), min(y + height, y0 + tile.shape[0])
                    channels = slice(plane, plane + 1) if separate else slice(None)
                    out[iy0 - y:iy1 - y, ix0 - x:ix1 - x, channels] = tile[iy0 - y0:iy1 - y0, ix0 - x0:ix1 - x0]
        return out

    def close(self) -> None:
        self._file.close()
        self._tif.close()


def _segment_size(page: Any) -> tuple[int, int]:
    """(rows, columns) of one tile, or of one strip."""
    if page.is_tiled:
        return page.tilelength, page.tilewidth
    return min(page.rowsperstrip or page.imagelength, page.imagelength), page.imagewidth


def _check_page(path: Path, page: Any, index: int) -> None:
    """One-line refusals of what OpenCV's decoder would not give as 8-bit BGR either."""
    kind = _PHOTOMETRIC.get(int(page.photometric))
    extra = tuple(int(e) for e in page.extrasamples)
    samples = page.samplesperpixel
    problem: str | None = None
    tile_h, tile_w = _segment_size(page)
    needed = math.ceil(page.imagewidth / tile_w) * math.ceil(page.imagelength / tile_h) * \
        (samples if page.planarconfig == 2 else 1)
    listed = min(len(page.dataoffsets), len(page.databytecounts))
    if tile_h * tile_w * samples * page.dtype.itemsize > MAX_SEGMENT_BYTES:
        problem = f"its tiles are {tile_w}x{tile_h} pixels, over {MAX_SEGMENT_BYTES:,} bytes each (a damaged header)"
    elif listed < needed:
        problem = (f"its directory lists {listed:,} tiles where a {page.imagewidth}x{page.imagelength} image of "
                   f"{tile_w}x{tile_h} tiles needs {needed:,} (damaged or truncated)")
    elif kind is None:
        problem = f"photometric {page.photometric.name} is not read (gray, RGB or YCbCr/JPEG are)"
    elif page.imagedepth != 1:
        problem = "it holds volume tiles (ImageDepth > 1)"
    elif page.dtype not in (np.uint8, np.uint16):
        problem = f"its samples are {page.dtype}, not 8- or 16-bit unsigned"
    elif (kind, samples) not in (("gray", 1), ("rgb", 3), ("rgb", 4)) or (samples == 4 and len(extra) != 1):
        problem = f"it has {samples} samples per pixel as {kind} (1 gray, 3 RGB or 4 RGBA are read)"
    elif samples == 4 and page.dtype != np.uint8:
        problem = "16-bit RGBA is not read (8-bit RGBA, 16-bit gray and RGB are)"
    if problem:
        raise SegScopeError(f"{path}: level {index} cannot be read: {problem}")


def _to_bgr(pixels: np.ndarray, page: Any) -> np.ndarray:
    """A region's samples -> 8-bit BGR as OpenCV's IMREAD_COLOR decodes the same TIFF (see the module doc)."""
    samples = pixels.shape[2]
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8) if samples == 1 else cv2.convertScaleAbs(pixels, alpha=255 / 65535)
    if samples == 1:
        return cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR)
    if samples == 4:
        rgb = pixels[..., :3]
        if int(page.extrasamples[0]) == _UNASSOCIATED:
            alpha = pixels[..., 3:].astype(np.uint16)
            rgb = ((rgb * alpha + 127) // 255).astype(np.uint8)
        pixels = rgb
    return np.ascontiguousarray(pixels[..., ::-1])


def _pixel_size(tif: Any) -> tuple[float, float] | None:
    """(x, y) micrometres per level-0 pixel from the OME-XML, else from the resolution tags."""
    if tif.is_ome and tif.ome_metadata:
        import xml.etree.ElementTree as ElementTree  # only OME-TIFF slides need an XML parser

        try:
            root = ElementTree.fromstring(tif.ome_metadata)
        except ElementTree.ParseError:
            root = None
        pixels = next((e for e in root.iter() if e.tag.endswith("}Pixels")), None) if root is not None else None
        if pixels is not None and pixels.get("PhysicalSizeX") and pixels.get("PhysicalSizeY"):
            try:
                sizes = [float(pixels.get(f"PhysicalSize{a}", "")) * _UM_PER_UNIT[pixels.get(f"PhysicalSize{a}Unit",
                                                                                            "µm")] for a in "XY"]
                return sizes[0], sizes[1]
            except (KeyError, ValueError):
                pass
    page = tif.pages[0]
    tags = page.tags
    unit = tags.get("ResolutionUnit")
    um = {2: 25400.0, 3: 10000.0}.get(int(unit.value) if unit else 2)  # the TIFF default unit is the inch
    resolutions = [tags.get(name) for name in ("XResolution", "YResolution")]
    if um is None or None in resolutions:
        return None
    values = []
    for tag in resolutions:
        numerator, denominator = tag.value
        if numerator <= 0 or denominator <= 0:
            return None
        values.append(um * denominator / numerator)
    if unit is None or values == [um, um]:  # no unit, or 1 pixel per inch: the writer's default, not a size
        return None
    return values[0], values[1]
