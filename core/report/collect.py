"""What `segscope report` keeps of a run: the dataset summaries, the numbers of the worst images (the page's table),
the first warnings, and thumbnails (heatmap | mask | truth | errors, and the image itself at the end) of the worst
images only, so memory stays bounded however large the dataset (every image's row goes to the CSV beside the page,
`report_run`)."""

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
from ..evaluate import ImageEvaluation
from ..export.files import heatmap_image
from ..files.fileio import encode_image
from ..metrics import catalogue
from ..metrics.catalogue import DatasetSummary
from ..metrics.review import ERROR_COLORS, FN, FP, TP
from ..metrics.scores import ImageMetrics, argmax_at_roi
from ..palette import class_color
from ..quality.scoring import QualitySummary
from ..quality.spec import MetricSpec
from ..review.queue import QueueOptions, ReviewQueue, result_entries
from ..roi import Roi
from ..slides import open_slide
from ..wording import class_name

#: Longest side of a thumbnail, in pixels.
THUMBNAIL_SIDE = 180
#: Entries of the review queue (`core.review.queue`) the page lists.
REVIEW_ENTRIES = 20
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


def _dominant(values: np.ndarray, kinds: Sequence[int], size: tuple[int, int]) -> np.ndarray:
    """`values` (one of `kinds` or 0 per pixel) downsampled to `size`: each thumbnail pixel takes the kind covering
    most of its area among those present there (ties: the first in `kinds`), 0 only where none is, so a 1-pixel
    crack stays a line and no kind is drawn over another that covers more."""
    shares = np.stack([cv2.resize((values == kind).astype(np.float32), size, interpolation=cv2.INTER_AREA)
                       for kind in kinds])
    chosen = np.asarray(kinds, np.uint8)[shares.argmax(axis=0)]
    return np.where(shares.max(axis=0) > 0, chosen, 0).astype(np.uint8)


def label_thumbnail(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Class indices as a thumbnail in the viewer's class colours on its dark background: each thumbnail pixel the
    class covering most of it among the foreground classes there (`_dominant`)."""
    size = _size(labels.shape[1], labels.shape[0])
    out = np.empty((size[1], size[0], 3), np.uint8)
    out[:] = _BACKGROUND
    if num_classes > 1:
        dominant = _dominant(labels, range(1, num_classes), size)
        for index in range(1, num_classes):
            out[dominant == index] = class_color(index)[::-1]
    return out


def image_thumbnail(dataset: Dataset, item: DatasetItem, roi: Roi) -> np.ndarray:
    """The image's ROI as the stream saw it, scaled down (read region by region from a tiled slide)."""
    with open_slide(item.image_path, dataset.max_pixels) as slide:
        level = slide.level_for(max(roi.width, roi.height) / THUMBNAIL_SIDE)
        down = slide.levels[level].downsample
        box = [int(v / down) for v in roi.as_tuple()]
        pixels = slide.read_region(level, box[0], box[1], max(1, box[2] - box[0]), max(1, box[3] - box[1]))
    return cv2.resize(pixels, _size(roi.width, roi.height), interpolation=cv2.INTER_AREA)


def class_errors(prediction: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per pixel TN/FP/FN/TP by class: TP where the prediction has the truth's foreground class, FN where the truth's
    class is not predicted (missed, or predicted as another class: a class swap is no TP), FP where a foreground
    class is predicted on the truth's background."""
    return np.where(truth > 0, np.where(prediction == truth, TP, FN), np.where(prediction > 0, FP, 0)).astype(np.uint8)


def error_thumbnail(codes: np.ndarray) -> np.ndarray:
    """TN/FP/FN/TP codes downsampled to a thumbnail: each thumbnail pixel the kind covering most of it among the
    kinds there (`_dominant`): a crack found at Dice 0.92 looks found, not missed."""
    return _dominant(codes, (TP, FP, FN), _size(codes.shape[1], codes.shape[0]))


def error_overlay(image: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The image's thumbnail in grey, each error code's pixels in the viewer's colour (`ERROR_COLORS`)."""
    grey = cv2.cvtColor(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR) // 2 + 40
    for kind, rgb in ERROR_COLORS.items():
        grey[codes == kind] = rgb[::-1]
    return grey


class _Warnings(logging.Handler):
    """The first `limit` warnings logged, and how many more there were."""

    def __init__(self, limit: int):
        super().__init__(logging.WARNING)
        self.limit, self.more = limit, 0
        self.kept: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.kept) < self.limit:
            self.kept.append(record.getMessage())
        else:
            self.more += 1


class _Worst:
    """The `size` worst of the numbers offered, by (badness, order): a heap holding the best of them on top."""

    def __init__(self, size: int):
        self.size = size
        self._heap: list[tuple[float, int]] = []  # (-badness, -order)
        self._orders: set[int] = set()

    def offer(self, badness: float, order: int) -> tuple[bool, int | None]:
        """Whether `order` is kept, and which one it pushed out (None: none)."""
        if not self.size:
            return False, None
        heapq.heappush(self._heap, (-badness, -order))
        self._orders.add(order)
        dropped = -heapq.heappop(self._heap)[1] if len(self._heap) > self.size else None
        self._orders.discard(dropped)  # type: ignore[arg-type]
        return dropped != order, dropped

    def __contains__(self, order: int) -> bool:
        return order in self._orders

    def orders(self) -> list[int]:
        """Those kept, worst first (of equals, the first offered)."""
        return [-order for _, order in sorted(self._heap, key=lambda pair: (-pair[0], -pair[1]))]


class ReportData:
    """The run as the report shows it; `add` each evaluation in order, then `finish`. What it keeps does not grow
    with the images beyond the summary's values (`DatasetSummary`): the `worst` images' thumbnails, the `rows`
    worst images' numbers for the page's table (by the ranking; images where it is n/a after every other), the
    first `rows` images without a mask and warnings, and counts of the rest."""

    def __init__(self, dataset: Dataset, spec: MetricSpec, class_names: Sequence[str], rank: catalogue.Metric,
                 worst: int, rows: int = 200):
        self.dataset, self.spec, self.rank, self.worst, self.rows = dataset, spec, rank, worst, rows
        self.class_names = list(class_names)
        self.images = 0  # added
        self.summary = DatasetSummary()  # of the images with a mask
        self.quality = QualitySummary(spec)
        self.without_masks: list[str] = []  # the first `rows` images without a mask, by id
        self._warnings = _Warnings(rows)
        self.warnings = self._warnings.kept  # the first `rows` warnings logged during the run
        self.notes: list[str] = []  # the backend's, shown with the provenance
        self.num_classes = 2
        self._thumbnailed = _Worst(worst)  # the worst images with thumbnails (n/a: never among them)
        self._tabled = _Worst(rows)  # the images of the page's table
        self._entries: dict[int, Entry] = {}  # by order added, those either keeps
        self.review = ReviewQueue(REVIEW_ENTRIES)  # the top of the disagreement queue
        self._review_options = QueueOptions(spec.min_defect_area, spec.defect_iou)

    @property
    def more_warnings(self) -> int:
        """Warnings logged beyond those kept."""
        return self._warnings.more

    def __enter__(self) -> ReportData:
        logging.getLogger("segscope").addHandler(self._warnings)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("segscope").removeHandler(self._warnings)

    def add(self, evaluation: ImageEvaluation) -> None:
        result, item = evaluation.result, evaluation.item
        self.num_classes = result.num_classes
        order, self.images = self.images, self.images + 1
        self.summary.add(evaluation.metrics)
        self.quality.add(evaluation.metrics)
        if evaluation.metrics is None:
            if len(self.without_masks) < self.rows:
                self.without_masks.append(item.id)
            return
        if evaluation.truth_labels is not None:
            self.review.add(result_entries(item.id, order, result, evaluation.truth_labels, self._review_options))
        entry = Entry(item, result.roi, evaluation.metrics, evaluation.truth)
        badness = self.rank.worst_first_key(self.rank.of(evaluation.metrics))
        tabled, untabled = self._tabled.offer(badness, order)
        thumbnailed, unthumbnailed = self._thumbnailed.offer(badness, order) if badness != math.inf else (False, None)
        if tabled or thumbnailed:
            self._entries[order] = entry
        if thumbnailed:
            self._thumbnails(entry, evaluation)
        if unthumbnailed is not None and unthumbnailed in self._entries:
            self._entries[unthumbnailed].thumbnails, self._entries[unthumbnailed].errors = {}, None
        for dropped in (untabled, unthumbnailed):
            if dropped is not None and dropped not in self._tabled and dropped not in self._thumbnailed:
                self._entries.pop(dropped, None)

    def _thumbnails(self, entry: Entry, evaluation: ImageEvaluation) -> None:
        result, truth = evaluation.result, evaluation.truth_labels
        size = _size(result.roi.width, result.roi.height)
        prediction = argmax_at_roi(result)
        heatmap = cv2.resize(heatmap_image(result.probabilities), size, interpolation=cv2.INTER_AREA)
        panels = {"heatmap": heatmap, "mask": label_thumbnail(prediction, result.num_classes)}
        if truth is not None:
            panels["truth"] = label_thumbnail(truth, result.num_classes)
            entry.errors = error_thumbnail(class_errors(prediction, truth))
        entry.thumbnails = {name: encode_image(image) for name, image in panels.items()}

    def finish(self) -> None:
        """The worst images' own pixels (read again, only for those few), and their errors drawn over them."""
        for entry in self.worst_entries():
            image = image_thumbnail(self.dataset, entry.item, entry.roi)
            errors = {"errors": encode_image(error_overlay(image, entry.errors))} if entry.errors is not None else {}
            entry.thumbnails = {"image": encode_image(image), **entry.thumbnails, **errors}

    def worst_entries(self) -> list[Entry]:
        """The worst images by the ranking metric with their thumbnails, worst first (of equals, the first in the
        dataset)."""
        return [self._entries[order] for order in self._thumbnailed.orders()]

    def table_entries(self) -> list[Entry]:
        """The page table's images (the `rows` worst with a mask by the ranking metric), worst first, n/a last."""
        return [self._entries[order] for order in self._tabled.orders()]

    def class_name(self, index: int) -> str:
        return class_name(self.class_names, index)
