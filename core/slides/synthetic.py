"""A generated pyramidal TIFF for tests, benchmarks and demos, written tile by tile (a 100k x 100k slide
needs a few MB of RAM).

The slide looks like a pathology slide at every level: pale background with tissue blobs (a small random
map, smoothly upscaled) carrying a fine texture. Each level is rendered from that map at its own scale, so
levels agree with each other up to resampling, yet no level is ever held whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import tifffile

from ..errors import SegScopeError
from .base import pyramid_sizes

#: Compressions tifffile writes with imagecodecs that the readers (tifffile, OpenCV's libtiff, OpenSlide) read.
COMPRESSIONS = ("jpeg", "zlib", "none")
JPEG_QUALITY = 90
_BACKGROUND = np.array([236, 234, 240], np.float32)  # BGR of an empty glass slide
_TISSUE = np.array([190, 120, 200], np.float32)  # BGR of stained tissue


class _Generated:
    """The slide as a function of level-0 coordinates: a tissue map (one cell per `cell` px) and a texture."""

    def __init__(self, width: int, height: int, seed: int):
        rng = np.random.default_rng(seed)
        self.cell = cell = max(64, max(width, height) // 24)
        cells = rng.random((math.ceil(height / cell) + 2, math.ceil(width / cell) + 2)).astype(np.float32)
        self.tissue = cv2.GaussianBlur(cells, (0, 0), 1.0)
        self.texture = rng.integers(-40, 40, (256, 256, 3), dtype=np.int16).astype(np.float32)

    def weight(self, x0: int, y0: int, width: int, height: int, downsample: float) -> np.ndarray:
        """Tissue weight (0 background .. 1 tissue) at the box's pixel centres: the map, bilinear."""
        xs = (np.arange(width, dtype=np.float32) + x0 + 0.5) * downsample / self.cell + 0.5
        ys = (np.arange(height, dtype=np.float32) + y0 + 0.5) * downsample / self.cell + 0.5
        return self._weight(xs, ys)

    def _weight(self, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        map_x, map_y = np.meshgrid(xs, ys)
        level = cv2.remap(self.tissue, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        return np.clip((level - 0.5) * 6.0, 0.0, 1.0)

    def kind(self, x0: int, y0: int, size: int, downsample: float) -> str:
        """"background" or "tissue" where a tile (sampled on a coarse grid) is all one, else "edge"."""
        grid = np.linspace(0, size - 1, 17, dtype=np.float32) + 0.5
        coarse = self._weight((grid + x0) * downsample / self.cell + 0.5, (grid + y0) * downsample / self.cell + 0.5)
        return "background" if coarse.max() == 0 else "tissue" if coarse.min() == 1 else "edge"

    def tile(self, x0: int, y0: int, width: int, height: int, downsample: float) -> np.ndarray:
        """BGR uint8 pixels of a level's box (x0, y0, width, height) at `downsample`."""
        weight = self.weight(x0, y0, width, height, downsample)[..., None]
        reps = (math.ceil((y0 % 256 + height) / 256), math.ceil((x0 % 256 + width) / 256), 1)
        texture = np.tile(self.texture, reps)[y0 % 256:y0 % 256 + height, x0 % 256:x0 % 256 + width]
        pixels = _BACKGROUND + weight * (_TISSUE - _BACKGROUND + texture)
        return np.clip(pixels, 0, 255).astype(np.uint8)


def _encoder(compression: str) -> Callable[[np.ndarray], bytes]:
    """A tile's bytes as tifffile writes them for `compression` (JPEG: YCbCr, 2x2 subsampled)."""
    import imagecodecs

    if compression == "jpeg":
        return lambda rgb: bytes(imagecodecs.jpeg_encode(rgb, level=JPEG_QUALITY, colorspace="RGB",
                                                         outcolorspace="YCBCR", subsampling=(2, 2)))
    if compression == "zlib":
        return lambda rgb: bytes(imagecodecs.zlib_encode(rgb.tobytes(), level=6))
    return lambda rgb: rgb.tobytes()


def write_pyramidal_tiff(path: Path, size: tuple[int, int], tile: int = 512, levels: int | None = None,
                         compression: str = "jpeg", *, seed: int = 0, pixel_size_um: float = 0.25,
                         subifds: bool = True) -> Path:
    """Write a generated RGB slide of `size` (width, height) as a tiled pyramidal BigTIFF, tile by tile.

    `subifds` puts the reduced levels in SubIFDs of the first page (as OME-TIFF and QuPath write them);
    without, they follow as reduced-resolution pages (the layout OpenSlide's generic TIFF reader reads).
    """
    if compression not in COMPRESSIONS:
        raise SegScopeError(f"compression: choose one of {', '.join(COMPRESSIONS)}, got {compression!r}")
    if tile % 16 or tile <= 0:
        raise SegScopeError(f"tile: a TIFF tile side must be a positive multiple of 16, got {tile}")
    width, height = size
    sizes = pyramid_sizes(width, height, tile, levels)
    generated = _Generated(width, height, seed)
    options = {"tile": (tile, tile), "photometric": "rgb", "compression": None if compression == "none" else
               compression, "resolutionunit": "CENTIMETER", "metadata": None}

    encode = _encoder(compression)
    cache: dict[tuple[str, int, int], bytes] = {}  # background and inner tissue tiles repeat: encoded once

    def tiles(level_width: int, level_height: int) -> Iterator[bytes]:
        downsample = width / level_width
        for y0 in range(0, level_height, tile):
            for x0 in range(0, level_width, tile):
                kind = generated.kind(x0, y0, tile, downsample)
                key = (kind, x0 % 256, y0 % 256) if kind == "tissue" else (kind, 0, 0)
                data = cache.get(key) if kind != "edge" else None
                if data is None:
                    data = encode(np.ascontiguousarray(generated.tile(x0, y0, tile, tile, downsample)[..., ::-1]))
                    if kind != "edge":
                        cache[key] = data
                yield data

    with tifffile.TiffWriter(path, bigtiff=True) as writer:
        for index, (w, h) in enumerate(sizes):
            per_cm = 1e4 / (pixel_size_um * width / w)
            writer.write(tiles(w, h), shape=(h, w, 3), dtype=np.uint8, resolution=(per_cm, per_cm),
                         subifds=len(sizes) - 1 if subifds and index == 0 else None,
                         subfiletype=1 if index else 0, **options)
    return path
