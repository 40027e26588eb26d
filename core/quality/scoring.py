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
from ..masks import histogram
from ..metrics import ImageMetrics, labels_at_model_scale, scored_labels
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
#: Of those, the counts (summed over classes and images, not averaged).
COUNT_KEYS = DEFECT_KEYS[3:]
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
    """One image's chosen metrics: `per_class` (class index >= 1 -> its values, one-vs-rest), `values` for the
    image (each the mean over the foreground classes in the prediction or the truth, NaN when there is none;
    the defect counts summed over the classes; ECE over all pixels), and what the viewer shows them from:
    each class's defects and the reliability bins."""

    values: dict[str, float]
    per_class: dict[int, dict[str, float]]
    defects: dict[int, DefectMatch] = field(default_factory=dict)
    reliability: Reliability | None = None
    spec: MetricSpec = MetricSpec()  # what was asked for


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
    per_class: dict[int, dict[str, float]] = {}
    defects: dict[int, DefectMatch] = {}
    for index in range(1, result.num_classes):
        per_class[index], match = mask_metrics(spec, truth == index, prediction == index)
        if match is not None:
            defects[index] = match
    counts = histogram(truth) + histogram(prediction)
    present = [c for c in per_class if counts[c]]  # the classes in the prediction or the truth
    values: dict[str, float] = {}
    for key in (k for k in spec.keys() if k != "ece"):
        if key in COUNT_KEYS:
            values[key] = sum(per_class[c][key] for c in per_class)  # an int, as each class's count
        else:
            found = [per_class[c][key] for c in present if not math.isnan(per_class[c][key])]
            values[key] = float(np.mean(found)) if found else math.nan
    reliability = None
    if "ece" in spec.names:
        height, width, classes = result.probabilities.shape
        reliability = Reliability.of(result.probabilities, labels_at_model_scale(roi_mask, height, width, classes))
        values["ece"] = reliability.ece()
    return ImageQuality(values, per_class, defects, reliability, spec)


class QualitySummary:
    """What the catalogue's dataset means leave out of the chosen metrics, over the images with masks: each
    metric's median and how many of its values are infinite, the defect counts summed (with the F1, precision
    and recall of the sums) and the reliability diagram of all their pixels together."""

    def __init__(self, spec: MetricSpec):
        self.spec = spec
        self.values: dict[str, list[float]] = {key: [] for key in spec.keys()}
        self.reliability = Reliability.empty()

    def add(self, metrics: ImageMetrics | None) -> None:
        quality = metrics.quality if metrics is not None else None
        if quality is None:
            return
        for key, values in self.values.items():
            if not math.isnan(quality.values[key]):  # n/a: left out, as from the means
                values.append(quality.values[key])
        if quality.reliability is not None:
            self.reliability = self.reliability + quality.reliability

    def summary(self) -> dict[str, object]:
        """Keys for the run's summary beside the catalogue's means (none when no metric was chosen)."""
        if not self.spec:
            return {}
        document: dict[str, object] = {**self.spec.options(), "spread": {
            key: {"median": float(np.median(v)) if v else math.nan, "images": len(v),
                  "infinite": sum(1 for x in v if math.isinf(x))}
            for key, v in self.values.items() if key not in COUNT_KEYS}}
        if "defect_f1" in self.spec.names:
            tp, fp, fn = (int(sum(self.values[key])) for key in COUNT_KEYS)
            document["defects"] = {"tp": tp, "fp": fp, "fn": fn, **DefectMatch.ratios(tp, fp, fn)}
        if "ece" in self.spec.names:
            document["reliability"] = self.reliability.as_dict()
        return document
