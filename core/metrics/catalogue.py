"""The one catalogue of per-image metrics: each metric's name, label, aliases, which way is better, how it is
shown, and where its value comes from.

Everything that names a metric reads it here: the dataset filter (`core.metrics.filter`), the viewer's
metrics panel, dataset table and worst-first ranking, the metric tables of an export (CSV/JSON) and
`eval --json`. A metric is added by registering it:

- `register(Metric(...))` for one number per image, read from `ImageMetrics` by `value` (NaN = "n/a": the
  metric does not apply to this image, e.g. a Dice with no foreground in either mask; n/a values are shown as
  "n/a", sort after every number whichever way is better, and are left out of means);
- `register_per_class(PerClass(...))` for one number per class (`values` gives the sequence); its entries are
  named `<name>_<class index>` (the CSV columns) and labelled with the class names.
- `optional=True` for a metric computed only when asked for (`eval --metrics`, `core.quality`): its `value`
  gives None where it was not computed, and rows, means and the viewer's panel leave it out there;
- `scale=Scale(...)`: its unit and reference, whether it is a count (summed over images, an integer), and the
  worst value substituted for an infinite one in the worst-case aggregate (`core.metrics.aggregate`).

Where a number is computed is `core.metrics.scores`' business: a new metric adds its field to `ImageMetrics` there
and registers its entry here; nothing else changes for it to be filtered, shown, ranked and exported.
"""

from __future__ import annotations

import functools
import math
import re
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import SegScopeError
from .aggregate import Aggregate, aggregate
from .scores import ImageMetrics


@dataclass(frozen=True)
class Scale:
    """What a metric's numbers are (for documents, the report and the aggregation rule)."""

    unit: str = ""  # e.g. "px"; "" for a ratio in [0, 1]
    reference: str = ""  # where the definition comes from
    count: bool = False  # an integer count: summed over images, never averaged
    worst: Callable[[ImageMetrics], float] | None = None  # the worst value of an image, for an infinite one
    substitute: str = ""  # `worst` in words


@dataclass(frozen=True, eq=False)
class Metric:
    """One number per image; metrics are equal when their names are (a name means one metric)."""

    name: str  # the key in tables, filters and JSON
    label: str  # what the viewer shows
    description: str  # how it is computed (tooltips, docs)
    value: Callable[[ImageMetrics], float | None]  # NaN: n/a for this image; None: not computed (`optional`)
    higher_is_better: bool = True
    aliases: tuple[str, ...] = ()  # other names the filter accepts
    digits: int = 4
    bounds: tuple[float, float] | None = (0.0, 1.0)  # the histogram's range (None: the data's)
    short: str = ""  # a column title or a word in a line ("" = the label)
    optional: bool = False  # computed only when asked for (see the module docstring)
    scale: Scale = Scale()

    @property
    def title(self) -> str:
        return self.short or self.label

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Metric) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def of(self, metrics: ImageMetrics | None) -> float | None:
        """The image's value (an int for a count), None when it has no metrics or the metric is n/a for it."""
        value = None if metrics is None else self.value(metrics)
        if value is None or math.isnan(value):
            return None
        return int(value) if self.scale.count else float(value)

    def computed(self, metrics: ImageMetrics | None) -> bool:
        """Whether this image has the metric: it has metrics and, for an optional one, it was asked for."""
        return metrics is not None and (not self.optional or self.value(metrics) is not None)

    def text(self, value: float | None) -> str:
        """The value as shown; an infinite distance reads "inf"."""
        return "n/a" if value is None or math.isnan(value) else f"{value:.{self.digits}f}"

    def worst_first_key(self, value: float | None) -> float:
        """Ascending order of this key is worst first, n/a (None, NaN) last."""
        if value is None or math.isnan(value):
            return math.inf
        return value if self.higher_is_better else -value

    def describe(self) -> dict[str, object]:
        """The entry as `eval --json` and the export's metrics.json state it."""
        return {"name": self.name, "label": self.label, "higher_is_better": self.higher_is_better,
                "description": self.description, **_scale_fields(self.scale)}


def _scale_fields(scale: Scale) -> dict[str, object]:
    fields: dict[str, object] = {"unit": scale.unit} if scale.unit else {}
    if scale.reference:
        fields["reference"] = scale.reference
    if scale.count:
        fields["count"] = True
    if scale.substitute:
        fields["worst_case"] = scale.substitute
    return fields


@dataclass(frozen=True)
class PerClass:
    """One number per class, registered once; `entry(i, name)` is the metric of class `i`."""

    name: str  # entries are `<name>_<index>`
    label: str  # entries are `<label>: <class name>`
    description: str
    values: Callable[[ImageMetrics], Sequence[float] | None]  # None: not computed (`optional`)
    higher_is_better: bool = True
    digits: int = 4
    bounds: tuple[float, float] | None = (0.0, 1.0)
    optional: bool = False
    scale: Scale = Scale()
    first: int = 0  # the first class it scores (1: the foreground classes; index 0 of `values` is then n/a)

    def describe(self) -> dict[str, object]:
        return {"name": f"{self.name}_<i>", "label": f"{self.label}: <class>", "per_class": True,
                "first_class": self.first, "higher_is_better": self.higher_is_better,
                "description": self.description, **_scale_fields(self.scale)}

    def entry(self, index: int, class_name: str = "") -> Metric:
        def value(metrics: ImageMetrics) -> float | None:
            values = self.values(metrics)
            if values is None:
                return None
            return float(values[index]) if index < len(values) else math.nan

        label = f"{self.label}: {class_name or f'class {index}'}"
        return Metric(f"{self.name}_{index}", label,
                      f"{self.description} (class {index}{f', {class_name}' if class_name else ''})", value,
                      self.higher_is_better, (), self.digits, self.bounds, optional=self.optional, scale=self.scale)


#: What ranks images ("Worst first", the next/previous worst keys, the histogram) unless the user picks another.
DEFAULT_RANKING = "foreground_dice"

_METRICS: dict[str, Metric] = {}
_PER_CLASS: dict[str, PerClass] = {}
_PER_CLASS_NAME = re.compile(r"(\w+)_(\d+)")


def family_of(name: str) -> str | None:
    """The per-class metric `name` is an entry of (`dice_1` -> `dice`), or None."""
    match = _PER_CLASS_NAME.fullmatch(name)
    return match.group(1) if match and match.group(1) in _PER_CLASS else None


def _clashes(names: Iterable[str]) -> list[str]:
    """Of `names`, those a registered metric (or a per-class entry `<name>_<i>`) already answers to."""
    taken = {n for m in _METRICS.values() for n in (m.name, *m.aliases)}
    return sorted(n for n in names if n in taken or family_of(n) is not None)


def register(metric: Metric) -> Metric:
    """Add a per-image metric; its name and aliases must be new."""
    clash = _clashes((metric.name, *metric.aliases))
    if clash:
        raise ValueError(f"metric name(s) {clash} already registered")
    _METRICS[metric.name] = metric
    return metric


def register_per_class(family: PerClass) -> PerClass:
    """Add a per-class metric; its name must be new and its entries `<name>_<i>` must not clash."""
    taken = {n for m in _METRICS.values() for n in (m.name, *m.aliases)}
    if family.name in _PER_CLASS or any(re.fullmatch(rf"{family.name}_\d+", n) for n in taken):
        raise ValueError(f"per-class metric name {family.name!r} already registered or clashing")
    _PER_CLASS[family.name] = family
    return family


def metrics(class_names: Sequence[str] = ()) -> list[Metric]:
    """Every per-image metric, then each per-class one for every class of `class_names` (the optional QA
    ones for the foreground classes: they do not score the background)."""
    return [*_METRICS.values(), *(family.entry(i, name) for family in _PER_CLASS.values()
                                  for i, name in enumerate(class_names) if i >= family.first)]


def per_class() -> list[PerClass]:
    """The per-class metrics, in registration order."""
    return list(_PER_CLASS.values())


def lookup(name: str, class_names: Sequence[str] = ()) -> Metric:
    """The metric called `name` (or one of its aliases, case-insensitive); `<per-class name>_<index>` for a
    class. SegScopeError lists the names there are."""
    key = name.strip().lower()
    for metric in _METRICS.values():
        if key == metric.name or key in metric.aliases:
            return metric
    family = family_of(key)
    if family is not None:
        index = int(key.rsplit("_", 1)[1])
        return _PER_CLASS[family].entry(index, class_names[index] if index < len(class_names) else "")
    raise SegScopeError(f"unknown metric {name!r}; use one of {', '.join(names())}")


def names() -> list[str]:
    """Every name `lookup` accepts, per-class ones as `<name>_<i>`."""
    return [n for m in _METRICS.values() for n in (m.name, *m.aliases)] + [f"{f}_<i>" for f in _PER_CLASS]


def row_values(image_metrics: ImageMetrics | None) -> dict[str, object]:
    """An image's metrics for a table row: every per-image metric by name (None = n/a, counts as integers) and
    every per-class one as a list by its name, indexed by class (`csv_row` makes `<name>_<i>` columns of it);
    empty without metrics."""
    if image_metrics is None:
        return {}
    row: dict[str, object] = {m.name: m.of(image_metrics) for m in _METRICS.values() if m.computed(image_metrics)}
    for family in _PER_CLASS.values():
        values = family.values(image_metrics)
        if values is not None:
            row[family.name] = [None if math.isnan(v) else int(v) if family.scale.count else float(v)
                                for v in values]
    return row


def csv_row(row: Mapping[str, object]) -> dict[str, object]:
    """A table row with each per-class list as one column per class it scores: `dice_0`, `dice_1`, ...,
    `hd95_class_1` (a family starting at class 1 has no always-empty `_0` column)."""
    flat: dict[str, object] = {}
    for key, value in row.items():
        if isinstance(value, (list, tuple)):
            first = _PER_CLASS[key].first if key in _PER_CLASS else 0
            flat.update({f"{key}_{index}": v for index, v in enumerate(value) if index >= first})
        else:
            flat[key] = value
    return flat


class _Column:
    """One metric's value of every image added (NaN: n/a), whether each computed it, and its worst case where the
    metric has one (`Scale.worst`, NaN where not computed)."""

    def __init__(self, images: int, computed: bytes, worst: bool):
        self.values = array("d", [math.nan]) * images
        self.computed = bytearray(computed)
        self.worst = array("d", [math.nan]) * images if worst else None

    def add(self, value: float | None, worst: Callable[[ImageMetrics], float] | None, metrics: ImageMetrics) -> None:
        """The next image's value (None: not computed); `worst(metrics)`: its worst case, when computed."""
        self.values.append(math.nan if value is None else value)
        self.computed.append(value is not None)
        if self.worst is not None:
            self.worst.append(worst(metrics) if value is not None and worst is not None else math.nan)

    def having(self) -> tuple[list[float], list[float] | None]:
        """The values (and worst cases) of the images that computed the metric, in the order they were added."""
        chosen = np.frombuffer(self.computed, np.uint8) != 0
        worst = np.frombuffer(self.worst, np.float64)[chosen].tolist() if self.worst is not None else None
        return np.frombuffer(self.values, np.float64)[chosen].tolist(), worst


class DatasetSummary:
    """The metrics of the images that have masks, and their means (`means`), kept as what the summary needs and no
    more: per metric and per-class entry one float64 value a image (NaN: n/a; the medians need every value) and a
    byte saying whether the image computed it, plus its worst case where the metric has one (`Scale.worst`), never
    the images' `ImageMetrics` (`bytes_per_image`: about 90 bytes with the default metrics of a two-class model,
    about 340 with every QA metric). Numbers are those of the one rule (`core.metrics.aggregate`) over the values in
    the order the images were added."""

    def __init__(self) -> None:
        self.images = 0  # added with metrics (images with masks)
        self._columns: dict[str, _Column] = {}  # by metric name, each as long as `images`
        self._classes = 0  # the longest per-class list of any image so far
        self._having: dict[str, bytearray] = {}  # optional per-class families: whether each image computed them

    def add(self, metrics: ImageMetrics | None) -> None:
        """The next image's metrics (None: it has no mask, nothing to add)."""
        if metrics is None:
            return
        columns = self._columns
        for metric in _METRICS.values():
            value = metric.value(metrics) if metric.computed(metrics) else None
            if value is not None or metric.name in columns:  # (else: not computed by any image yet)
                self._add(metric.name, value, metric.scale.worst, metrics, None)
        lists = {family.name: family.values(metrics) for family in _PER_CLASS.values()}
        self._classes = max([self._classes, *(len(v) for v in lists.values() if v)])
        for family in _PER_CLASS.values():
            values = lists[family.name]
            had = family.name in self._having if family.optional else self.images > 0  # an image before this one
            if family.optional:
                if values is None and not had:
                    continue  # no image has computed it: no column yet
                self._having.setdefault(family.name, bytearray(self.images)).append(values is not None)
            having = not family.optional or values is not None
            before = functools.partial(self._computed_before, family) if had else None
            for index in range(family.first, self._classes):
                value = (values[index] if values is not None and index < len(values) else math.nan) if having else None
                self._add(f"{family.name}_{index}", value, family.scale.worst, metrics, before)
        self.images += 1

    def _computed_before(self, family: PerClass) -> bytes:
        """Which images before this one computed an entry of `family` first met now (a class no image had before):
        every one that computed the family, as n/a."""
        if not family.optional:
            return b"\x01" * self.images
        return bytes(self._having.get(family.name, bytearray(self.images))[: self.images])

    def _add(self, name: str, value: float | None, worst: Callable[[ImageMetrics], float] | None,
             metrics: ImageMetrics, computed_before: Callable[[], bytes] | None) -> None:
        """The image's `value` of metric `name` (None: not computed) and, with one, its `worst` case;
        `computed_before`: which images before it computed the metric, should it have no column yet (None: none
        did)."""
        column = self._columns.get(name)
        if column is None:
            if value is None and computed_before is None:
                return  # not computed by any image yet
            before = computed_before() if computed_before is not None else bytes(self.images)
            column = self._columns[name] = _Column(self.images, before, worst is not None)
        column.add(value, worst, metrics)

    @property
    def bytes_per_image(self) -> int:
        """What each image added costs here."""
        return sum(8 + 1 + (8 if c.worst is not None else 0) for c in self._columns.values()) + len(self._having)

    def values(self, metric: Metric) -> list[float | None]:
        """`metric` of every image with a mask (None: n/a for that image, or not computed), as `Metric.of` gives it."""
        column = self._columns.get(metric.name)
        if column is None:
            return [None] * self.images
        return [None if not computed or math.isnan(value) else int(value) if metric.scale.count else value
                for value, computed in zip(column.values, column.computed)]

    def entries(self) -> list[Metric]:
        """Every metric some image computed: the per-image ones, then each per-class one for the classes the images
        hold, in the catalogue's order."""
        columns = self._columns
        return [m for m in entries_below(self._classes) if m.name in columns and any(columns[m.name].computed)]

    def aggregate(self, metric: Metric, confidence: bool = False) -> Aggregate:
        """`metric` over the images that computed it, by the one rule (`core.metrics.aggregate`)."""
        column = self._columns.get(metric.name)
        values, worst = column.having() if column is not None else ([], None)
        return aggregate(values, worst if metric.scale.worst is not None else None, metric.scale.substitute,
                         metric.scale.count, confidence)

    def means(self, confidence: bool = False) -> dict[str, object]:
        """The dataset summary by the one aggregation rule: each per-image metric's mean over the images where it is
        finite (None when there is none; a count's total), how many images have masks, and under "aggregates" every
        metric's and per-class entry's `Aggregate` (n/a and infinite counts, medians, the worst-case aggregate; with
        `confidence`, the bootstrap interval of each mean)."""
        return summary_document([(metric, self.aggregate(metric, confidence)) for metric in self.entries()],
                                self.images)


def entries_below(classes: int) -> list[Metric]:
    """Every per-image metric, then each per-class one for the classes below `classes` it scores, in the
    catalogue's order: the entries a summary may hold."""
    return [*_METRICS.values(), *(f.entry(i) for f in _PER_CLASS.values() for i in range(f.first, classes))]


def summary_document(found: Sequence[tuple[Metric, Aggregate]], images: int) -> dict[str, object]:
    """The summary of `images` images with masks from each entry's aggregate: a per-image metric's mean (a
    count's total; None for a plain metric no image has), and every entry's aggregate under "aggregates"."""
    summary: dict[str, object] = {}
    aggregates: dict[str, object] = {}
    for metric, aggregated in found:
        if metric.name in _METRICS:
            summary[metric.name] = aggregated.total if metric.scale.count else aggregated.mean
        aggregates[metric.name] = aggregated.as_dict()
    for metric in _METRICS.values():  # the plain metrics of a run with no mask (None: n/a)
        if not metric.optional:
            summary.setdefault(metric.name, None)
    summary["images_with_masks"] = images
    summary["aggregates"] = aggregates
    return summary


def means(all_metrics: Iterable[ImageMetrics | None], confidence: bool = False) -> dict[str, object]:
    """`DatasetSummary.means` of these images' metrics (None: an image without a mask)."""
    summary = DatasetSummary()
    for metrics in all_metrics:
        summary.add(metrics)
    return summary.means(confidence)


#: The headline metrics: what a one-line summary names (the viewer's toolbar and status bar, a whole-slide run's
#: message), the dataset table's metric columns (right after the id, so a narrow dock still shows them) and the
#: report's first columns.
BRIEF = ("soft_dice", "foreground_dice", "foreground_iou")


def brief(values: Mapping[str, Any]) -> str:
    """"Soft Dice 0.9312 · Dice 0.8000 · IoU 0.6667" from a row of values (`row_values`, `means`); None = n/a."""
    shown = [_METRICS[name] for name in BRIEF]
    return " · ".join(f"{m.title} {m.text(values.get(m.name))}" for m in shown)


def brief_means(means: Mapping[str, Any]) -> str:
    """`brief` of a dataset summary (`means`) with what it is over: "Soft Dice 0.9993 · Dice 0.9300 · IoU 0.8710
    (8 images, 1 over its whole slide; Dice, IoU n/a on 1)": the images with masks, how many of them are scored
    over their whole slide (the viewer's means, where any), and the brief metrics that left some out."""
    aggregates = means.get("aggregates") or {}
    images = int(means.get("images_with_masks") or 0)
    whole = int(means.get("images_whole_slide") or 0)
    left_out: dict[int, list[str]] = {}
    for name in BRIEF:
        na = int((aggregates.get(name) or {}).get("na") or 0)
        if na:
            left_out.setdefault(na, []).append(_METRICS[name].title)
    notes = "".join(f"; {', '.join(titles)} n/a on {na}" for na, titles in left_out.items())
    over = f", {whole} over {'its' if whole == 1 else 'their'} whole slide" if whole else ""
    return f"{brief(means)} ({images} image{'' if images == 1 else 's'}{over}{notes})"


def catalogue_document(ranking: Metric | None = None) -> dict[str, object]:
    """What a metrics document (`eval --json`, an export's metrics.json) says of its numbers: each metric's
    definition and direction (per-class ones once, as `<name>_<i>`), and the metric the images are ranked by
    worst first (`ranking`, else the default)."""
    return {"metrics": [m.describe() for m in _METRICS.values()] + [f.describe() for f in _PER_CLASS.values()],
            "ranking": (ranking or lookup(DEFAULT_RANKING)).describe(), "numbers": NUMBERS}


#: How documents write numbers (`core.metrics.numbers.json_safe`), as they say it.
NUMBERS = {"null": "n/a: the metric does not apply to the image (e.g. a class in neither mask) or was not computed",
           '"inf"': "infinite (e.g. HD95 when only one mask has the class); \"-inf\" likewise",
           "summary.aggregates": "per metric: images, finite, na and infinite counts, mean and median of the "
                                 "finite values, the worst-case aggregate (infinite values substituted) where one "
                                 "is defined; counts: their total"}


_MAIN = "the original project's main.py"
_RATIO = Scale(reference="Dice 1945; Jaccard 1912 (hard, at ROI resolution, the card's decision)")
register(Metric(
    "soft_dice", "Soft Dice",
    "2·Σ(p·y) / (Σp² + Σy²), all classes, background included, at model resolution against the truth resampled "
    "there (binary: bilinear then > 0.5; classes: nearest): main.py's number",
    lambda m: m.soft_dice, scale=Scale(reference=_MAIN)))
register(Metric("soft_iou", "Soft IoU", "Soft Dice / (2 − soft Dice), as main.py reported it",
                lambda m: m.soft_iou, scale=Scale(reference=_MAIN)))
register(Metric(
    "foreground_dice", "Dice (foreground)",
    "Hard Dice 2·TP / (2·TP + FP + FN) of the card's decision at ROI resolution: the mean over the foreground "
    "classes present in the prediction or the truth; n/a when neither has any foreground",
    lambda m: m.foreground_dice, aliases=("dice",), short="Dice", scale=_RATIO))
register(Metric(
    "foreground_iou", "IoU (foreground)",
    "Hard IoU TP / (TP + FP + FN) at ROI resolution, averaged like Dice (foreground); n/a without foreground",
    lambda m: m.foreground_iou, aliases=("iou",), short="IoU", scale=_RATIO))
register(Metric("precision", "Precision", "TP / (TP + FP), every class ≥ 1 as foreground, at ROI resolution (n/a "
                                          "when nothing is predicted: TP + FP = 0)",
                lambda m: m.precision, scale=_RATIO))
register(Metric("recall", "Recall", "TP / (TP + FN), every class ≥ 1 as foreground, at ROI resolution (n/a when "
                                    "the truth has no foreground: TP + FN = 0)",
                lambda m: m.recall, scale=_RATIO))
register_per_class(PerClass("dice", "Dice", "Hard Dice of one class, one-vs-rest, at ROI resolution (n/a when the "
                                            "class is in neither mask)", lambda m: m.dice, scale=_RATIO))
register_per_class(PerClass("iou", "IoU", "Hard IoU of one class, one-vs-rest, at ROI resolution (n/a when the "
                                          "class is in neither mask)", lambda m: m.iou, scale=_RATIO))


# --- the QA metrics `eval --metrics` asks for (core/quality; definitions and empty-mask values there) -------


def _quality(key: str) -> Callable[[ImageMetrics], float | None]:
    return lambda m: None if m.quality is None else m.quality.values.get(key)


def _quality_per_class(key: str) -> Callable[[ImageMetrics], Sequence[float] | None]:
    def values(m: ImageMetrics) -> Sequence[float] | None:
        if m.quality is None or key not in m.quality.values:
            return None
        return [math.nan, *(m.quality.per_class[c].get(key, math.nan) for c in sorted(m.quality.per_class))]

    return values


def _diagonal(m: ImageMetrics) -> float:
    """The worst HD95 a class of an image can have: its scored ROI's diagonal in pixels."""
    assert m.quality is not None  # (only images with the QA metrics are aggregated)
    return m.quality.diagonal


def _class_by_class(key: str, worst: Callable[[ImageMetrics], float]) -> Callable[[ImageMetrics], float]:
    """An image's worst case of `key` as its value is made (the mean over the classes in either mask), each class's
    infinite value replaced by `worst` and its finite ones kept: one class with no contour to match does not make
    the whole image's value the worst."""
    def image_worst(m: ImageMetrics) -> float:
        assert m.quality is not None
        found = [v for v in (m.quality.per_class[c].get(key, math.nan) for c in sorted(m.quality.per_class))
                 if not math.isnan(v)]
        return float(np.mean([v if math.isfinite(v) else worst(m) for v in found])) if found else math.nan
    return image_worst


_DEFECTS = Scale(reference="SegScope's definition (README, QA metrics): 8-connected components matched one to one "
                           "at IoU >= --defect-iou (default 0.5), fragments and merges counted apart")
_COUNTS = Scale("defects", _DEFECTS.reference, count=True)
_CALIBRATION = "Guo et al. 2017, On Calibration of Modern Neural Networks (ICML); 15 equal-width bins"
#: name, label, short title, description, higher is better, digits, bounds, scale; each per image and per class.
_QUALITY = (
    ("hd95", "HD95 (px)", "HD95", "95th-percentile Hausdorff distance between the contours in pixels (DeepMind "
     "surface-distance, spacing 1 px); inf when only one mask has the class, n/a when neither has", False, 2, None,
     Scale("px", "Nikolov et al. 2021 (DeepMind surface-distance)", worst=_diagonal,
           substitute="each class's inf replaced by the diagonal of the image's scored ROI (px), the largest "
                      "distance possible")),
    ("nsd", "NSD", "", "Normalised surface Dice: the share of both contours within T px of the other (eval "
     "--metrics nsd@T, default 2); n/a when neither mask has the class", True, 4, (0.0, 1.0),
     Scale(reference="Nikolov et al. 2021 (DeepMind surface-distance)")),
    ("cldice", "clDice", "", "Centreline Dice (Shit et al. 2021) on scikit-image's skeletons: is a crack kept in "
     "one piece and inside the truth; n/a when neither mask has the class", True, 4, (0.0, 1.0),
     Scale(reference="Shit et al. 2021, clDice (CVPR)")),
    ("defect_f1", "Defect F1", "", "2TP / (2TP + FP + FN) of the defects (components) matched one to one; n/a when "
     "neither mask has a defect", True, 4, (0.0, 1.0), _DEFECTS),
    ("defect_precision", "Defect precision", "", "TP / (TP + FP): fragments of a true defect are not false alarms "
     "(n/a with no predicted defect: TP + FP = 0)", True, 4, (0.0, 1.0), _DEFECTS),
    ("defect_recall", "Defect recall", "", "TP / (TP + FN): the share of true defects found (n/a with no true "
     "defect: TP + FN = 0)", True, 4, (0.0, 1.0), _DEFECTS),
    ("defect_tp", "Defects found", "TP", "True defects matched by a predicted one", True, 0, None, _COUNTS),
    ("defect_fp", "False alarms", "FP", "Predicted defects that match no true one and lie mostly outside every "
     "true defect", False, 0, None, _COUNTS),
    ("defect_fn", "Missed defects", "FN", "True defects no predicted one matches (merged ones included)", False, 0,
     None, _COUNTS),
    ("defect_split", "Fragments", "split", "Unmatched predicted defects lying mostly (>= 50 % of their area) inside "
     "one true defect predicted in pieces (another predicted defect matches it or lies mostly inside it): pieces "
     "of it, not false alarms; a lone undersized detection is a false alarm, and a merge's host never a fragment",
     False, 0, None, _COUNTS),
    ("defect_merged", "Merged defects", "merged", "Unmatched true defects lying mostly (>= 50 %) inside one "
     "predicted defect that also covers another (counted among the misses)", False, 0, None, _COUNTS),
)
for _name, _label, _short, _description, _higher, _digits, _bounds, _scale in _QUALITY:
    _description += ". Per class one-vs-rest; per image the mean over the foreground classes in either mask " \
        "(counts: their sum)"
    _image_scale = _scale if _scale.worst is None else replace(
        _scale, worst=_class_by_class(_name, _scale.worst))
    register(Metric(_name, _label, _description, _quality(_name), _higher, (), _digits, _bounds, _short,
                    optional=True, scale=_image_scale))
    register_per_class(PerClass(f"{_name}_class", _label, _description, _quality_per_class(_name), _higher, _digits,
                                _bounds, optional=True, scale=_scale, first=1))
register(Metric("ece", "ECE", "Top-label expected calibration error over every pixel at model resolution: the "
                "pixel-weighted mean gap between confidence and accuracy per bin (confident background dominates "
                "it)", _quality("ece"), higher_is_better=False, optional=True, scale=Scale(reference=_CALIBRATION)))
register(Metric("ece_foreground", "ECE (foreground)", "Top-label ECE over the pixels where the truth or the "
                "prediction is foreground, at model resolution: the calibration where the defects are; n/a with no "
                "such pixel", _quality("ece_foreground"), higher_is_better=False, optional=True,
                short="ECE fg", scale=Scale(reference=_CALIBRATION)))
register(Metric("brier", "Brier score", "Mean over the pixels at model resolution of Σ_c (p_c − y_c)², y the "
                "one-hot truth (0 perfect, 2 worst)", _quality("brier"), higher_is_better=False, optional=True,
                bounds=(0.0, 2.0), scale=Scale(reference="Brier 1950, Verification of forecasts expressed in terms "
                                                         "of probability (Monthly Weather Review)")))
