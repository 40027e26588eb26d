"""Per-defect detection: was every defect found, how many false alarms, and how many were cut in pieces or merged?

Defects are the 8-connected components of a class in the truth and in the prediction, each at least `min_area`
pixels (smaller specks are left out of both). A predicted component matches a true one when their IoU is at least
the threshold (`--defect-iou`, default 0.5), one to one, greedily by IoU, largest first (ties: lower component
numbers first). Then:
- TP: a matched true defect; FN: an unmatched true defect; FP: an unmatched predicted defect, except
- a fragment (`split`): an unmatched predicted defect lying mostly (at least `MOSTLY` = 50 % of its area) inside
  one true defect that is predicted in pieces (at least one other predicted defect matches it or lies mostly
  inside it) is a piece of it, counted as a fragment, not as a false alarm (a crack predicted in pieces). A lone
  undersized detection inside a true defect is no fragment: it is what plain matching makes it, a false alarm
  beside a miss (as COCO and Metrics Reloaded count a detection under the IoU threshold);
- a merged defect (`merged`): an unmatched true defect lying mostly (at least 50 %) inside one predicted defect
  that also holds another true defect mostly (two defects predicted as one) is counted as merged; it stays a miss
  (FN), since no prediction outlines it on its own: `merged` says how many of the misses are merges rather than
  unseen defects. The predicted defect holding them (the merge's host) is never also a fragment.
precision = TP/(TP+FP), recall = TP/(TP+FN), F1 = 2TP/(2TP+FP+FN), each NaN ("n/a", counted apart in the
aggregates, as an absent class's Dice) where its denominator is 0: precision with no predicted defect, recall
with no true defect (Metrics Reloaded: recall is undefined for an empty reference), all three with no defect in
either mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

#: The default IoU at which a predicted and a true component match.
MATCH_IOU = 0.5
#: "Mostly inside": at least this share of a component's area lies inside one component of the other mask.
MOSTLY = 0.5


@dataclass(frozen=True)
class Defect:
    """One connected component, in the ROI's pixels."""

    source: str  # "prediction" or "truth"
    label: int  # its id in that mask's component labels (1, 2, ...)
    area: int
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive)
    iou: float  # with its match, else the best IoU with any component of the other mask (0 with none)
    matched: bool
    #: A prediction: the largest share of its area inside one true defect; a true defect: the share of its area
    #: inside the predicted defect holding most of it, when that one mostly holds another true defect too (else 0).
    inside: float = 0.0
    #: A prediction only: one of several predicted pieces of a true defect (see the module's `split`).
    piece: bool = False

    @property
    def outcome(self) -> str:
        """TP (matched), "split" (a fragment of a true defect), FP (any other unmatched prediction), "merged" (a
        missed true defect lying mostly inside one prediction) or FN (any other missed defect)."""
        if self.matched:
            return "TP"
        if self.source == "prediction":
            return "split" if self.piece else "FP"
        return "merged" if self.inside >= MOSTLY else "FN"


def _counted(*outcomes: str) -> property:
    """A `DefectMatch` count: its components whose outcome is one of `outcomes` (a TP pair once, by its truth
    side)."""
    def count(match: DefectMatch) -> int:
        return sum(1 for d in match.defects if d.outcome in outcomes and (d.outcome != "TP" or d.source == "truth"))

    return property(count)


@dataclass(frozen=True)
class DefectMatch:
    """Both masks' components and the counts that follow from their matching; with the label images they were
    numbered in (0: no component) and the (true, predicted) label pairs that share a pixel, so a caller grouping
    them (`core.review.queue`) labels nothing again."""

    defects: tuple[Defect, ...]
    truth_labels: np.ndarray | None = field(default=None, repr=False, compare=False)
    pred_labels: np.ndarray | None = field(default=None, repr=False, compare=False)
    pairs: tuple[tuple[int, int], ...] = field(default=(), repr=False, compare=False)

    # Each count, by the outcomes it counts (a merged truth defect is also missed as itself).
    tp = _counted("TP")
    fp = _counted("FP")
    fn = _counted("FN", "merged")
    split = _counted("split")
    merged = _counted("merged")

    def scores(self) -> dict[str, float]:
        """defect_f1, defect_precision, defect_recall and the counts defect_tp, defect_fp, defect_fn,
        defect_split, defect_merged."""
        ratios = self.ratios(self.tp, self.fp, self.fn, bool(self.defects))
        return {"defect_f1": ratios["f1"], "defect_precision": ratios["precision"],
                "defect_recall": ratios["recall"], "defect_tp": self.tp, "defect_fp": self.fp, "defect_fn": self.fn,
                "defect_split": self.split, "defect_merged": self.merged}

    @staticmethod
    def ratios(tp: int, fp: int, fn: int, any_defect: bool = True) -> dict[str, float]:
        """F1, precision and recall of counts, with the module's values for zero denominators (`any_defect`:
        whether either mask has a defect, counted or not)."""
        if not any_defect:
            return {"f1": math.nan, "precision": math.nan, "recall": math.nan}
        return {"f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan,
                "precision": tp / (tp + fp) if tp + fp else math.nan, "recall": tp / (tp + fn) if tp + fn else math.nan}


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


def overlapping(first: np.ndarray, second: np.ndarray, seconds: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (first, second) label pairs of two aligned label lists (labels of `second` at most `seconds`),
    sorted by first then second, as a 2 x n array, and how often each occurs: one 1-D sort of one int64 code per
    pixel (a sort of the pairs as columns takes ten times longer)."""
    codes, counts = np.unique(first.astype(np.int64) * (seconds + 1) + second, return_counts=True)
    return np.stack([codes // (seconds + 1), codes % (seconds + 1)]), counts


def match_defects(truth: np.ndarray, prediction: np.ndarray, min_area: int = 1,
                  threshold: float = MATCH_IOU) -> DefectMatch:
    """Components of two bool masks of one shape, matched one to one at IoU >= `threshold`."""
    truth_labels, truth_areas, truth_boxes = components(truth, min_area)
    pred_labels, pred_areas, pred_boxes = components(prediction, min_area)
    both = (truth_labels > 0) & (pred_labels > 0)
    pairs, overlaps = overlapping(pred_labels[both], truth_labels[both], len(truth_areas))
    pred_ids, truth_ids = pairs[0] - 1, pairs[1] - 1  # component indices
    ious = overlaps / (pred_areas[pred_ids] + truth_areas[truth_ids] - overlaps)
    best_pred, best_truth = np.zeros(len(pred_areas)), np.zeros(len(truth_areas))
    np.maximum.at(best_pred, pred_ids, ious)
    np.maximum.at(best_truth, truth_ids, ious)
    pred_shares = overlaps / pred_areas[pred_ids]
    inside_pred, home = np.zeros(len(pred_areas)), np.full(len(pred_areas), -1)  # the true defect it lies most in
    for p, t, share in zip(pred_ids, truth_ids, pred_shares):
        if share > inside_pred[p]:
            inside_pred[p], home[p] = share, t
    inside_truth, hosts = _merged_shares(pred_ids, truth_ids, overlaps / truth_areas[truth_ids], len(truth_areas))
    pred_match: dict[int, int] = {}  # prediction -> its true defect
    truth_match: dict[int, float] = {}
    for k in sorted(np.flatnonzero(ious >= threshold), key=lambda k: (-ious[k], pred_ids[k], truth_ids[k])):
        p, t = int(pred_ids[k]), int(truth_ids[k])
        if p not in pred_match and t not in truth_match:
            pred_match[p], truth_match[t] = t, float(ious[k])
    # A true defect's predicted pieces: its match, and the predictions lying mostly inside it (no merge's host).
    piece_of = {p: pred_match.get(p, int(home[p])) for p in range(len(pred_areas))
                if p in pred_match or (inside_pred[p] >= MOSTLY and p not in hosts)}
    pieces = np.bincount(list(piece_of.values()), minlength=len(truth_areas)) if piece_of else np.zeros(0, int)
    defects = [_defect("truth", i, truth_areas, truth_boxes, truth_match.get(i), best_truth, inside_truth)
               for i in range(len(truth_areas))]
    defects += [_defect("prediction", i, pred_areas, pred_boxes,
                        truth_match[pred_match[i]] if i in pred_match else None, best_pred, inside_pred,
                        piece=i not in pred_match and i in piece_of and pieces[piece_of[i]] >= 2)
                for i in range(len(pred_areas))]
    return DefectMatch(tuple(defects), truth_labels, pred_labels,
                       tuple(zip((truth_ids + 1).tolist(), (pred_ids + 1).tolist())))


def _merged_shares(pred_ids: np.ndarray, truth_ids: np.ndarray, shares: np.ndarray,
                   count: int) -> tuple[np.ndarray, set[int]]:
    """Per true defect, the share of it inside the predicted defect holding most of it, where that predicted defect
    holds at least two true defects mostly (a merge), 0 elsewhere; and those predicted defects (the merges' hosts)."""
    host, share = np.full(count, -1), np.zeros(count)
    for p, t, fraction in zip(pred_ids, truth_ids, shares):
        if fraction > share[t]:
            host[t], share[t] = p, fraction
    mostly = share >= MOSTLY
    held = np.bincount(host[mostly], minlength=int(host.max(initial=0)) + 1)  # true defects a prediction mostly holds
    merged = mostly & (held[np.maximum(host, 0)] >= 2)
    return np.where(merged, share, 0.0), {int(p) for p in host[merged]}


def _defect(source: str, index: int, areas: np.ndarray, boxes: np.ndarray, match_iou: float | None,
            best: np.ndarray, inside: np.ndarray, piece: bool = False) -> Defect:
    box = tuple(int(v) for v in boxes[index])
    return Defect(source, index + 1, int(areas[index]), box,  # type: ignore[arg-type]
                  float(best[index]) if match_iou is None else match_iou, match_iou is not None,
                  float(inside[index]), piece)
