"""The same question between two runs of one dataset (two models, or two backends of one model: ONNX on the CPU
against the `.om` on the NPU): per image, the foreground Dice between the two predictions and the defects gained,
lost or changed in class, ranked; and the gate a port passes.

The defects are `core.quality.defects`'s components of the foreground (every class >= 1) of each run, at least
`min_area` pixels, linked into one place where they share a pixel (as the review queue groups them): a place only
the first run (A) has a defect in is `lost`, one only the second (B) has is `gained`, and one both have where B's
majority class is not A's is `changed`. A place both have, however differently outlined (a defect in two pieces in
one run and one in the other), is no flip: its outline counts in the Dice, eval's foreground Dice of B against A
(the mean of the per-class Dice over the foreground classes in either; n/a, NaN, when neither has any foreground:
identical). A class is the majority class of a place's pixels (ties: the lower).

The gate: no flip (gained, lost or changed) in any image and every image's Dice at least `min_dice` (default
0.99); n/a passes. Images rank by the pixels of their flipped defects (most first: a lost defect of 500 px
before a speck of 1 px), then by their number, then Dice (lowest first), then dataset order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..metrics.scores import hard_metrics
from ..quality.defects import components
from ..roi import Roi
from ..wording import class_name
from . import MIN_DICE
from .queue import DEFAULT_OPTIONS, Best, QueueOptions, label_pairs, overlap_groups

FLIP_KINDS = ("lost", "gained", "changed")


@dataclass(frozen=True)
class Flip:
    kind: str  # lost, gained or changed
    cls: int  # the defect's class in A (lost, changed) or in B (gained)
    bbox: tuple[int, int, int, int]  # slide pixels, x1 and y1 exclusive
    area: int  # the defect's pixels in A (lost, changed) or in B (gained)
    to: int = 0  # changed: its class in B

    def record(self, class_names: Sequence[str] = ()) -> dict[str, object]:
        record: dict[str, object] = {"kind": self.kind, "class": self.cls,
                                     "class_name": class_name(class_names, self.cls),
                                     "bbox": list(self.bbox), "area": self.area}
        if self.kind == "changed":
            record.update({"to_class": self.to, "to_class_name": class_name(class_names, self.to)})
        return record


@dataclass(frozen=True)
class ImageParity:
    image: str
    order: int  # the image's place in the dataset
    dice: float  # NaN: neither run has any foreground
    flips: tuple[Flip, ...]

    def passed(self, min_dice: float = MIN_DICE) -> bool:
        return not self.flips and (math.isnan(self.dice) or self.dice >= min_dice)

    def rank(self) -> tuple:
        """Sorts the most different first."""
        return (-sum(flip.area for flip in self.flips), -len(self.flips), 1.0 if math.isnan(self.dice) else self.dice,
                self.order)

    def record(self, class_names: Sequence[str] = (), min_dice: float = MIN_DICE) -> dict[str, object]:
        counts = Counter(flip.kind for flip in self.flips)
        return {"image": self.image, "dice": None if math.isnan(self.dice) else self.dice,
                **{kind: counts[kind] for kind in FLIP_KINDS}, "passed": self.passed(min_dice),
                "flips": [flip.record(class_names) for flip in self.flips]}


def image_parity(image: str, order: int, a: np.ndarray, b: np.ndarray, roi: Roi, num_classes: int,
                 options: QueueOptions = DEFAULT_OPTIONS) -> ImageParity:
    """Two runs' predicted classes under one ROI (ROI-sized) compared."""
    dice = float(hard_metrics(b, a, num_classes)["foreground_dice"])  # type: ignore[arg-type]
    a_labels, _, a_boxes = components(a > 0, options.min_area)
    b_labels, _, b_boxes = components(b > 0, options.min_area)
    flips = []
    for ours, theirs in overlap_groups(len(a_boxes), len(b_boxes), label_pairs(a_labels, b_labels)):
        boxes = [a_boxes[n - 1] for n in ours] + [b_boxes[n - 1] for n in theirs]
        x0, y0 = (int(min(box[k] for box in boxes)) for k in (0, 1))
        x1, y1 = (int(max(box[k] for box in boxes)) for k in (2, 3))
        window = (slice(y0, y1), slice(x0, x1))
        in_a, in_b = np.isin(a_labels[window], ours), np.isin(b_labels[window], theirs)
        bbox = (x0 + roi.x0, y0 + roi.y0, x1 + roi.x0, y1 + roi.y0)
        if not theirs:
            flips.append(Flip("lost", _majority(a[window][in_a], num_classes), bbox, int(in_a.sum())))
        elif not ours:
            flips.append(Flip("gained", _majority(b[window][in_b], num_classes), bbox, int(in_b.sum())))
        else:
            was, now = _majority(a[window][in_a], num_classes), _majority(b[window][in_b], num_classes)
            if was != now:
                flips.append(Flip("changed", was, bbox, int(in_a.sum()), now))
    return ImageParity(image, order, dice, tuple(flips))


def _majority(classes: np.ndarray, num_classes: int) -> int:
    return int(np.bincount(classes.ravel(), minlength=num_classes).argmax())


class ParityRun:
    """Two runs compared image by image: the `limit` most different images kept (None: all), the gate's tallies
    over every image."""

    def __init__(self, min_dice: float = MIN_DICE, limit: int | None = None):
        self.min_dice = min_dice
        self._best: Best[ImageParity] = Best(ImageParity.rank, limit)
        self.images = 0
        self.failed = 0  # images that fail the gate
        self.flips: Counter[str] = Counter()
        self.lowest_dice = math.nan  # over the images with a Dice

    def add(self, parity: ImageParity) -> None:
        self.images += 1
        self.failed += not parity.passed(self.min_dice)
        self.flips.update(flip.kind for flip in parity.flips)
        if not math.isnan(parity.dice) and not parity.dice >= self.lowest_dice:
            self.lowest_dice = parity.dice
        self._best.offer(parity)

    @property
    def passed(self) -> bool:
        return not self.failed

    def ranked(self) -> list[ImageParity]:
        return self._best.items()

    def gate(self) -> dict[str, object]:
        """The gate and how the runs fared."""
        return {"rule": f"no defect gained, lost or changed in class, and foreground Dice >= {self.min_dice:g} in "
                        "every image (n/a: neither run has any foreground, passes)",
                "min_dice": self.min_dice, "passed": self.passed, "images": self.images,
                "failed_images": self.failed, **{kind: self.flips[kind] for kind in FLIP_KINDS},
                "lowest_dice": None if math.isnan(self.lowest_dice) else self.lowest_dice}
