"""Which QA metrics a reviewer asked for (`segscope eval --metrics hd95,nsd@2,...`, `MetricSpec`) and one
image's values of them (`ImageQuality`, carried by `core.metrics.scores.ImageMetrics`); `core.quality.scoring` computes
them. Nothing here imports `core.metrics.scores`, which names `ImageQuality`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..errors import SegScopeError
from .calibration import Calibration, Reliability
from .defects import MATCH_IOU, DefectMatch

#: What `--metrics` accepts, in the order results are shown.
METRIC_NAMES = ("hd95", "nsd", "cldice", "defect_f1", "ece")
DEFAULT_NSD_TOLERANCE = 2.0
#: Keys each metric name adds to an image's values.
DEFECT_KEYS = ("defect_f1", "defect_precision", "defect_recall", "defect_tp", "defect_fp", "defect_fn", "defect_split",
               "defect_merged")
#: Of those, the counts (summed over classes and images, not averaged).
COUNT_KEYS = DEFECT_KEYS[3:]
#: What `ece` computes: the calibration of the whole image (one number per image, not per class).
CALIBRATION_KEYS = ("ece", "ece_foreground", "brier")
_KEYS = {"hd95": ("hd95",), "nsd": ("nsd",), "cldice": ("cldice",), "defect_f1": DEFECT_KEYS,
         "ece": CALIBRATION_KEYS}
_ALIASES = {"defects": "defect_f1", "calibration": "ece", "brier": "ece"}
_NSD = re.compile(r"nsd(?:@(.*))?")


@dataclass(frozen=True)
class MetricSpec:
    """Which metrics to compute, with their parameters."""

    names: tuple[str, ...] = ()  # from METRIC_NAMES, in that order
    nsd_tolerance: float = DEFAULT_NSD_TOLERANCE  # pixels
    min_defect_area: int = 1  # pixels; smaller components are not defects
    defect_iou: float = MATCH_IOU  # a predicted and a true defect match at this IoU or above

    @classmethod
    def parse(cls, text: str, min_defect_area: int = 1, defect_iou: float = MATCH_IOU) -> MetricSpec:
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
                                    "default 2), cldice, defect_f1, ece (with the foreground ECE and the Brier "
                                    "score), or all")
        if min_defect_area < 1:
            raise SegScopeError(f"--min-defect-area: must be at least 1 pixel, got {min_defect_area}")
        if not 0.0 < defect_iou <= 1.0:
            raise SegScopeError(f"--defect-iou: must be in (0, 1], got {defect_iou:g}")
        return cls(tuple(n for n in METRIC_NAMES if n in names), tolerance, min_defect_area, defect_iou)

    def __bool__(self) -> bool:
        return bool(self.names)

    def keys(self) -> list[str]:
        """The value keys an image gets, in display order."""
        return [key for name in self.names for key in _KEYS[name]]

    def options(self) -> dict[str, object]:
        return {"metrics": list(self.names), "nsd_tolerance_px": self.nsd_tolerance,
                "min_defect_area_px": self.min_defect_area, "defect_iou": self.defect_iou}


#: No QA metric, Dice and IoU only: one object for every score that asked for none (a session keeps a score key per
#: image, and each object more is one more for the garbage collector's full walks).
NO_QA_METRICS = MetricSpec()


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
    the defect counts summed over the classes; the calibration over the image's pixels), and what the viewer
    shows them from: each class's defects and the reliability bins."""

    values: dict[str, float]
    per_class: dict[int, dict[str, float]]
    defects: dict[int, DefectMatch] = field(default_factory=dict)
    calibration: Calibration | None = None
    spec: MetricSpec = NO_QA_METRICS  # what was asked for
    diagonal: float = 0.0  # of the scored ROI at mask scale, px: the worst HD95 (`core.metrics.aggregate`)

    @property
    def reliability(self) -> Reliability | None:
        """The reliability bins of all the image's pixels (None when calibration was not asked for)."""
        return self.calibration.reliability if self.calibration is not None else None
