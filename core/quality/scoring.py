"""The metrics a reviewer picks (`segscope eval --metrics hd95,nsd@2,cldice,defect_f1,ece`), per image and
per foreground class, and their dataset summary.

Boundary, topology and defect metrics score the predicted classes against the truth at ROI resolution (the
mask's own scale, as hard Dice does, `core.metrics.scored_labels`): the foreground (every class >= 1 as one)
and, with several foreground classes, each class one-vs-rest. ECE scores the probabilities at model
resolution against the truth resized as soft Dice resizes it (`core.metrics.labels_at_model_scale`); it is
one number per image (the top label is over all classes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import SegScopeError
from ..metrics import labels_at_model_scale, scored_labels
from ..result import InferenceResult
from .calibration import Reliability
from .defects import DefectMatch, match_defects
from .surface import robust_hausdorff, surface_dice, surface_distances
from .topology import cldice

#: What `--metrics` accepts, in the order results are shown.
METRIC_NAMES = ("hd95", "nsd", "cldice", "defect_f1", "ece")
DEFAULT_NSD_TOLERANCE = 2.0
#: Keys each metric name adds to an image's values.
DEFECT_KEYS = ("defect_f1", "defect_precision", "defect_recall", "defect_tp", "defect_fp", "defect_fn")
_KEYS = {"hd95": ("hd95",), "nsd": ("nsd",), "cldice": ("cldice",), "defect_f1": DEFECT_KEYS, "ece": ("ece",)}
_ALIASES = {"defects": "defect_f1"}
_NSD = re.compile(r"nsd(?:@(.*))?")


@dataclass(frozen=True)
class MetricSpec:
    """Which metrics to compute, with their parameters."""

    names: tuple[str, ...] = ()  # from METRIC_NAMES, in that order
    nsd_tolerance: float = DEFAULT_NSD_TOLERANCE  # pixels
    min_defect_area: int = 1  # pixels; smaller components are not defects

    @classmethod
    def parse(cls, text: str, min_defect_area: int = 1) -> MetricSpec:
        """`hd95,nsd@3,cldice,defect_f1,ece` or `all`; SegScopeError naming the bad part."""
        names: set[str] = set()
        tolerance = DEFAULT_NSD_TOLERANCE
        for part in (p.strip().lower() for p in text.split(",") if p.strip()):
            nsd = _NSD.fullmatch(part)
            if part == "all":
                names.update(METRIC_NAMES)
            elif nsd is not None:
                tolerance = _tolerance(nsd.group(1)) if nsd.group(1) is not None else tolerance
                names.add("nsd")
            elif _ALIASES.get(part, part) in METRIC_NAMES:
                names.add(_ALIASES.get(part, part))
            else:
                raise SegScopeError(f"--metrics: unknown metric {part!r}; choose from hd95, nsd or nsd@T (T pixels, "
                                    "default 2), cldice, defect_f1, ece, or all")
        if min_defect_area < 1:
            raise SegScopeError(f"--min-defect-area: must be at least 1 pixel, got {min_defect_area}")
        return cls(tuple(n for n in METRIC_NAMES if n in names), tolerance, min_defect_area)

    def __bool__(self) -> bool:
        return bool(self.names)

    def keys(self) -> list[str]:
        """The value keys an image gets, in display order."""
        return [key for name in self.names for key in _KEYS[name]]

    def options(self) -> dict[str, object]:
        return {"metrics": list(self.names), "nsd_tolerance_px": self.nsd_tolerance,
                "min_defect_area_px": self.min_defect_area}


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise SegScopeError(f"--metrics: nsd@{text}: the tolerance must be a number of pixels >= 0, e.g. nsd@2")
    return value


@dataclass(frozen=True)
class ImageQuality:
    """One image's chosen metrics: `values` of the foreground, `per_class` with several foreground classes,
    and what they were computed from for the viewer (the foreground's defects, the reliability bins)."""

    values: dict[str, float]
    per_class: dict[int, dict[str, float]] = field(default_factory=dict)
    defects: DefectMatch | None = None
    reliability: Reliability | None = None

    def as_dict(self) -> dict[str, object]:
        """The `"metrics"` entry of an image's row (JSON, metrics.csv)."""
        row: dict[str, object] = dict(self.values)
        if self.per_class:
            row["per_class"] = {str(c): values for c, values in self.per_class.items()}
        return row


def mask_metrics(spec: MetricSpec, truth: np.ndarray, prediction: np.ndarray) -> tuple[dict[str, float],
                                                                                       DefectMatch | None]:
    """The chosen boundary, topology and defect metrics of two bool masks of one shape."""
    values: dict[str, float] = {}
    if "hd95" in spec.names or "nsd" in spec.names:
        distances = surface_distances(truth, prediction)
        if "hd95" in spec.names:
            values["hd95"] = robust_hausdorff(distances, 95.0)
        if "nsd" in spec.names:
            values["nsd"] = surface_dice(distances, spec.nsd_tolerance)
    if "cldice" in spec.names:
        values["cldice"] = cldice(truth, prediction)
    defects = None
    if "defect_f1" in spec.names:
        defects = match_defects(truth, prediction, spec.min_defect_area)
        values.update(defects.scores())
    return values, defects


def image_quality(spec: MetricSpec, result: InferenceResult, roi_mask: np.ndarray) -> ImageQuality:
    """The chosen metrics of one result against the ground truth cropped to its ROI (`truth_at_roi`)."""
    prediction, truth = scored_labels(result, roi_mask)
    values, defects = mask_metrics(spec, truth > 0, prediction > 0)
    per_class = {}
    if result.num_classes > 2:
        per_class = {c: mask_metrics(spec, truth == c, prediction == c)[0] for c in range(1, result.num_classes)}
    reliability = None
    if "ece" in spec.names:
        height, width, classes = result.probabilities.shape
        reliability = Reliability.of(result.probabilities, labels_at_model_scale(roi_mask, height, width, classes))
        values["ece"] = reliability.ece()
    return ImageQuality(values, per_class, defects, reliability)


def _spread(values: list[float]) -> dict[str, object]:
    finite = [v for v in values if math.isfinite(v)]
    return {"mean": float(np.mean(values)) if values else math.nan,
            "median": float(np.median(values)) if values else math.nan,
            "images": len(values), "infinite": len(values) - len(finite)}


class QualitySummary:
    """Dataset means and medians of the chosen metrics over the images with masks, the defect counts summed
    over them (and F1 of the sums) and the reliability diagram of all their pixels together."""

    def __init__(self, spec: MetricSpec):
        self.spec = spec
        self.values: dict[str, list[float]] = {key: [] for key in spec.keys()}
        self.reliability = Reliability.empty()

    def add(self, quality: ImageQuality | None) -> None:
        if quality is None:
            return
        for key in self.values:
            self.values[key].append(quality.values[key])
        if quality.reliability is not None:
            self.reliability = self.reliability + quality.reliability

    def summary(self) -> dict[str, object]:
        """The `"quality"` entry of the run's summary (empty when no metric was chosen)."""
        if not self.spec:
            return {}
        document: dict[str, object] = {**self.spec.options(),
                                       "metrics": {key: _spread(v) for key, v in self.values.items()
                                                   if key not in DEFECT_KEYS[3:]}}
        if "defect_f1" in self.spec.names:
            tp, fp, fn = (int(sum(self.values[key])) for key in DEFECT_KEYS[3:])
            document["defects"] = {"tp": tp, "fp": fp, "fn": fn, **_pooled(tp, fp, fn)}
        if "ece" in self.spec.names:
            document["reliability"] = self.reliability.as_dict()
        return document


def _pooled(tp: int, fp: int, fn: int) -> dict[str, float]:
    def ratio(a: int, b: int) -> float:
        return 1.0 if b == 0 else a / b

    return {"f1": ratio(2 * tp, 2 * tp + fp + fn), "precision": ratio(tp, tp + fp), "recall": ratio(tp, tp + fn)}

