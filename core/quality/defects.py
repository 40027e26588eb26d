"""Per-defect detection: was every defect found, and how many false alarms?

Defects are the 8-connected components of a class in the truth and in the prediction, each at least
`min_area` pixels (smaller specks are left out of both). A predicted component matches a true one when their
IoU is at least 0.5, one to one (greedily by IoU, largest first; above 0.5 a component can have only one
partner anyway). Matched pairs are TP, unmatched predictions FP, unmatched truths FN;
precision = TP/(TP+FP) and recall = TP/(TP+FN), each 1.0 when its denominator is 0 (nothing predicted, nothing
to find: as the pixel precision and recall); F1 = 2TP/(2TP+FP+FN), NaN ("n/a") with no defect in either mask
(as the foreground Dice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

#: A predicted and a true component match at this IoU or above.
MATCH_IOU = 0.5


@dataclass(frozen=True)
class Defect:
    """One connected component, in the ROI's pixels."""

    source: str  # "prediction" or "truth"
    label: int  # its id in that mask's component labels (1, 2, ...)
    area: int
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive)
    iou: float  # with its match, else the best IoU with any component of the other mask (0 with none)
    matched: bool

    @property
    def outcome(self) -> str:
        """TP (matched), FP (a prediction nothing matches) or FN (a missed defect)."""
        if self.matched:
            return "TP"
        return "FP" if self.source == "prediction" else "FN"


@dataclass(frozen=True)
class DefectMatch:
    """Both masks' components and the counts that follow from their matching."""

    defects: tuple[Defect, ...]

    def _count(self, outcome: str) -> int:
        return sum(1 for d in self.defects if d.outcome == outcome and (outcome != "TP" or d.source == "truth"))

    @property
    def tp(self) -> int:
        return self._count("TP")

    @property
    def fp(self) -> int:
        return self._count("FP")

    @property
    def fn(self) -> int:
        return self._count("FN")

    def scores(self) -> dict[str, float]:
        """defect_f1, defect_precision, defect_recall and the counts defect_tp, defect_fp, defect_fn."""
        tp, fp, fn = self.tp, self.fp, self.fn
        ratios = self.ratios(tp, fp, fn)
        return {"defect_f1": ratios["f1"], "defect_precision": ratios["precision"],
                "defect_recall": ratios["recall"], "defect_tp": tp, "defect_fp": fp, "defect_fn": fn}

    @staticmethod
    def ratios(tp: int, fp: int, fn: int) -> dict[str, float]:
        """F1, precision and recall of counts, with the module's values for zero denominators."""
        return {"f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan,
                "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}


def components(mask: np.ndarray, min_area: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """8-connected components of a bool mask of at least `min_area` pixels: the label image (dropped
    components 0, the rest renumbered 1..n), their areas and their boxes (x0, y0, x1, y1) as n x 4."""
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask.view(np.uint8), connectivity=8,
                                                              ltype=cv2.CV_32S)
    kept = np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= min_area) + 1
    if kept.size < count - 1:
        renumber = np.zeros(count, np.int32)
        renumber[kept] = np.arange(1, kept.size + 1)
        labels = renumber[labels]
    x, y, w, h = (stats[kept, k] for k in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT))
    return labels, stats[kept, cv2.CC_STAT_AREA].astype(np.int64), np.stack([x, y, x + w, y + h], axis=1)


def match_defects(truth: np.ndarray, prediction: np.ndarray, min_area: int = 1) -> DefectMatch:
    """Components of two bool masks of one shape, matched one to one at IoU >= `MATCH_IOU`."""
    truth_labels, truth_areas, truth_boxes = components(truth, min_area)
    pred_labels, pred_areas, pred_boxes = components(prediction, min_area)
    both = (truth_labels > 0) & (pred_labels > 0)
    pairs, overlaps = np.unique(np.stack([pred_labels[both], truth_labels[both]]), axis=1, return_counts=True)
    pred_ids, truth_ids = pairs[0] - 1, pairs[1] - 1  # component indices
    ious = overlaps / (pred_areas[pred_ids] + truth_areas[truth_ids] - overlaps)
    best_pred, best_truth = np.zeros(len(pred_areas)), np.zeros(len(truth_areas))
    np.maximum.at(best_pred, pred_ids, ious)
    np.maximum.at(best_truth, truth_ids, ious)
    pred_match: dict[int, float] = {}
    truth_match: dict[int, float] = {}
    for k in sorted(np.flatnonzero(ious >= MATCH_IOU), key=lambda k: (-ious[k], pred_ids[k], truth_ids[k])):
        p, t = int(pred_ids[k]), int(truth_ids[k])
        if p not in pred_match and t not in truth_match:
            pred_match[p] = truth_match[t] = float(ious[k])
    defects = [_defect("truth", i, truth_areas, truth_boxes, truth_match, best_truth) for i in range(len(truth_areas))]
    defects += [_defect("prediction", i, pred_areas, pred_boxes, pred_match, best_pred) for i in range(len(pred_areas))]
    return DefectMatch(tuple(defects))


def _defect(source: str, index: int, areas: np.ndarray, boxes: np.ndarray, matches: dict[int, float],
            best: np.ndarray) -> Defect:
    box = tuple(int(v) for v in boxes[index])
    return Defect(source, index + 1, int(areas[index]), box,  # type: ignore[arg-type]
                  matches.get(index, float(best[index])), index in matches)
