"""The metrics a reviewer picks (`segscope eval --metrics hd95,nsd@2,cldice,defect_f1,ece`), per image and
per foreground class, and their dataset summary.

Boundary, topology and defect metrics score the predicted classes against the truth at ROI resolution (the
mask's own scale, as hard Dice does, `core.metrics.scores.scored_labels`): the foreground (every class >= 1 as one)
and, with several foreground classes, each class one-vs-rest. The calibration (ECE, foreground ECE,
Brier) scores the probabilities at model resolution against the truth resampled as soft Dice resamples it
(`core.metrics.scores.labels_at_model_scale`); it is one set of numbers per image (the top label is over all
classes).
"""

from __future__ import annotations

import math

import numpy as np

from ..dataset.masks import histogram
from ..metrics.scores import ImageMetrics, labels_at_model_scale, scored_labels
from ..result import InferenceResult
from .calibration import Calibration
from .defects import DefectMatch, match_defects
from .spec import CALIBRATION_KEYS, COUNT_KEYS, ImageQuality, MetricSpec
from .surface import robust_hausdorff, surface_dice, surface_distances
from .topology import cldice

#: How the calibration reads the truth at the probabilities' resolution, as documents state it.
TRUTH_RESAMPLING = ("the truth's ROI crop resampled to the model's output size as soft Dice does: binary masks "
                    "bilinear on 0/255 then > 127 (main.py's /255 > 0.5), class indices nearest neighbour")


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
        defects = match_defects(truth, prediction, spec.min_defect_area, spec.defect_iou)
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
    for key in (k for k in spec.keys() if k not in CALIBRATION_KEYS):
        if key in COUNT_KEYS:
            values[key] = sum(per_class[c][key] for c in per_class)  # an int, as each class's count
        else:
            found = [per_class[c][key] for c in present if not math.isnan(per_class[c][key])]
            values[key] = float(np.mean(found)) if found else math.nan
    calibration = None
    if "ece" in spec.names:
        height, width, classes = result.probabilities.shape
        labels = labels_at_model_scale(roi_mask, height, width, classes)
        calibration = Calibration.of(result.probabilities, labels, result.argmax)
        values.update(calibration.values())
    return ImageQuality(values, per_class, defects, calibration, spec, math.hypot(*truth.shape))


class QualitySummary:
    """What the chosen metrics add to a run's summary beside the catalogue's aggregates (`core.metrics.catalogue.
    means`): their options, the defect counts summed over the images with masks (with the F1, precision and recall
    of the sums) and the calibration of all their pixels together (reliability diagrams, ECE, Brier)."""

    def __init__(self, spec: MetricSpec):
        self.spec = spec
        self.counts = dict.fromkeys(COUNT_KEYS, 0)
        self.calibration = Calibration.empty()

    def add(self, metrics: ImageMetrics | None) -> None:
        quality = metrics.quality if metrics is not None else None
        if quality is None:
            return
        for key in self.counts:
            self.counts[key] += int(quality.values.get(key, 0))
        if quality.calibration is not None:
            self.calibration = self.calibration + quality.calibration

    def summary(self) -> dict[str, object]:
        """Keys for the run's summary beside the catalogue's means (none when no metric was chosen)."""
        if not self.spec:
            return {}
        document: dict[str, object] = self.spec.options()
        if "defect_f1" in self.spec.names:
            counts = {key.removeprefix("defect_"): value for key, value in self.counts.items()}
            document["defects"] = {**counts, **DefectMatch.ratios(counts["tp"], counts["fp"], counts["fn"],
                                                                   any(counts.values()))}
        if "ece" in self.spec.names:
            pooled = self.calibration
            document["calibration"] = {**pooled.values(), "pixels": pooled.pixels,
                                       "truth_resampling": TRUTH_RESAMPLING}
            document["reliability"] = pooled.reliability.as_dict()
            document["reliability_foreground"] = pooled.foreground.as_dict()
        return document
