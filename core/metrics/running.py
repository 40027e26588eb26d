"""The dataset summary of a set of images whose metrics keep changing (the viewer's session), kept as they change:
setting or dropping one image's metrics costs O(its metrics), never O(images), and the means equal
`core.metrics.catalogue.means` of the same images bit for bit.

The means are exact: each metric's finite values are summed as Shewchuk's non-overlapping partials (the sum
`math.fsum` keeps), which an image's value can leave again exactly, so the mean is the correctly rounded sum over
the count, as `core.metrics.aggregate` computes it. Medians and the worst-case aggregate need every value: they
are left to `catalogue.means` (an export, the report, `eval`).

A histogram needs every image's value of one metric (the one the viewer ranks by): the summary keeps that metric's
values in an array, one slot per image, set as the image's metrics are, so a histogram's draw is a NumPy pass
over it, never a Python walk over the images (asking for another metric fills the array again, once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..quality.calibration import BINS, Reliability
from . import catalogue
from .aggregate import Aggregate
from .catalogue import Metric
from .scores import ImageMetrics


class ExactSum:
    """The exact sum of finite floats, to which values are added and from which they are removed."""

    def __init__(self) -> None:
        self._partials: list[float] = []  # non-overlapping, increasing magnitude (Shewchuk's algorithm)

    def add(self, value: float) -> None:
        kept = 0
        for partial in self._partials:
            if abs(value) < abs(partial):
                value, partial = partial, value
            high = value + partial
            low = partial - (high - value)
            if low:
                self._partials[kept] = low
                kept += 1
            value = high
        self._partials[kept:] = [value] if value else []

    def remove(self, value: float) -> None:
        self.add(-value)

    @property
    def value(self) -> float:
        """The correctly rounded sum (`math.fsum` of every value added and not removed)."""
        return math.fsum(self._partials)


@dataclass
class _Tally:
    """One metric's (or one class entry's) values over the images that have it."""

    images: int = 0  # images that have the entry (a per-class entry: its class index)
    na: int = 0
    infinite: int = 0
    finite: int = 0
    sum: ExactSum = field(default_factory=ExactSum)
    total: int = 0  # a count metric's sum

    def change(self, value: float | None, sign: int, count: bool) -> None:
        self.images += sign
        if value is None:
            self.na += sign
        elif count:
            self.total += sign * int(value)
        elif math.isinf(value):
            self.infinite += sign
        else:
            self.finite += sign
            if sign > 0:
                self.sum.add(value)
            else:
                self.sum.remove(value)


class _PooledReliability:
    """The reliability diagram's counts pooled over the images that have one, kept as images come and go: counts
    are integers, confidence sums exact per bin (`ExactSum`), so pooling in any order gives the same diagram."""

    def __init__(self) -> None:
        self.images = 0
        self.counts, self.correct = np.zeros(BINS, np.int64), np.zeros(BINS, np.int64)
        self.confidence = [ExactSum() for _ in range(BINS)]

    def change(self, reliability: Reliability, sign: int) -> None:
        self.images += sign
        self.counts += sign * reliability.counts
        self.correct += sign * reliability.correct
        for total, value in zip(self.confidence, reliability.confidence):
            total.add(sign * float(value))

    def value(self) -> Reliability:
        return Reliability(self.counts.copy(), np.array([total.value for total in self.confidence]),
                           self.correct.copy())


class RunningSummary:
    """`catalogue.means` of the images set here, without medians; see the module docstring."""

    def __init__(self) -> None:
        self._metrics: dict[str, ImageMetrics] = {}  # by image id: the images with a mask and their metrics
        self._tallies: dict[str, _Tally] = {}  # by metric name (per-class entries: `<family>_<i>`)
        self._families: dict[str, int] = {}  # per-class family -> images that computed it
        self._reliability = _PooledReliability()
        self._whole_slide: set[str] = set()  # the images whose metrics are their whole slide's (`set`)
        self._ranked: Metric | None = None  # the metric whose values `values` keeps (the last one asked for)
        self._slots: dict[str, int] = {}  # by image id (each image in `_metrics`): its place in the arrays below
        self._free: list[int] = []  # slots let go (an image without metrics now), taken again first
        self._values = np.empty(0, np.float64)  # by slot: the ranked metric's value (NaN: n/a)
        self._has = np.zeros(0, bool)  # by slot: whether the image has the ranked metric (computed it)
        #: Bumped by every call that changed what is summed (a view that drew at one count has nothing to redraw
        #: until it moves: setting an image's metrics to the very object it had is no change).
        self.changes = 0

    def __len__(self) -> int:
        return len(self._metrics)

    def set(self, image_id: str, metrics: ImageMetrics | None, whole_slide: bool = False) -> None:
        """The image's metrics are now `metrics` (None: it has none to count, e.g. no mask); `whole_slide`: they
        are its whole slide's (a whole-slide run answers for it), counted apart in `means`."""
        if whole_slide and metrics is not None:
            self._whole_slide.add(image_id)
        else:
            self._whole_slide.discard(image_id)
        old = self._metrics.pop(image_id, None)
        if old is metrics:
            if metrics is not None:
                self._metrics[image_id] = metrics
            return
        self.changes += 1
        if old is not None:
            self._count(old, -1)
        if metrics is not None:
            self._metrics[image_id] = metrics
            self._count(metrics, +1)
        if self._ranked is not None:
            self._keep_value(image_id, metrics)

    def discard(self, image_id: str) -> None:
        self.set(image_id, None)

    def clear(self) -> None:
        self.changes += 1
        self._metrics.clear()
        self._whole_slide.clear()
        self._tallies.clear()
        self._families.clear()
        self._reliability = _PooledReliability()
        self._slots.clear()
        self._free.clear()
        self._values.fill(math.nan)
        self._has.fill(False)

    def _keep_value(self, image_id: str, metrics: ImageMetrics | None) -> None:
        """The image's slot holds its value of the ranked metric (`metrics` None: the slot is let go)."""
        assert self._ranked is not None
        slot = self._slots.pop(image_id, None) if metrics is None else self._slots.get(image_id)
        if metrics is None:
            if slot is not None:
                self._has[slot] = False
                self._free.append(slot)
            return
        if slot is None:
            slot = self._free.pop() if self._free else len(self._slots)  # (no free slot: 0..len-1 are taken)
            if slot == len(self._values):
                grown = max(64, 2 * slot)
                self._values = np.concatenate([self._values, np.full(grown - slot, math.nan)])
                self._has = np.concatenate([self._has, np.zeros(grown - slot, bool)])
            self._slots[image_id] = slot
        self._has[slot] = has = self._ranked.computed(metrics)
        value = self._ranked.of(metrics) if has else None
        self._values[slot] = math.nan if value is None else value

    def _count(self, metrics: ImageMetrics, sign: int) -> None:
        if metrics.quality is not None and metrics.quality.reliability is not None:
            self._reliability.change(metrics.quality.reliability, sign)
        for metric in catalogue.metrics():
            if metric.computed(metrics):
                self._tally(metric.name).change(metric.of(metrics), sign, metric.scale.count)
        for family in catalogue.per_class():
            values = family.values(metrics)
            if values is None and family.optional:  # (not computed: the image does not have its entries)
                continue
            self._families[family.name] = self._families.get(family.name, 0) + sign
            for index in range(len(values or ())):
                self._tally(f"{family.name}_{index}").change(family.entry(index).of(metrics), sign, family.scale.count)

    def _tally(self, name: str) -> _Tally:
        tally = self._tallies.get(name)
        if tally is None:
            tally = self._tallies[name] = _Tally()
        return tally

    def aggregate(self, metric: Metric) -> Aggregate | None:
        """`metric` over the images that have it, without medians (None: no image has it). A per-class entry is
        had by every image of its family, as n/a where the image's class list stops before its class, as in
        `catalogue.means`."""
        tally = self._tallies.get(metric.name) or _Tally()
        family = catalogue.family_of(metric.name)
        images = self._families.get(family, 0) if family is not None else tally.images
        if not images:
            return None
        na = tally.na + images - tally.images
        if metric.scale.count:
            return Aggregate(images, na, 0, total=tally.total)
        return Aggregate(images, na, tally.infinite, tally.sum.value / tally.finite if tally.finite else None)

    def means(self) -> dict[str, object]:
        """What `catalogue.means` gives for these images, each aggregate without its median (None) and worst-case
        aggregate (left out), and how many of the images are scored over their whole slide
        ("images_whole_slide", where any): enough for `catalogue.brief_means` and a histogram's title."""
        classes = max((int(name.rsplit("_", 1)[1]) + 1 for name, tally in self._tallies.items()
                       if tally.images and catalogue.family_of(name) is not None), default=0)
        found = [(metric, aggregated) for metric in catalogue.entries_below(classes)
                 if (aggregated := self.aggregate(metric)) is not None]
        summary = catalogue.summary_document(found, len(self._metrics))
        if self._whole_slide:
            summary["images_whole_slide"] = len(self._whole_slide)
        return summary

    def reliability(self) -> tuple[Reliability, int]:
        """The reliability diagram pooled over the images that computed one (ECE chosen), and how many they are."""
        return self._reliability.value(), self._reliability.images

    def values(self, metric: Metric) -> np.ndarray:
        """`metric` of every image that has it (NaN: n/a), in no particular order, for a histogram: a NumPy pass
        over the images, kept as they change (another metric than the last one asked for: a walk, once)."""
        if metric != self._ranked:
            self._ranked = metric
            self._slots.clear()
            self._free.clear()
            self._values = np.full(len(self._metrics), math.nan)
            self._has = np.zeros(len(self._metrics), bool)
            for image_id, metrics in self._metrics.items():
                self._keep_value(image_id, metrics)
        return self._values[self._has]
