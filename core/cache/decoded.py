"""Decoded inputs through the cache: an image's crop box as the stream's opencv decoder gives it, and a truth
mask's values, bit-packed where the mask has two values.

An entry's key is the file's content (its xxh3-128 digest: every lookup hashes the whole file, so a file
changed in place, even one byte with its size and time kept, is never served), what decodes it (OpenCV's
version and flags, `SCHEME`) and, for an image, the box. Of an image only what the box needs is decoded where
that gives the same pixels (`fileio.decode_box`): not where the decoder turns the image (an EXIF orientation).
With the cache off (or not openable here) both decode as they would without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..dataset.masks import histogram
from ..files.fileio import DEFAULT_MAX_PIXELS, checked_size, decode_box, decode_mask, read_bytes
from ..roi import Roi
from .settings import decoded_store

IMAGE, TRUTH = "image", "truth"
#: How entries are made (the decode rules of `fileio`, the mask conventions, the packing): changed whenever one
#: of them changes, so an entry made by other rules is never read.
SCHEME = 1


def _key(kind: str, data: bytes, flags: int, box: Roi | None = None) -> str:
    from .store import content_digest  # only with a store open: the digest's library is the store's

    where = f"/{box.as_tuple()}" if box is not None else ""
    return f"{kind}/{SCHEME}/{content_digest(data)}/opencv-{cv2.__version__}-{flags}{where}"


def image_region(data: bytes, source: str, box: Roi, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray | None:
    """`decode_image(data)[box]` (H x W x 3 BGR uint8, `box` inside the image by its header), from the cache
    when it holds it; else decoded (only what the box needs) and stored. None where the decoder turns the image
    (an EXIF orientation): the box is not its pixels, the caller decodes the whole file."""
    checked_size(data, source, max_pixels)  # refused from the header, hit or not
    store = decoded_store()
    key = _key(IMAGE, data, cv2.IMREAD_COLOR, box) if store is not None else ""
    entry = store.get(key, IMAGE) if store is not None else None
    if entry is not None:
        return entry.arrays[0]
    pixels = decode_box(data, source, box, max_pixels)
    if store is not None and pixels is not None:
        store.put(key, [pixels], {})
    return pixels


@dataclass(frozen=True)
class TruthRoi:
    """A truth mask's values (`masks.to_mask`) under an ROI, the mask's (width, height), and what in the file
    does not follow the mask conventions (`to_mask`'s notes)."""

    values: np.ndarray
    size: tuple[int, int]
    notes: tuple[str, ...]


def truth_region(path: Path, box: Roi, max_pixels: int = DEFAULT_MAX_PIXELS) -> TruthRoi:
    """The truth mask at `path` under `box` (clipped to the mask). The cache holds each mask file whole, one
    bit per pixel where it has two values (a 4000 x 3000 demo mask: 1.5 MB), so any ROI of it is a hit; else
    the mask is read and stored."""
    data = read_bytes(path)
    source = str(path)
    checked_size(data, source, max_pixels)  # refused from the header, hit or not
    store = decoded_store()
    key = _key(TRUTH, data, cv2.IMREAD_UNCHANGED) if store is not None else ""
    entry = store.get(key, TRUTH) if store is not None else None
    if entry is not None:
        meta = entry.meta
        size = tuple(int(n) for n in meta["size"])  # type: ignore[attr-defined]
        return TruthRoi(_cut(entry.arrays[0], meta, box), size, tuple(meta["notes"]))  # type: ignore
    notes: list[str] = []
    mask = decode_mask(data, source, max_pixels, notes)
    size = (mask.shape[1], mask.shape[0])
    if store is not None:
        packed, meta = _packed(mask)
        store.put(key, [packed], {**meta, "size": list(size), "notes": notes})
    return TruthRoi(np.ascontiguousarray(mask[box.y0 : box.y1, box.x0 : box.x1]), size, tuple(notes))


def _packed(mask: np.ndarray) -> tuple[np.ndarray, dict[str, object]]:
    """A whole mask as one bit per pixel, row by row, with its two values (low, high) where it has at most two,
    else as is; its value counts (`histogram`) beside."""
    counts = histogram(mask)
    present = np.flatnonzero(counts)
    meta: dict[str, object] = {"counts": counts.tolist()}
    if len(present) > 2:
        return mask, meta
    low, high = (int(present[0]), int(present[-1])) if len(present) else (0, 0)
    return np.packbits(mask == high, axis=1), {**meta, "width": mask.shape[1], "two": [low, high]}


def _cut(stored: np.ndarray, meta: dict[str, object], box: Roi) -> np.ndarray:
    """The values under `box` (clipped to the mask) of a mask stored by `_packed`, unpacking only its bytes."""
    two = meta.get("two")
    if two is None:
        return np.ascontiguousarray(stored[box.y0 : box.y1, box.x0 : box.x1])
    width = int(meta["width"])  # type: ignore[call-overload]
    x0, x1 = min(box.x0, width), min(box.x1, width)
    first = x0 // 8
    bits = np.unpackbits(stored[box.y0 : box.y1, first : (x1 + 7) // 8], axis=1)
    values = np.ascontiguousarray(bits[:, x0 - 8 * first : x1 - 8 * first])
    low, high = (int(v) for v in two)  # type: ignore[attr-defined]
    if (low, high) != (0, 1):
        values *= np.uint8(high - low)
        values += np.uint8(low)
    return values
