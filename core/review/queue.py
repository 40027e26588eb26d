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
- `boundary`: matched defects whose outlines differ by at least `min_boundary_area` pixels;
- `wrong_class`: a `missed` defect of one class and a `false_alarm` of another that share pixels (a defect seen
  as another class) are one entry, its class the true one and `to` the predicted one: one decision settles both.
An entry's `area` is its disagreement: the pixels where the group's true and predicted components differ (of a
wrong class: the pixels of either component). The components are those `match_defects` labelled (never labelled
again).
Its `confidence` is the mean, over those pixels, of the model's margin for its own decision against the truth:
p(predicted class) - p(true class) of the probabilities resized to the ROI (linear, as the decision itself is
made, sampled inside the entry's box only: `_Margins`); with two classes and a threshold t (a 1-channel output),
|p1 - t| over its widest possible value (1 - t above the cut, t below it). Its `score` = confidence x area /
(area + AREA_HALF): a confident model against the truth (a likely label error) and a large disagreement (a costly
miss) come first. Best first: score, then area,
then dataset order, class and box. Boxes are [x0, y0, x1, y1) in slide pixels (the ROI's offset added).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from ..metrics.scores import argmax_at_roi
from ..quality.defects import MATCH_IOU, match_defects, overlapping
from ..result import InferenceResult, decision_map
from ..roi import Roi
from ..wording import class_name
from . import AREA_HALF, DEFAULT_LIMIT, MIN_BOUNDARY_AREA

T = TypeVar("T")
KINDS = ("merged", "split", "shifted", "missed", "false_alarm", "boundary", "wrong_class")
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
    to: int = 0  # a wrong class: the class predicted (`cls` is the true one)

    @property
    def predicted_cls(self) -> int:
        """The class of the entry's predicted components."""
        return self.to if self.kind == "wrong_class" else self.cls

    def what(self, class_names: Sequence[str] = ()) -> str:
        """Its class as a line says it: "crack", or "crack → pore" for a wrong class."""
        named = class_name(class_names, self.cls)
        return f"{named} → {class_name(class_names, self.to)}" if self.kind == "wrong_class" else named

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
        record: dict[str, object] = {
            "image": self.image, "kind": self.kind, "class": self.cls, "class_name": class_name(class_names, self.cls),
            "bbox": list(self.bbox), "area": self.area, "score": self.score, "confidence": self.confidence,
            "truth_components": len(self.truth_seeds), "prediction_components": len(self.prediction_seeds),
            "id": self.key}
        if self.kind == "wrong_class":
            record.update({"to_class": self.to, "to_class_name": class_name(class_names, self.to)})
        return record


def _linear_axis(dst: int, src: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where `cv2.resize` (INTER_LINEAR, float images) samples destination pixels start..stop-1 of an axis of `dst`
    pixels from one of `src`: each one's source pixel, the next one and the next one's weight."""
    scale = src / dst
    at = ((np.arange(start, stop, dtype=np.float64) + 0.5) * scale - 0.5).astype(np.float32)
    first = np.floor(at).astype(np.int64)
    weight = at - first
    clamped = (first < 0) | (first >= src - 1)
    first = np.clip(first, 0, src - 1)
    weight[clamped] = 0.0
    return first, np.minimum(first + 1, src - 1), weight


def resized_window(values: np.ndarray, size: tuple[int, int], box: tuple[slice, slice]) -> np.ndarray:
    """`cv2.resize(values, size)` (linear; `size` (width, height)) inside `box` only, in O(the box): the same
    samples, made without resizing the whole map."""
    width, height = size
    if values.shape[:2] == (height, width):
        return values[box].astype(np.float32, copy=False)
    ys, xs = box
    y0, y1, _ = ys.indices(height)
    x0, x1, _ = xs.indices(width)
    rows, rows_next, wy = _linear_axis(height, values.shape[0], y0, y1)
    cols, cols_next, wx = _linear_axis(width, values.shape[1], x0, x1)
    if values.ndim == 3:
        wx, wy = wx[:, None], wy[:, None]
    values = values.astype(np.float32, copy=False)

    def across(part: np.ndarray) -> np.ndarray:  # (cv2: along x first, then y)
        return part[:, cols] * (1 - wx) + part[:, cols_next] * wx
    top, bottom = across(values[rows]), across(values[rows_next])
    return top * (1 - wy[:, None]) + bottom * wy[:, None]


class _Margins:
    """The model's margin for its decision against the truth at ROI pixels, read per box (`at`)."""

    def __init__(self, result: InferenceResult, prediction: np.ndarray, truth: np.ndarray):
        self.prediction, self.truth = prediction, truth
        self.size = prediction.shape[::-1]
        self.two = decision_map(result.probabilities, result.threshold)
        self.probabilities = result.probabilities
        self.low = 0.0 if result.threshold is not None else -1.0  # p1 in [0, 1]; p1 - p0 in [-1, 1]

    def at(self, box: tuple[slice, slice], where: np.ndarray) -> np.ndarray:
        """The margins at the pixels `where` of the ROI's `box`."""
        if self.two is None:  # the probabilities themselves, the margin read per pixel
            probabilities = resized_window(self.probabilities, self.size, box)[where]
            index = np.arange(len(probabilities))
            return probabilities[index, self.prediction[box][where]] - probabilities[index, self.truth[box][where]]
        scores, cut = self.two
        scores = resized_window(scores, self.size, box)[where]
        return np.abs(scores - cut) / np.where(scores > cut, 1.0 - cut, cut - self.low)


@dataclass(frozen=True)
class _Group:
    """Components of one class linked through shared pixels: their labels in the class's label images."""

    cls: int
    kind: str
    truth_labels: np.ndarray
    pred_labels: np.ndarray
    truths: tuple[int, ...]
    preds: tuple[int, ...]
    box: tuple[int, int, int, int]  # ROI pixels, x1 and y1 exclusive
    truth_boxes: np.ndarray
    pred_boxes: np.ndarray

    def masks(self, box: tuple[slice, slice]) -> tuple[np.ndarray, np.ndarray]:
        """Its true and predicted pixels inside `box`."""
        return np.isin(self.truth_labels[box], self.truths), np.isin(self.pred_labels[box], self.preds)

    def truth_seeds(self, roi: Roi) -> tuple[tuple[int, int], ...]:
        return tuple(_seed(self.truth_labels, self.truth_boxes, t, roi) for t in self.truths)

    def prediction_seeds(self, roi: Roi) -> tuple[tuple[int, int], ...]:
        return tuple(_seed(self.pred_labels, self.pred_boxes, p, roi) for p in self.preds)


def result_entries(image: str, order: int, result: InferenceResult, truth: np.ndarray,
                   options: QueueOptions = DEFAULT_OPTIONS) -> list[ReviewEntry]:
    """The entries of one image's result against its true classes under the ROI (ROI-sized)."""
    prediction = argmax_at_roi(result)
    margins = _Margins(result, prediction, truth).at
    groups = [group for cls in range(1, result.num_classes) for group in class_groups(cls, prediction, truth, options)]
    pairs = _wrong_classes(groups)
    paired = {id(group) for pair in pairs for group in pair}
    entries = []
    for group in groups:
        if id(group) in paired:
            continue
        entry = _group_entry(image, order, group, result.roi, margins, options)
        if entry is not None:
            entries.append(entry)
    return entries + [_wrong_class_entry(image, order, missed, alarm, result.roi, margins) for missed, alarm in pairs]


def class_groups(cls: int, prediction: np.ndarray, truth: np.ndarray,
                 options: QueueOptions = DEFAULT_OPTIONS) -> list[_Group]:
    """The groups of class `cls` in ROI-sized predicted and true classes, each with its kind, from the components
    and overlaps `match_defects` found."""
    true_mask, predicted = truth == cls, prediction == cls
    if not (true_mask.any() or predicted.any()):
        return []
    match = match_defects(true_mask, predicted, options.min_area, options.iou)
    assert match.truth_labels is not None and match.pred_labels is not None
    outcomes = {(d.source, d.label): d.outcome for d in match.defects}
    boxes = {(d.source, d.label): d.box for d in match.defects}
    truth_boxes = np.array([d.box for d in match.defects if d.source == "truth"], np.int64).reshape(-1, 4)
    pred_boxes = np.array([d.box for d in match.defects if d.source == "prediction"], np.int64).reshape(-1, 4)
    groups = []
    for truths, preds in overlap_groups(len(truth_boxes), len(pred_boxes), match.pairs):
        members = [boxes["truth", t] for t in truths] + [boxes["prediction", p] for p in preds]
        box = (min(b[0] for b in members), min(b[1] for b in members), max(b[2] for b in members),
               max(b[3] for b in members))
        groups.append(_Group(cls, _kind([outcomes["truth", t] for t in truths],
                                        [outcomes["prediction", p] for p in preds]),
                             match.truth_labels, match.pred_labels, tuple(truths), tuple(preds), box, truth_boxes,
                             pred_boxes))
    return groups


def _slices(box: tuple[int, int, int, int]) -> tuple[slice, slice]:
    return slice(box[1], box[3]), slice(box[0], box[2])


def _slide_box(box: tuple[int, int, int, int], roi: Roi) -> tuple[int, int, int, int]:
    return box[0] + roi.x0, box[1] + roi.y0, box[2] + roi.x0, box[3] + roi.y0


def _group_entry(image: str, order: int, group: _Group, roi: Roi, margins: MarginReader,
                 options: QueueOptions) -> ReviewEntry | None:
    box = _slices(group.box)
    in_truth, in_pred = group.masks(box)
    differ = in_truth != in_pred
    area = int(differ.sum())
    if area == 0 or (group.kind == "boundary" and area < options.min_boundary_area):
        return None
    confidence = float(np.mean(margins(box, differ), dtype=np.float64))
    return ReviewEntry(image, order, group.kind, group.cls, _slide_box(group.box, roi), area, max(confidence, 0.0),
                       group.truth_seeds(roi), group.prediction_seeds(roi))


def _union(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])


def _wrong_classes(groups: list[_Group]) -> list[tuple[_Group, _Group]]:
    """Pairs of a missed defect of one class and a false alarm of another sharing pixels (for each miss, in order,
    the false alarm left that shares most)."""
    alarms = [g for g in groups if g.kind == "false_alarm"]
    pairs: list[tuple[_Group, _Group]] = []
    taken: set[int] = set()
    for missed in (g for g in groups if g.kind == "missed"):
        best, most = None, 0
        for alarm in alarms:
            if alarm.cls == missed.cls or id(alarm) in taken:
                continue
            x0, y0 = max(missed.box[0], alarm.box[0]), max(missed.box[1], alarm.box[1])
            x1, y1 = min(missed.box[2], alarm.box[2]), min(missed.box[3], alarm.box[3])
            if x0 >= x1 or y0 >= y1:
                continue
            box = _slices((x0, y0, x1, y1))
            shared = int((missed.masks(box)[0] & alarm.masks(box)[1]).sum())
            if shared > most:
                best, most = alarm, shared
        if best is not None:
            pairs.append((missed, best))
            taken.add(id(best))
    return pairs


def _wrong_class_entry(image: str, order: int, missed: _Group, alarm: _Group, roi: Roi,
                       margins: MarginReader) -> ReviewEntry:
    union = _union(missed.box, alarm.box)
    box = _slices(union)
    differ = missed.masks(box)[0] | alarm.masks(box)[1]
    confidence = float(np.mean(margins(box, differ), dtype=np.float64))
    return ReviewEntry(image, order, "wrong_class", missed.cls, _slide_box(union, roi), int(differ.sum()),
                       max(confidence, 0.0), missed.truth_seeds(roi), alarm.prediction_seeds(roi), alarm.cls)


def overlap_groups(truths: int, preds: int, pairs: Iterable[tuple[int, int]]) -> list[tuple[list[int], list[int]]]:
    """The components (labels 1..n) of two label images, `truths` in the first and `preds` in the second, linked
    through the (first, second) label `pairs` that share a pixel: per group, its labels in each."""
    parent = list(range(truths + preds))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for t, p in pairs:
        parent[root(truths + int(p) - 1)] = root(int(t) - 1)
    members: dict[int, tuple[list[int], list[int]]] = {}
    for node in range(truths + preds):
        group = members.setdefault(root(node), ([], []))
        if node < truths:
            group[0].append(node + 1)
        else:
            group[1].append(node - truths + 1)
    return list(members.values())


def label_pairs(first: np.ndarray, second: np.ndarray) -> list[tuple[int, int]]:
    """The (first, second) label pairs of two label images that share a pixel."""
    both = (first > 0) & (second > 0)
    pairs, _ = overlapping(first[both], second[both], int(second.max(initial=0)))
    return [(int(a), int(b)) for a, b in pairs.T]


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
