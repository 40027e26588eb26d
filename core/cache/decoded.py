"""Decoded inputs through the cache: an image's crop box as the stream's opencv decoder gives it, and a truth
mask's values under an ROI, bit-packed where the mask has two values there.

An entry's key is the file's content (its xxh3-128 digest: every lookup hashes the whole file, so a file
changed in place, even one byte with its size and time kept, is never served), what decodes it (OpenCV's
version and flags, `SCHEME`) and the box. Only what the box needs is decoded where that gives the same pixels
(`fileio.decode_box`): not where the decoder turns the image (an EXIF orientation). With the cache off (or not
openable here) both decode as they would without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..dataset.masks import histogram
from ..files.fileio import DEFAULT_MAX_PIXELS, checked_size, decode_box, decode_mask, decode_mask_box, read_bytes
from ..roi import Roi
from .settings import decoded_store

IMAGE, TRUTH = "image", "truth"
#: How entries are made (the decode rules of `fileio`, the mask conventions, the packing): changed whenever one
#: of them changes, so an entry made by other rules is never read.
SCHEME = 1


def _key(kind: str, data: bytes, flags: int, box: Roi) -> str:
    from .store import content_digest  # only with a store open: the digest's library is the store's

    return f"{kind}/{SCHEME}/{content_digest(data)}/opencv-{cv2.__version__}-{flags}/{box.as_tuple()}"


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

    @property
    def present(self) -> np.ndarray:
        """The distinct values under the ROI, ascending."""
        return np.flatnonzero(histogram(self.values))


def truth_region(path: Path, box: Roi, max_pixels: int = DEFAULT_MAX_PIXELS) -> TruthRoi:
    """The truth mask at `path` under `box` (clipped to the mask), from the cache when it holds it; else read
    (down to the box's bottom row where that cannot change a value) and stored."""
    data = read_bytes(path)
    source = str(path)
    size = checked_size(data, source, max_pixels)
    store = decoded_store()
    key = _key(TRUTH, data, cv2.IMREAD_UNCHANGED, box) if store is not None else ""
    entry = store.get(key, TRUTH) if store is not None else None
    if entry is not None:
        return TruthRoi(_unpacked(entry.arrays[0], entry.meta), size, tuple(entry.meta["notes"]))  # type: ignore
    notes: list[str] = []
    values = decode_mask_box(data, source, box, max_pixels, notes) if box.x1 <= size[0] and box.y1 <= size[1] \
        else None
    if values is None:  # decoded whole (a mask of another size than the image: the caller refuses it)
        notes.clear()
        whole = decode_mask(data, source, max_pixels, notes)
        size, values = (whole.shape[1], whole.shape[0]), np.ascontiguousarray(whole[box.y0 : box.y1, box.x0 : box.x1])
    truth = TruthRoi(values, size, tuple(notes))
    if store is not None and box.x1 <= size[0] and box.y1 <= size[1]:
        packed, meta = _packed(truth.values)
        store.put(key, [packed], {**meta, "notes": list(truth.notes)})
    return truth


def _packed(values: np.ndarray) -> tuple[np.ndarray, dict[str, object]]:
    """`values` as one bit per pixel with its two values (low, high) where it has at most two, else as is."""
    present = np.flatnonzero(histogram(values))
    if len(present) > 2:
        return values, {"shape": list(values.shape)}
    low, high = int(present[0]) if len(present) else 0, int(present[-1]) if len(present) else 0
    return np.packbits(values == high, axis=None), {"shape": list(values.shape), "two": [low, high]}


def _unpacked(stored: np.ndarray, meta: dict[str, object]) -> np.ndarray:
    shape = tuple(int(n) for n in meta["shape"])  # type: ignore[attr-defined]
    two = meta.get("two")
    if two is None:
        return stored.reshape(shape)
    low, high = (int(v) for v in two)  # type: ignore[attr-defined]
    bits = np.unpackbits(stored, count=int(np.prod(shape))).reshape(shape)
    if (low, high) != (0, 1):
        bits *= np.uint8(high - low)
        bits += np.uint8(low)
    return bits
