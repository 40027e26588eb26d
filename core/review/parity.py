"""The same question between two runs of one dataset (two models, or two backends of one model: ONNX on the CPU
against the `.om` on the NPU): per image, the foreground Dice between the two predictions and the defects gained,
lost or changed in class, ranked; and the gate a port passes.

The defects are `core.quality.defects`'s components of the foreground (every class >= 1) of each run, the first
run (A) standing for the truth and the second (B) for the prediction, matched one to one at `iou`: a defect of A
no defect of B matches is `lost`, one of B no defect of A matches is `gained` (a fragment included: the count
changed), and a matched defect of A whose pixels B gives mostly another class than A does is `changed`. A class is
a component's majority class (ties: the lower). The Dice is eval's foreground Dice of B against A (the mean of the
per-class Dice over the foreground classes in either; n/a, NaN, when neither has any foreground: identical).

The gate: no flip (gained, lost or changed) in any image and every image's Dice at least `min_dice` (default
0.99); n/a passes. Images rank by flips (most first), then Dice (lowest first), then dataset order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..metrics.scores import hard_metrics
from ..quality.defects import components, match_defects
from ..roi import Roi
from . import MIN_DICE
from .queue import DEFAULT_OPTIONS, Best, QueueOptions

FLIP_KINDS = ("lost", "gained", "changed")


@dataclass(frozen=True)
class Flip:
    kind: str  # lost, gained or changed
    cls: int  # the defect's class in A (lost, changed) or in B (gained)
    bbox: tuple[int, int, int, int]  # slide pixels, x1 and y1 exclusive
    area: int  # the defect's pixels in A (lost, changed) or in B (gained)
    to: int = 0  # changed: its class in B

    def record(self, class_names: Sequence[str] = ()) -> dict[str, object]:
        record: dict[str, object] = {"kind": self.kind, "class": self.cls, "class_name": _name(class_names, self.cls),
                                     "bbox": list(self.bbox), "area": self.area}
        if self.kind == "changed":
            record.update({"to_class": self.to, "to_class_name": _name(class_names, self.to)})
        return record


def _name(class_names: Sequence[str], cls: int) -> str:
    return class_names[cls] if cls < len(class_names) else str(cls)


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
        return (-len(self.flips), 1.0 if math.isnan(self.dice) else self.dice, self.order)

    def record(self, class_names: Sequence[str] = (), min_dice: float = MIN_DICE) -> dict[str, object]:
        counts = Counter(flip.kind for flip in self.flips)
        return {"image": self.image, "dice": None if math.isnan(self.dice) else self.dice,
                **{kind: counts[kind] for kind in FLIP_KINDS}, "passed": self.passed(min_dice),
                "flips": [flip.record(class_names) for flip in self.flips]}


def image_parity(image: str, order: int, a: np.ndarray, b: np.ndarray, roi: Roi, num_classes: int,
                 options: QueueOptions = DEFAULT_OPTIONS) -> ImageParity:
    """Two runs' predicted classes under one ROI (ROI-sized) compared."""
    dice = float(hard_metrics(b, a, num_classes)["foreground_dice"])  # type: ignore[arg-type]
    match = match_defects(a > 0, b > 0, options.min_area, options.iou)
    a_labels, _, a_boxes = components(a > 0, options.min_area)
    b_labels, _, b_boxes = components(b > 0, options.min_area)
    flips = []
    for defect in match.defects:
        ours, labels, boxes = (a, a_labels, a_boxes) if defect.source == "truth" else (b, b_labels, b_boxes)
        x0, y0, x1, y1 = (int(v) for v in boxes[defect.label - 1])
        inside = labels[y0:y1, x0:x1] == defect.label
        cls = _majority(ours[y0:y1, x0:x1][inside], num_classes)
        bbox = (x0 + roi.x0, y0 + roi.y0, x1 + roi.x0, y1 + roi.y0)
        if not defect.matched:
            flips.append(Flip("lost" if defect.source == "truth" else "gained", cls, bbox, defect.area))
        elif defect.source == "truth":
            theirs = b[y0:y1, x0:x1][inside]
            to = _majority(theirs[theirs > 0], num_classes)
            if to != cls:
                flips.append(Flip("changed", cls, bbox, defect.area, to))
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
