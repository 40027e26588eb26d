"""The ground-truth mask conventions SegScope accepts, in one place.

A mask file holds, per pixel, one of:
- binary 0/255 (8-bit), 0/65535 (16-bit), or 0/1 (either depth): background / foreground;
- class indices 0..K-1 (8- or 16-bit) for a K-class model.
`to_mask` turns a decoded file into H x W uint8 values without losing any of these (a 16-bit 0/1 mask stays
0/1, 0/65535 becomes 0/255); `mask_to_labels` turns those values into class indices for a model. Anything
else (stray grey levels, colour, other 16-bit values) is still read by a stated rule, and `convention_issue`
/ the `notes` of `to_mask` say so, so a dataset can warn once instead of scoring it silently.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..errors import SegScopeError

#: The binary mask convention SegScope writes: background 0, foreground 255.
BINARY_FOREGROUND = 255
#: Binary masks with other values: foreground where the value is above this (the original script's /255 > 0.5).
BINARY_THRESHOLD = 127


#: OpenCV counts in float32, exact up to 2**24: larger arrays are counted in pieces of at most this many pixels.
_EXACT_COUNT = 1 << 24


def histogram(values: np.ndarray) -> np.ndarray:
    """Exact int64 counts of each value 0..255 in a 1- or 2-D uint8 array, the same as
    `np.bincount(values.ravel(), minlength=256)`: OpenCV's histogram (several times faster, no copy of a crop)."""
    rows = values.reshape(-1, 1) if values.ndim == 1 else values
    step = max(1, _EXACT_COUNT // max(1, rows.shape[1]))
    counts = np.zeros(256, np.int64)
    for start in range(0, rows.shape[0], step):
        part = rows[start : start + step]
        counts += cv2.calcHist([part], [0], None, [256], [0, 256]).ravel().astype(np.int64)
    return counts


def _examples(values: np.ndarray) -> str:
    shown = ", ".join(str(int(v)) for v in values[:4])
    return shown + (", ..." if len(values) > 4 else "")


def to_mask(decoded: np.ndarray, source: str, notes: list[str] | None = None) -> np.ndarray:
    """A decoded mask file (IMREAD_UNCHANGED: any depth, gray or colour) as H x W uint8 mask values.

    What does not follow the conventions is appended to `notes` (what was found and how it was read)."""
    notes = [] if notes is None else notes
    mask = decoded
    if mask.ndim == 3:
        colour = mask[..., :3] if mask.shape[2] >= 3 else mask[..., :1]
        mask = colour.max(axis=2)
        if not all(np.array_equal(colour[..., 0], colour[..., c]) for c in range(1, colour.shape[2])):
            notes.append("is a colour mask: read as the brightest channel of each pixel")
    if mask.dtype == np.uint8:
        return mask
    if mask.dtype.kind == "f":
        if not np.isfinite(mask).all() or (mask != np.round(mask)).any() or mask.min(initial=0) < 0:
            raise SegScopeError(f"{source}: a floating-point mask with fractional, negative or non-finite values; "
                                "save masks as 8- or 16-bit integers (0/255, 0/1 or class indices)")
        mask = mask.astype(np.int64)
    if mask.dtype.kind not in "ui" or mask.min(initial=0) < 0:
        raise SegScopeError(f"{source}: mask values of type {decoded.dtype} are not 0/255, 0/1 or class indices")
    top = int(mask.max(initial=0))
    if top <= 255:
        return mask.astype(np.uint8)
    if top == 65535 and not ((mask != 0) & (mask != 65535)).any():
        return np.where(mask != 0, 255, 0).astype(np.uint8)
    values = np.unique(mask[mask > 255])
    notes.append(f"has 16-bit values above 255 other than 65535 ({_examples(values)}): scaled to 8 bits")
    return np.round(np.minimum(mask, 65535) * (255.0 / 65535.0)).astype(np.uint8)


def binary_scale(mask: np.ndarray) -> float:
    """The foreground value of a binary mask: 1 for 0/1 masks, else 255."""
    return float(BINARY_FOREGROUND) if mask.max(initial=0) > 1 else 1.0


def mask_to_labels(mask: np.ndarray, num_classes: int) -> np.ndarray:
    """Mask values as the class indices of a `num_classes` model: binary masks by `binary_scale` (values
    other than 0/255 are foreground above `BINARY_THRESHOLD`), multi-class masks hold the class index."""
    if num_classes == 2:
        return (mask > (BINARY_THRESHOLD if binary_scale(mask) > 1 else 0)).astype(np.uint8)
    if mask.max(initial=0) >= num_classes:
        raise SegScopeError(f"mask value {int(mask.max())} is not a class index of a {num_classes}-class model")
    return mask.astype(np.uint8)


def convention_issue(mask: np.ndarray, num_classes: int) -> str | None:
    """What in a uint8 mask does not follow the conventions for a `num_classes` model (None: nothing)."""
    if num_classes != 2:
        return None  # class indices; `mask_to_labels` refuses values beyond the model's classes
    present = np.flatnonzero(histogram(mask))
    if set(present) <= {0, 1} or set(present) <= {0, 255}:
        return None
    stray = present[(present != 0) & (present != 255)]
    return (f"has values other than 0/255 or 0/1 ({_examples(stray)}) for a binary model: read as foreground "
            f"where above {BINARY_THRESHOLD}")
