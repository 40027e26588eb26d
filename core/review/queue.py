"""The disagreement queue: one entry per place where a prediction and the truth disagree, per class, ranked.

Per image and foreground class, the defects are `core.quality.defects`'s (8-connected components of at least
`min_area` pixels of the class, in the truth and in the prediction, at ROI resolution, the mask's own scale, as
eval scores them) with its outcomes (matched, missed, false alarm, fragment, merged). Components that overlap are
one entry's (a group, linked through any shared pixel); the entry's kind follows from its components' outcomes:
- `merged`: a missed true defect lies mostly inside a prediction that holds another (two defects seen as one);
- `split`: a prediction is a fragment of a true defect (one defect seen in pieces);
- `shifted`: a missed true defect and an unmatched prediction overlap (the outline is off by too much to match);
- `missed`: true defects no prediction matches, alone (a miss, or a spurious annotation);
- `false_alarm`: a prediction alone (a false alarm, or a missing annotation);
- `boundary`: matched defects whose outlines differ by at least `min_boundary_area` pixels.
An entry's `area` is its disagreement: the pixels where the group's true and predicted components differ.
Its `confidence` is the mean, over those pixels, of the model's margin for its own decision against the truth:
p(predicted class) - p(true class) of the probabilities resized to the ROI (linear, as the decision itself is
made); with two classes and a threshold t (a 1-channel output), |p1 - t| over its widest possible value (1 - t
above the cut, t below it). Its `score` = confidence x area / (area + AREA_HALF): a confident model against the
truth (a likely label error) and a large disagreement (a costly miss) come first. Best first: score, then area,
then dataset order, class and box. Boxes are [x0, y0, x1, y1) in slide pixels (the ROI's offset added).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import cv2
import numpy as np

from ..metrics.scores import argmax_at_roi
from ..quality.defects import MATCH_IOU, components, match_defects
from ..result import InferenceResult, decision_map
from ..roi import Roi
from ..wording import class_name
from . import AREA_HALF, DEFAULT_LIMIT, MIN_BOUNDARY_AREA

T = TypeVar("T")
KINDS = ("merged", "split", "shifted", "missed", "false_alarm", "boundary")
#: The margins at the pixels `where` of an ROI box (`_Margins.at`).
MarginReader = Callable[[tuple[slice, slice], np.ndarray], np.ndarray]


@dataclass(frozen=True)
class QueueOptions:
    min_area: int = 1  # components smaller than this are no defect (eval's --min-defect-area)
    iou: float = MATCH_IOU  # a true and a predicted defect match at this IoU (eval's --defect-iou)
    min_boundary_area: int = MIN_BOUNDARY_AREA


DEFAULT_OPTIONS = QueueOptions()


@dataclass(frozen=True)
class ReviewEntry:
    """One disagreement: where (image, box in slide pixels), what (kind, class) and how much (area, confidence).
    The seeds are one slide pixel of each component involved, so a decision finds them again."""

    image: str
    order: int  # the image's place in the dataset
    kind: str
    cls: int
    bbox: tuple[int, int, int, int]
    area: int
    confidence: float
    truth_seeds: tuple[tuple[int, int], ...] = ()
    prediction_seeds: tuple[tuple[int, int], ...] = ()

    @property
    def score(self) -> float:
        return self.confidence * self.area / (self.area + AREA_HALF)

    @property
    def key(self) -> str:
        """The entry's id in a review log: image, class, kind and box."""
        return f"{self.image}/{self.cls}/{self.kind}/{','.join(map(str, self.bbox))}"

    def rank(self) -> tuple:
        """Sorts best first."""
        return (-self.score, -self.area, self.order, self.cls, self.bbox, self.kind)

    def record(self, class_names: Sequence[str] = ()) -> dict[str, object]:
        """The entry as `segscope review --json` prints it."""
        return {"image": self.image, "kind": self.kind, "class": self.cls,
                "class_name": class_name(class_names, self.cls),
                "bbox": list(self.bbox), "area": self.area, "score": self.score, "confidence": self.confidence,
                "truth_components": len(self.truth_seeds), "prediction_components": len(self.prediction_seeds),
                "id": self.key}


class _Margins:
    """The model's margin for its decision against the truth, per ROI pixel, resized once when first asked."""

    def __init__(self, result: InferenceResult, prediction: np.ndarray, truth: np.ndarray):
        self.result, self.prediction, self.truth = result, prediction, truth
        self._map: np.ndarray | None = None

    def _resized(self, values: np.ndarray) -> np.ndarray:
        height, width = self.prediction.shape
        if values.shape[:2] == (height, width):
            return values.astype(np.float32, copy=False)
        return cv2.resize(np.ascontiguousarray(values, np.float32), (width, height), interpolation=cv2.INTER_LINEAR)

    def at(self, box: tuple[slice, slice], where: np.ndarray) -> np.ndarray:
        """The margins at the pixels `where` of the ROI's `box`."""
        if self._map is None:
            self._map = self._compute()
        if self._map.ndim == 2:
            return self._map[box][where]
        probabilities = self._map[box][where]
        index = np.arange(len(probabilities))
        return probabilities[index, self.prediction[box][where]] - probabilities[index, self.truth[box][where]]

    def _compute(self) -> np.ndarray:
        two = decision_map(self.result.probabilities, self.result.threshold)
        if two is None:  # the probabilities themselves, the margin read per pixel
            return self._resized(self.result.probabilities)
        scores, cut = two
        scores = self._resized(scores)
        low = 0.0 if self.result.threshold is not None else -1.0  # p1 in [0, 1]; p1 - p0 in [-1, 1]
        return np.abs(scores - cut) / np.where(scores > cut, 1.0 - cut, cut - low)


def result_entries(image: str, order: int, result: InferenceResult, truth: np.ndarray,
                   options: QueueOptions = DEFAULT_OPTIONS) -> list[ReviewEntry]:
    """The entries of one image's result against its true classes under the ROI (ROI-sized)."""
    prediction = argmax_at_roi(result)
    margins = _Margins(result, prediction, truth)
    return [entry for cls in range(1, result.num_classes)
            for entry in class_entries(image, order, cls, prediction, truth, result.roi, margins.at, options)]


def class_entries(image: str, order: int, cls: int, prediction: np.ndarray, truth: np.ndarray, roi: Roi,
                  margins: MarginReader, options: QueueOptions = DEFAULT_OPTIONS) -> list[ReviewEntry]:
    """The entries of class `cls` in ROI-sized predicted and true classes."""
    true_mask, predicted = truth == cls, prediction == cls
    if not (true_mask.any() or predicted.any()):
        return []
    match = match_defects(true_mask, predicted, options.min_area, options.iou)
    outcomes = {(d.source, d.label): d.outcome for d in match.defects}
    truth_labels, _, truth_boxes = components(true_mask, options.min_area)
    pred_labels, _, pred_boxes = components(predicted, options.min_area)
    entries = []
    for truths, preds in overlap_groups(truth_labels, len(truth_boxes), pred_labels, len(pred_boxes)):
        kind = _kind([outcomes["truth", t] for t in truths], [outcomes["prediction", p] for p in preds])
        boxes = [truth_boxes[t - 1] for t in truths] + [pred_boxes[p - 1] for p in preds]
        x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
        x1, y1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
        box = (slice(int(y0), int(y1)), slice(int(x0), int(x1)))
        differ = np.isin(truth_labels[box], truths) != np.isin(pred_labels[box], preds)
        area = int(differ.sum())
        if area == 0 or (kind == "boundary" and area < options.min_boundary_area):
            continue
        confidence = float(np.mean(margins(box, differ), dtype=np.float64))
        entries.append(ReviewEntry(
            image, order, kind, cls, (int(x0) + roi.x0, int(y0) + roi.y0, int(x1) + roi.x0, int(y1) + roi.y0), area,
            max(confidence, 0.0), tuple(_seed(truth_labels, truth_boxes, t, roi) for t in truths),
            tuple(_seed(pred_labels, pred_boxes, p, roi) for p in preds)))
    return entries


def overlap_groups(truth_labels: np.ndarray, truths: int, pred_labels: np.ndarray,
            preds: int) -> list[tuple[list[int], list[int]]]:
    """The components (labels 1..n) of two label images linked through shared pixels: per group, its labels in the
    first (`truth_labels`, of `truths` components) and in the second."""
    parent = list(range(truths + preds))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    both = (truth_labels > 0) & (pred_labels > 0)
    for t, p in np.unique(np.stack([truth_labels[both], pred_labels[both]]), axis=1).T:
        parent[root(truths + int(p) - 1)] = root(int(t) - 1)
    members: dict[int, tuple[list[int], list[int]]] = {}
    for node in range(truths + preds):
        group = members.setdefault(root(node), ([], []))
        if node < truths:
            group[0].append(node + 1)
        else:
            group[1].append(node - truths + 1)
    return list(members.values())


def _kind(truth_outcomes: list[str], pred_outcomes: list[str]) -> str:
    if "merged" in truth_outcomes:
        return "merged"
    if "split" in pred_outcomes:
        return "split"
    missed, alarm = "FN" in truth_outcomes, "FP" in pred_outcomes
    if missed and alarm:
        return "shifted"
    return "missed" if missed else "false_alarm" if alarm else "boundary"


def _seed(labels: np.ndarray, boxes: np.ndarray, label: int, roi: Roi) -> tuple[int, int]:
    """A slide pixel (x, y) of component `label`: its first in raster order."""
    x0, y0, x1, y1 = (int(v) for v in boxes[label - 1])
    y, x = np.unravel_index(int(np.argmax(labels[y0:y1, x0:x1] == label)), (y1 - y0, x1 - x0))
    return x0 + int(x) + roi.x0, y0 + int(y) + roi.y0


class _Reversed:
    """A heap key that sorts the other way: the worst of the best kept is on the heap's top."""

    __slots__ = ("key",)

    def __init__(self, key: tuple):
        self.key = key

    def __lt__(self, other: _Reversed) -> bool:
        return other.key < self.key


class Best(Generic[T]):
    """The `limit` best of the items offered (None: all) by `key`, smaller first (ties: the first offered)."""

    def __init__(self, key: Callable[[T], tuple], limit: int | None):
        self.key, self.limit = key, limit
        self._heap: list[tuple[_Reversed, T]] = []
        self._sequence = itertools.count()

    def offer(self, item: T) -> None:
        pair = (_Reversed((*self.key(item), next(self._sequence))), item)
        if self.limit is None or len(self._heap) < self.limit:
            heapq.heappush(self._heap, pair)
        elif self.limit and pair[0].key < self._heap[0][0].key:
            heapq.heapreplace(self._heap, pair)

    def items(self) -> list[T]:
        """Those kept, best first."""
        return [item for _, item in sorted(self._heap, key=lambda pair: pair[0].key)]


class ReviewQueue:
    """The best `limit` entries of a dataset (None: all), offered image by image; every entry counted by kind and
    class. Memory stays flat however many images pass: a heap of `limit` small entries."""

    def __init__(self, limit: int | None = DEFAULT_LIMIT):
        self._best: Best[ReviewEntry] = Best(ReviewEntry.rank, limit)
        self.counts: Counter[tuple[str, int]] = Counter()  # entries offered, by (kind, class)
        self.images = 0  # images offered (with a truth)

    def add(self, entries: Iterable[ReviewEntry]) -> None:
        """One image's entries."""
        self.images += 1
        for entry in entries:
            self.counts[entry.kind, entry.cls] += 1
            self._best.offer(entry)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def entries(self) -> list[ReviewEntry]:
        """Those kept, best first."""
        return self._best.items()
