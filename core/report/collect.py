"""What `segscope report` keeps of a run: every image's numbers, the dataset summaries, the warnings logged, and
thumbnails (heatmap | mask | truth | errors, and the image itself at the end) of the worst images only, so memory
stays bounded however large the dataset."""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np

from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.truth import Truth
from ..evaluate import DatasetSummary, ImageEvaluation
from ..export.files import heatmap_image
from ..files.fileio import encode_image
from ..metrics import catalogue
from ..metrics.review import ERROR_COLORS, FN, FP, TP, error_codes
from ..metrics.scores import ImageMetrics, argmax_at_roi
from ..palette import class_color
from ..quality.scoring import QualitySummary
from ..quality.spec import MetricSpec
from ..roi import Roi
from ..slides import open_slide

#: Longest side of a thumbnail, in pixels.
THUMBNAIL_SIDE = 180
_BACKGROUND = (58, 50, 46)  # BGR of the viewer's dark background


@dataclass
class Entry:
    """One image of the run."""

    item: DatasetItem
    roi: Roi
    metrics: ImageMetrics | None  # with the chosen QA metrics in `.quality`
    truth: Truth | None = None  # the truth file it was scored against
    thumbnails: dict[str, bytes] = field(default_factory=dict)  # PNG bytes by panel: image, heatmap, mask, truth
    errors: np.ndarray | None = None  # TN/FP/FN/TP codes of the foreground at thumbnail size (worst images only)

    def value(self, key: str) -> float | None:
        """A metric of this image, by its catalogue name (None: no mask, n/a, or not computed)."""
        return catalogue.lookup(key).of(self.metrics)


def _size(width: int, height: int) -> tuple[int, int]:
    scale = min(1.0, THUMBNAIL_SIDE / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def label_thumbnail(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Class labels in their colours on the dark background, max-downsampled: a class covering any part of a
    thumbnail pixel shows there, so a 1-pixel crack stays a line."""
    size = _size(labels.shape[1], labels.shape[0])
    out = np.empty((size[1], size[0], 3), np.uint8)
    out[:] = _BACKGROUND
    for index in range(1, num_classes):
        covered = cv2.resize((labels == index).astype(np.float32), size, interpolation=cv2.INTER_AREA) > 0
        out[covered] = class_color(index)[::-1]
    return out


def image_thumbnail(dataset: Dataset, item: DatasetItem, roi: Roi) -> np.ndarray:
    """The image's ROI as the stream saw it, scaled down (read region by region from a tiled slide)."""
    with open_slide(item.image_path, dataset.max_pixels) as slide:
        level = slide.level_for(max(roi.width, roi.height) / THUMBNAIL_SIDE)
        down = slide.levels[level].downsample
        box = [int(v / down) for v in roi.as_tuple()]
        pixels = slide.read_region(level, box[0], box[1], max(1, box[2] - box[0]), max(1, box[3] - box[1]))
    return cv2.resize(pixels, _size(roi.width, roi.height), interpolation=cv2.INTER_AREA)


def error_thumbnail(codes: np.ndarray) -> np.ndarray:
    """Foreground TN/FP/FN/TP codes (`core.metrics.review.error_codes`) max-downsampled to a thumbnail: a kind
    covering any part of a thumbnail pixel shows there, errors over TP, a miss (FN) over a false alarm (FP)."""
    size = _size(codes.shape[1], codes.shape[0])
    out = np.zeros((size[1], size[0]), np.uint8)
    for kind in (TP, FP, FN):
        out[cv2.resize((codes == kind).astype(np.float32), size, interpolation=cv2.INTER_AREA) > 0] = kind
    return out


def error_overlay(image: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The image's thumbnail in grey, each error code's pixels in the viewer's colour (`ERROR_COLORS`)."""
    grey = cv2.cvtColor(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR) // 2 + 40
    for kind, rgb in ERROR_COLORS.items():
        grey[codes == kind] = rgb[::-1]
    return grey


class _Warnings(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


class ReportData:
    """The run as the report shows it; `add` each evaluation in order, then `finish`."""

    def __init__(self, dataset: Dataset, spec: MetricSpec, class_names: Sequence[str], rank: catalogue.Metric,
                 worst: int):
        self.dataset, self.spec, self.rank, self.worst = dataset, spec, rank, worst
        self.class_names = list(class_names)
        self.entries: list[Entry] = []
        self.summary = DatasetSummary()
        self.quality = QualitySummary(spec)
        self.warnings: list[str] = []
        self.notes: list[str] = []  # the backend's, shown with the provenance
        self.num_classes = 2
        #: Heap of (-badness, -index) of the entries holding thumbnails (badness: the ranking's worst-first key,
        #: smaller is worse): on top the best of them, of equals the latest
        self._kept: list[tuple[float, int]] = []
        self._handler = _Warnings(self.warnings)

    def __enter__(self) -> ReportData:
        logging.getLogger("segscope").addHandler(self._handler)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("segscope").removeHandler(self._handler)

    def add(self, evaluation: ImageEvaluation) -> None:
        result, item = evaluation.result, evaluation.item
        self.num_classes = result.num_classes
        entry = Entry(item, result.roi, evaluation.metrics, evaluation.truth)
        self.entries.append(entry)
        self.summary.add(evaluation.metrics)
        self.quality.add(evaluation.metrics)
        badness = self.rank.worst_first_key(self.rank.of(evaluation.metrics))
        if badness == math.inf or self.worst == 0:  # n/a: never among the worst
            return
        index = len(self.entries) - 1
        heapq.heappush(self._kept, (-badness, -index))
        dropped = -heapq.heappop(self._kept)[1] if len(self._kept) > self.worst else None
        if dropped != index:
            self._thumbnails(entry, evaluation)
            if dropped is not None:
                self.entries[dropped].thumbnails, self.entries[dropped].errors = {}, None

    def _thumbnails(self, entry: Entry, evaluation: ImageEvaluation) -> None:
        result, truth = evaluation.result, evaluation.truth_labels
        size = _size(result.roi.width, result.roi.height)
        prediction = argmax_at_roi(result)
        heatmap = cv2.resize(heatmap_image(result.probabilities), size, interpolation=cv2.INTER_AREA)
        panels = {"heatmap": heatmap, "mask": label_thumbnail(prediction, result.num_classes)}
        if truth is not None:
            panels["truth"] = label_thumbnail(truth, result.num_classes)
            entry.errors = error_thumbnail(error_codes(prediction > 0, truth > 0, True))
        entry.thumbnails = {name: encode_image(image) for name, image in panels.items()}

    def finish(self) -> None:
        """The worst images' own pixels (read again, only for those few), and their errors drawn over them."""
        for entry in self.worst_entries():
            image = image_thumbnail(self.dataset, entry.item, entry.roi)
            errors = {"errors": encode_image(error_overlay(image, entry.errors))} if entry.errors is not None else {}
            entry.thumbnails = {"image": encode_image(image), **entry.thumbnails, **errors}

    def worst_entries(self) -> list[Entry]:
        """The worst images by the ranking metric, worst first (of equals, the first in the dataset)."""
        return [self.entries[-index] for _, index in sorted(self._kept, key=lambda pair: (-pair[0], -pair[1]))]

    def class_name(self, index: int) -> str:
        return self.class_names[index] if index < len(self.class_names) else f"class {index}"
