"""Decoded inputs through the cache: an image's crop box as the stream's opencv decoder gives it, and a truth
mask's values (whole, bit-packed where the mask has two values) with their counts.

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
class TruthMask:
    """A truth mask file's values as `read_mask` gives them, with their counts (`histogram`), kept as the cache
    stores them (one bit per pixel where the mask has two values) until asked for: `region` unpacks only its box
    (a demo ROI is a quarter of its 4000 x 3000 mask)."""

    size: tuple[int, int]  # (width, height)
    counts: np.ndarray  # of the whole mask
    stored: np.ndarray
    two: tuple[int, int] | None = None  # (low, high): `stored` holds one bit per pixel, set where `high`

    def whole(self) -> np.ndarray:
        return self.region(Roi.whole(*self.size))

    def region(self, box: Roi) -> np.ndarray:
        """The values in `box` (inside the mask)."""
        if self.two is None:
            return self.stored[box.y0 : box.y1, box.x0 : box.x1]
        first = box.x0 // 8  # the byte holding the box's first column
        bits = self.stored[box.y0 : box.y1, first : (box.x1 + 7) // 8]
        values = np.unpackbits(bits, axis=1, count=box.x1 - first * 8)[:, box.x0 - first * 8 :]
        low, high = self.two
        if (low, high) != (0, 1):
            values *= np.uint8(high - low)
            values += np.uint8(low)
        return values


def read_truth(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> TruthMask:
    """`read_mask(path)` with its counts: from the cache when it holds the mask (nothing decoded; a 4000 x 3000
    demo mask is 1.5 MB), else read and stored."""
    data = read_bytes(path)
    source = str(path)
    checked_size(data, source, max_pixels)  # refused from the header, hit or not
    store = decoded_store()
    key = _key(TRUTH, data, cv2.IMREAD_UNCHANGED) if store is not None else ""
    entry = store.get(key, TRUTH) if store is not None else None
    if entry is not None:
        return _stored_truth(entry.arrays[0], entry.meta)
    mask = decode_mask(data, source, max_pixels)
    packed, meta = _packed(mask)
    if store is not None:
        store.put(key, [packed], meta)
    return TruthMask((mask.shape[1], mask.shape[0]), np.asarray(meta["counts"], np.int64), mask)


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


def _stored_truth(stored: np.ndarray, meta: dict[str, object]) -> TruthMask:
    """The mask `_packed` stored."""
    counts = np.asarray(meta["counts"], np.int64)
    two = meta.get("two")
    if two is None:
        return TruthMask((stored.shape[1], stored.shape[0]), counts, stored)
    low, high = (int(v) for v in two)  # type: ignore[attr-defined]
    return TruthMask((int(meta["width"]), stored.shape[0]), counts, stored, (low, high))  # type: ignore[call-overload]
