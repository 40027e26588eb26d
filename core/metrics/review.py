"""Error review: where a prediction disagrees with the ground truth, and the worst images of a dataset.

The error map scores one class (`positive`, 1 by default) per ROI pixel, one-vs-rest, with the codes the
viewer's colour table uses: bit 0 = predicted, bit 1 = true, so TN 0, FP 1, FN 2, TP 3. Connected error
regions (FP and FN) are listed largest first with their boxes in slide pixels, so the GUI can zoom to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import SegScopeError
from ..palette import BLUISH_GREEN, ORANGE, SKY_BLUE
from ..result import InferenceResult
from ..roi import Roi
from .catalogue import Metric
from .scores import argmax_at_roi, mask_to_labels, truth_at_roi

TN, FP, FN, TP = 0, 1, 2, 3
ERROR_NAMES = {TN: "TN", FP: "FP", FN: "FN", TP: "TP"}
#: TP bluish green, FP orange (predicted but absent), FN sky blue (missed): safe for red-green blindness, and
#: light enough to read as legend text on the viewer's dark theme (the viewer and the report draw errors so).
ERROR_COLORS = {TP: BLUISH_GREEN, FP: ORANGE, FN: SKY_BLUE}


@dataclass(frozen=True)
class ErrorMap:
    labels: np.ndarray  # ROI-sized uint8 error code (TN/FP/FN/TP) per pixel
    roi: Roi  # where the labels sit in the slide
    positive: int  # the class scored

    def counts(self) -> dict[str, int]:
        """Pixels per kind (the area at ROI resolution), keyed by name."""
        totals = np.bincount(self.labels.ravel(), minlength=len(ERROR_NAMES))
        return {name: int(totals[kind]) for kind, name in ERROR_NAMES.items()}

    def fractions(self) -> dict[str, float]:
        """Each kind's share of the ROI's area."""
        return {name: count / self.labels.size for name, count in self.counts().items()}


@dataclass(frozen=True)
class ErrorRegion:
    kind: int  # FP or FN
    area: int  # pixels
    box: Roi  # bounding box in slide pixels
    centroid: tuple[float, float]  # (x, y) in slide pixels

    @property
    def name(self) -> str:
        return ERROR_NAMES[self.kind]


def error_codes(prediction: np.ndarray, truth: np.ndarray, positive: int = 1) -> np.ndarray:
    """Per-pixel TN/FP/FN/TP code of class `positive` from two class-index maps of one shape."""
    return (prediction == positive).view(np.uint8) | ((truth == positive).view(np.uint8) << 1)


def error_map(prediction: np.ndarray, truth: np.ndarray, roi: Roi, positive: int = 1) -> ErrorMap:
    """Score ROI-sized class-index maps (`prediction` from `argmax_at_roi`, `truth` from `mask_to_labels`)."""
    if prediction.shape != truth.shape or prediction.shape != (roi.height, roi.width):
        raise SegScopeError(f"error map: prediction {prediction.shape[::-1]}, truth {truth.shape[::-1]} and "
                            f"ROI {roi.width}x{roi.height} must have the same size")
    return ErrorMap(error_codes(prediction, truth, positive), roi, positive)


def result_error_map(result: InferenceResult, full_mask: np.ndarray, positive: int = 1,
                     source: str = "mask") -> ErrorMap:
    """The error map of a result against its full-slide ground-truth mask."""
    truth = mask_to_labels(truth_at_roi(result, full_mask, source), result.num_classes)
    return error_map(argmax_at_roi(result), truth, result.roi, positive)


def error_regions(errors: ErrorMap, min_area: int = 1) -> list[ErrorRegion]:
    """8-connected FP and FN regions of at least `min_area` pixels, largest first (ties: top-left first)."""
    regions = []
    x0, y0 = errors.roi.x0, errors.roi.y0
    for kind in (FP, FN):
        _, _, stats, centroids = cv2.connectedComponentsWithStats((errors.labels == kind).view(np.uint8),
                                                                 connectivity=8)
        for (x, y, w, h, area), (cx, cy) in zip(stats[1:], centroids[1:]):
            if area >= min_area:
                box = Roi(x0 + int(x), y0 + int(y), x0 + int(x + w), y0 + int(y + h))
                regions.append(ErrorRegion(kind, int(area), box, (x0 + float(cx), y0 + float(cy))))
    return sorted(regions, key=lambda r: (-r.area, r.box.y0, r.box.x0, r.kind))


def worst_first(values: Mapping[str, float | None], metric: Metric) -> list[str]:
    """Image ids ordered worst first by `metric`'s values (its direction); ids without a value (no mask, n/a)
    go last, ties keep the given order."""
    return sorted(values, key=lambda item_id: metric.worst_first_key(values[item_id]))


def step(order: list[str], current: str | None, offset: int) -> str | None:
    """The id `offset` places after `current` in `order` (next/previous worst), clamped at the ends."""
    if not order:
        return None
    if current not in order:
        return order[0] if offset >= 0 else order[-1]
    return order[min(max(order.index(current) + offset, 0), len(order) - 1)]
