"""The metrics a reviewer picks (`segscope eval --metrics hd95,nsd@2,cldice,defect_f1,ece`), per image and
per foreground class, and their dataset summary.

Boundary, topology and defect metrics score the predicted classes against the truth at ROI resolution (the
mask's own scale, as hard Dice does, `core.metrics.scores.scored_labels`): the foreground (every class >= 1 as one)
and, with several foreground classes, each class one-vs-rest. ECE scores the probabilities at model
resolution against the truth resized as soft Dice resizes it (`core.metrics.scores.labels_at_model_scale`); it is
one number per image (the top label is over all classes).
"""

from __future__ import annotations

import math

import numpy as np

from ..dataset.masks import histogram
from ..metrics.scores import ImageMetrics, labels_at_model_scale, scored_labels
from ..result import InferenceResult
from .calibration import Reliability
from .defects import DefectMatch, match_defects
from .spec import COUNT_KEYS, ImageQuality, MetricSpec
from .surface import robust_hausdorff, surface_dice, surface_distances
from .topology import cldice


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
