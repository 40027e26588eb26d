"""The ground-truth mask conventions SegScope accepts, in one place, and the one rule that reads them: it never
guesses.

A mask file holds, per pixel, one of (for a model with K classes):
- binary masks (K = 2): 0/255 (8-bit; 0/65535 in a 16-bit file) or 0/1 (either depth): background / foreground;
- class indices 0..K-1 (8- or 16-bit);
- the values the model card declares in `truth_values` (`{"0": 0, "128": 1, "255": 2}`: file value -> class
  index; docs/model-cards.md): then those values and no others.
A grey image saved as RGB(A) reads as its grey values. Anything else — stray grey levels, a colour mask, 16-bit
values above 255, 0/1/255 mixed, an index the model does not have — is refused by `MaskRule.check` in one line
naming the file and its values (exit 2 on the command line), never scored by a guess.

`to_mask` turns a decoded file into H x W uint8 values (a 16-bit 0/65535 mask becomes 0/255, other 16-bit
masks keep values up to 255); `MaskRule` checks them by their histogram (`histogram`) and turns them into the
model's class indices; `mask_to_labels` is the rule without a card's values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import SegScopeError
from ..files.imageheader import image_format

#: The binary mask convention SegScope writes: background 0, foreground 255.
BINARY_FOREGROUND = 255
#: 0/255 binary masks: foreground where the value is above this (the original script's /255 > 0.5); only 0 and
#: 255 are accepted, so this decides only values resampled between them (`core.metrics.scores`).
BINARY_THRESHOLD = 127
#: The `Capabilities.details` key (and model card field) of a card's declared truth values.
TRUTH_VALUES_KEY = "truth_values"

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


def _examples(values: np.ndarray | list[int]) -> str:
    shown = ", ".join(str(int(v)) for v in list(values)[:6])
    return shown + (", ..." if len(values) > 6 else "")


def to_mask(decoded: np.ndarray, source: str) -> np.ndarray:
    """A decoded mask file (IMREAD_UNCHANGED: any depth, gray or colour) as H x W uint8 mask values; a colour
    mask whose channels differ, 16-bit values above 255 (other than a 0/65535 mask) and floats that are not
    whole numbers are refused in one line."""
    mask = decoded
    if mask.ndim == 3:
        colour = mask[..., :3] if mask.shape[2] >= 3 else mask[..., :1]
        if not all(np.array_equal(colour[..., 0], colour[..., c]) for c in range(1, colour.shape[2])):
            raise SegScopeError(f"{source}: a colour mask (its channels differ); save the mask as one grey channel "
                                "of 0/255, 0/1 or class indices (or declare truth_values in the model card)")
        mask = colour[..., 0]
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
        return np.where(mask != 0, BINARY_FOREGROUND, 0).astype(np.uint8)
    raise SegScopeError(f"{source}: 16-bit mask values {_examples(np.unique(mask[mask > 255]))} are no mask "
                        "convention (0/65535, 0/1, 0/255 or class indices); save it as 8-bit 0/255 or class indices")


def format_truth_values(pairs: Mapping[int, int]) -> str:
    """A card's `truth_values` as one `Capabilities.details` string: `0:0,128:1,255:2`."""
    return ",".join(f"{value}:{index}" for value, index in sorted(pairs.items()))


def parse_truth_values(text: str) -> dict[int, int]:
    """`format_truth_values`' string back as {file value: class index}."""
    return {int(value): int(index) for value, index in (pair.split(":") for pair in text.split(",") if pair)}


@dataclass(frozen=True)
class MaskRule:
    """How a model with `num_classes` classes reads ground-truth masks: the conventions of the module docstring,
    or only the card's `values` ({file value: class index}) when it declares them."""

    num_classes: int
    values: tuple[tuple[int, int], ...] = ()  # the card's truth_values, sorted by file value

    @classmethod
    def for_model(cls, num_classes: int, details: Mapping[str, str] | None = None) -> MaskRule:
        """The rule of a model (its class count, its backend's `Capabilities.details`)."""
        declared = (details or {}).get(TRUTH_VALUES_KEY)
        return cls(num_classes, tuple(sorted(parse_truth_values(declared).items())) if declared else ())

    def describe(self) -> str:
        """The accepted values in words, for errors and documents."""
        if self.values:
            return f"the model card's truth_values ({format_truth_values(dict(self.values))})"
        if self.num_classes == 2:
            return "binary 0/255 or 0/1"
        return f"class indices 0..{self.num_classes - 1}"

    def lookup(self, counts: np.ndarray, source: str) -> np.ndarray:
        """The class of each value 0..255 (uint8, 256 entries) for a mask whose value `histogram` is `counts`; a
        mask that follows no convention for the model is refused in one line naming `source` and its values."""
        present = np.flatnonzero(counts)
        table = np.zeros(256, np.uint8)
        if self.values:
            mapping = dict(self.values)
            accepted = set(mapping)
            for value, index in mapping.items():
                table[value] = index
        elif self.num_classes == 2:
            foreground = 1 if set(present) <= {0, 1} else BINARY_FOREGROUND
            accepted = {0, foreground}
            table[foreground] = 1
        else:
            accepted = set(range(self.num_classes))
            table[: min(self.num_classes, 256)] = np.arange(min(self.num_classes, 256))
        stray = [int(v) for v in present if v not in accepted]
        if stray:
            raise SegScopeError(
                f"{source}: values {_examples([int(v) for v in present])} are not a mask convention for this "
                f"{self.num_classes}-class model ({_examples(stray)} not among {self.describe()}); "
                f"{self.advice(source)}")
        return table

    def advice(self, source: str) -> str:
        """What to do about a mask this rule refuses: save it in what this model reads (a JPEG's stray values
        are most likely its lossy compression)."""
        if self.values:
            fits = f"save the mask with the values the card declares ({format_truth_values(dict(self.values))})"
        elif self.num_classes == 2:
            fits = "save the mask as 0/255 or 0/1, or declare its values in the model card (truth_values)"
        else:
            fits = (f"save the mask as class indices 0..{self.num_classes - 1}, or declare its values in the model "
                    "card (truth_values)")
        named = source.lower().endswith((".jpg", ".jpeg"))
        if named or _holds_jpeg(source):
            kind = "a JPEG mask" if named else "a JPEG file under another name"
            return f"{kind}: its lossy compression is the likely cause of the stray values, so save it as PNG; {fits}"
        return fits

    def check(self, counts: np.ndarray, source: str) -> None:
        """Refuse (one line, `SegScopeError`) a mask whose value `histogram` is `counts` unless it follows the rule;
        what `eval` runs on every truth mask before the first image (the counts may come from any decoder)."""
        self.lookup(counts, source)

    def labels(self, mask: np.ndarray, source: str = "truth mask") -> np.ndarray:
        """The class index of every pixel of a mask (checked as `check` does; a bool mask is 0/1, other types are
        read by `to_mask` first)."""
        values = mask.view(np.uint8) if mask.dtype == bool else to_mask(mask, source)
        return cv2.LUT(values, self.lookup(histogram(values), source))

    def canonical(self, mask: np.ndarray, source: str = "truth mask") -> np.ndarray:
        """The mask checked and, with card-declared values, rewritten in SegScope's own convention (0/255 for a
        binary model, else class indices), so every scorer reads it as `mask_to_labels` does."""
        return relabelled(mask, self.canonical_table(histogram(mask), source))

    def canonical_table(self, counts: np.ndarray, source: str = "truth mask") -> np.ndarray | None:
        """What `canonical` does to each value 0..255 of a mask whose value `histogram` is `counts` (checked):
        None where the mask already is in SegScope's convention. Any region of the mask is then made canonical
        by this table alone."""
        if not self.values:
            self.check(counts, source)
            return None
        classes = self.lookup(counts, source)
        return classes * np.uint8(BINARY_FOREGROUND) if self.num_classes == 2 else classes


def _holds_jpeg(source: str) -> bool:
    """Whether `source` names a file that is a JPEG whatever its name says (a JPEG saved as `mask.png`); False
    for a source that is no readable file (a label such as "truth mask")."""
    try:
        with open(source, "rb") as file:
            return image_format(file.read(16)) == "JPEG"
    except OSError:
        return False


def relabelled(values: np.ndarray, table: np.ndarray | None) -> np.ndarray:
    """`values` mapped by a `MaskRule.canonical_table` (None: as they are)."""
    return values if table is None else cv2.LUT(values, table)


def mask_to_labels(mask: np.ndarray, num_classes: int, source: str = "truth mask") -> np.ndarray:
    """A mask's values as the class indices of a `num_classes` model by the conventions (no card values; a mask
    read through a dataset with a card's rule is already in SegScope's own convention, `MaskRule.canonical`)."""
    return MaskRule(num_classes).labels(mask, source)
