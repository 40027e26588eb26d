"""Stitched results (a class mask, a probability heatmap) as a tiled, pyramidal OME-TIFF QuPath and napari open.

Level 0 comes tile by tile from a callable (or an array / memmap); each reduced level (2x smaller, rounding
up, until one tile holds it) is made from the level above while that level is written and kept in a temporary
memmap beside the output, so a 100k x 100k result never needs a full array in memory. The layout is the one
tifffile documents for OME-TIFF pyramids: level 0 in the first IFD with the OME-XML, the reduced levels in
its SubIFDs. The file is written to a temporary name and moved into place (core.files.fileio).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Union

import cv2
import numpy as np
import tifffile

from ..errors import SegScopeError
from ..files.fileio import publish, removed_on_failure, staging_folder, write_temp
from .base import pyramid_sizes

#: Reads level 0's box (x, y, width, height) as H x W (x 3) uint8; boxes never cross the image's edge.
RegionSource = Callable[[int, int, int, int], np.ndarray]
Source = Union[RegionSource, np.ndarray]  # noqa: UP007 (a run-time alias: Python 3.9 has no X | Y)
COMPRESSIONS = ("zlib", "jpeg", "none")
RESAMPLING = ("nearest", "area")  # nearest for class masks (no invented classes), area for heatmaps


def write_ome_tiff(path: Path, source: Source, size: tuple[int, int], *, channels: int = 1, tile: int = 512,
                   compression: str = "zlib", resample: str = "nearest",
                   pixel_size_um: tuple[float, float] | None = None, overwrite: bool = False) -> Path:
    """Write `source` (level 0, `size` = (width, height), 1 gray or 3 BGR channels of uint8) as a pyramidal
    OME-TIFF at `path`. JPEG (lossy, RGB only) suits heatmaps, never masks."""
    path = Path(path)
    _check(path, channels, tile, compression, resample, overwrite)
    width, height = size
    read = _region_reader(path, source, size, channels)
    sizes = pyramid_sizes(width, height, tile)
    tmp = write_temp(path, b"")
    with removed_on_failure(tmp, path):
        with staging_folder(path.parent) as scratch:  # the reduced levels' memmaps
            _write(tmp, read, sizes, channels, tile, compression, resample, pixel_size_um, scratch)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    return publish(tmp, path, overwrite)


def _check(path: Path, channels: int, tile: int, compression: str, resample: str, overwrite: bool) -> None:
    problem = None
    if channels not in (1, 3):
        problem = f"channels must be 1 (a mask) or 3 (a BGR heatmap), got {channels}"
    elif tile <= 0 or tile % 16:
        problem = f"tile must be a positive multiple of 16, got {tile}"
    elif compression not in COMPRESSIONS:
        problem = f"compression: choose one of {', '.join(COMPRESSIONS)}, got {compression!r}"
    elif compression == "jpeg" and channels != 3:
        problem = "JPEG is for 3-channel heatmaps (lossy): save masks with zlib"
    elif resample not in RESAMPLING:
        problem = f"resample: choose one of {', '.join(RESAMPLING)}, got {resample!r}"
    elif path.exists() and not overwrite:
        problem = "already exists (use --overwrite to replace it)"
    if problem:
        raise SegScopeError(f"{path}: {problem}")


def _region_reader(path: Path, source: Source, size: tuple[int, int], channels: int) -> RegionSource:
    if not isinstance(source, np.ndarray):
        return source
    shape = (size[1], size[0]) + ((channels,) if channels == 3 else ())
    if source.dtype != np.uint8 or source.shape != shape:
        raise SegScopeError(f"{path}: the result to save is a {source.dtype} array of shape {source.shape}; a "
                            f"{size[0]}x{size[1]} result with {channels} channel(s) needs uint8 of shape {shape}")
    return _array_reader(source)


def _array_reader(array: np.ndarray) -> RegionSource:
    return lambda x, y, w, h: array[y:y + h, x:x + w]


def _tiles(read: RegionSource, width: int, height: int, tile: int, channels: int,
           below: np.ndarray | None, resample: str) -> Iterator[np.ndarray]:
    """The level's tiles in row order (RGB for 3 channels), each also halved into `below`, the next level."""
    for y in range(0, height, tile):
        for x in range(0, width, tile):
            w, h = min(tile, width - x), min(tile, height - y)
            region = np.asarray(read(x, y, w, h))
            if region.shape[:2] != (h, w) or region.dtype != np.uint8:
                raise SegScopeError(f"the result's region x={x} y={y} {w}x{h} came back as a "
                                    f"{'x'.join(map(str, region.shape))} {region.dtype} array")
            region = region.reshape(h, w, channels)
            if below is not None:
                below[y // 2:(y + h + 1) // 2, x // 2:(x + w + 1) // 2] = _halve(region, resample)
            padded = np.zeros((tile, tile, channels), np.uint8)
            padded[:h, :w] = region[..., ::-1] if channels == 3 else region
            yield padded if channels == 3 else padded[..., 0]


def _halve(region: np.ndarray, resample: str) -> np.ndarray:
    """2x smaller, rounding up: the top-left pixel of each 2x2 (nearest) or their mean (area; an odd edge
    repeated first, so the mean is always of four pixels)."""
    if resample == "nearest":
        return region[::2, ::2]
    h, w = region.shape[:2]
    even = cv2.copyMakeBorder(region, 0, h % 2, 0, w % 2, cv2.BORDER_REPLICATE)
    halved = cv2.resize(even, ((w + 1) // 2, (h + 1) // 2), interpolation=cv2.INTER_AREA)
    return halved.reshape(halved.shape[0], halved.shape[1], region.shape[2])


def _write(tmp: Path, read: RegionSource, sizes: list[tuple[int, int]], channels: int, tile: int, compression: str,
           resample: str, pixel_size_um: tuple[float, float] | None, scratch: Path) -> None:
    metadata: dict[str, object] = {"axes": "YXS" if channels == 3 else "YX"}
    if pixel_size_um:
        metadata.update(PhysicalSizeX=pixel_size_um[0], PhysicalSizeXUnit="µm",
                        PhysicalSizeY=pixel_size_um[1], PhysicalSizeYUnit="µm")
    width0 = sizes[0][0]
    with tifffile.TiffWriter(tmp, bigtiff=True, ome=True) as writer:
        for index, (width, height) in enumerate(sizes):
            below = None
            if index + 1 < len(sizes):
                w, h = sizes[index + 1]
                below = np.lib.format.open_memmap(scratch / f"level{index + 1}.npy", "w+", np.uint8, (h, w, channels))
            options: dict[str, object] = {}
            if pixel_size_um:
                per_cm = tuple(1e4 / (um * width0 / width) for um in pixel_size_um)
                options.update(resolution=per_cm, resolutionunit="CENTIMETER")
            writer.write(_tiles(read, width, height, tile, channels, below, resample), shape=(height, width, channels)
                         if channels == 3 else (height, width), dtype=np.uint8, tile=(tile, tile),
                         photometric="rgb" if channels == 3 else "minisblack",
                         compression=None if compression == "none" else compression,
                         subifds=len(sizes) - 1 if index == 0 else None, subfiletype=1 if index else 0,
                         metadata=metadata if index == 0 else None, **options)
            if below is not None:
                below.flush()
                read = _array_reader(below)
