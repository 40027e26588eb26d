"""`segscope eval --metrics LIST [--min-defect-area PX]` (and `report`): the options, and the summary lines
that follow the original script's."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from ..errors import SegScopeError
from ..metrics import catalogue
from .spec import COUNT_KEYS, DEFECT_KEYS, ImageQuality, MetricSpec

METRICS_HELP = ("QA metrics per image and per foreground class, comma-separated: hd95 (95th percentile Hausdorff "
                "distance, px), nsd or nsd@T (normalised surface Dice within T px, default 2), cldice (centreline "
                "Dice), defect_f1 (per-defect F1, precision, recall and counts at IoU >= 0.5), ece (expected "
                "calibration error, 15 bins), or all. Default: none (the original lines and the hard Dice)")


def _area(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of pixels, got {text!r}") from None


def add_metric_options(parser: argparse.ArgumentParser, default: str = "") -> None:
    parser.add_argument("--metrics", metavar="LIST", default=default, help=METRICS_HELP)
    parser.add_argument("--min-defect-area", type=_area, default=1, metavar="PX",
                        help="with --metrics defect_f1: connected components smaller than PX pixels are not "
                             "defects, in the prediction or in the truth (default 1: every component)")


def metric_spec(args: argparse.Namespace) -> MetricSpec:
    """The metrics asked for; --min-defect-area without defect_f1 is refused rather than ignored, and so are
    metrics with --tile (a whole slide is scored a band at a time, these need the whole mask)."""
    spec = MetricSpec.parse(args.metrics, args.min_defect_area)
    if spec and getattr(args, "tile", None) is not None:
        raise SegScopeError("--metrics: not available with --tile (whole slides are scored a band at a time); "
                            "evaluate ROIs without --tile, or drop --metrics")
    if args.min_defect_area != 1 and "defect_f1" not in spec.names:
        raise SegScopeError("--min-defect-area: only applies with --metrics defect_f1 (or all); add it or drop "
                            "the option")
    return spec


def value_text(key: str, value: float | None) -> str:
    """A metric's value as the catalogue shows it ("n/a" for None or NaN, "inf" for an infinite distance)."""
    return catalogue.lookup(key).text(value)


def line_text(spec: MetricSpec, quality: ImageQuality, class_names: Iterable[str] = ()) -> str:
    """The chosen metrics as they follow an image's line: `, hd95: 2.24, nsd@2: 0.9312, defect f1: 0.6667
    (tp 2 fp 1 fn 0), ...`, with each foreground class's values in brackets when there are several."""
    names = list(class_names)
    text = _values_text(spec, quality.values)
    if len(quality.per_class) > 1:
        for c, values in quality.per_class.items():
            text += f" [{names[c] if c < len(names) else f'class {c}'}{_values_text(spec, values)}]"
    return text


def _values_text(spec: MetricSpec, values: dict[str, float]) -> str:
    parts = []
    for name in spec.names:
        if name == "defect_f1":
            tp, fp, fn = (value_text(k, values[k]) for k in COUNT_KEYS)
            parts.append(f"defect f1: {value_text('defect_f1', values['defect_f1'])} (tp {tp} fp {fp} fn {fn})")
        elif name == "nsd":
            parts.append(f"nsd@{spec.nsd_tolerance:g}: {value_text('nsd', values['nsd'])}")
        elif name in values:
            parts.append(f"{name}: {value_text(name, values[name])}")
    return "".join(f", {p}" for p in parts)


def summary_lines(summary: Mapping[str, object]) -> list[str]:
    """The dataset lines of the chosen metrics in a run's summary (the catalogue's means and
    `QualitySummary.summary()`): means and medians, the defects summed, the ECE of all pixels; none when no
    metric was chosen."""
    lines = []
    spreads: Mapping[str, Mapping[str, float]] = summary.get("spread", {})  # type: ignore[assignment]
    for key, spread in spreads.items():
        if key in DEFECT_KEYS[1:]:  # their sums follow on the defects line
            continue
        label = f"nsd@{summary['nsd_tolerance_px']:g}" if key == "nsd" else key
        infinite = spread["infinite"]
        note = f" ({infinite} of {spread['images']} infinite: only one mask has the class)" if infinite else ""
        mean = summary.get(key)
        lines.append(f"========== {label}: mean {value_text(key, mean if isinstance(mean, float) else None)}, "
                     f"median {value_text(key, spread['median'])}{note}")
    defects = summary.get("defects")
    if isinstance(defects, Mapping):
        lines.append(f"========== defects: f1 {value_text('defect_f1', defects['f1'])}, precision "
                     f"{defects['precision']:.4f}, recall {defects['recall']:.4f} (tp {defects['tp']}, fp "
                     f"{defects['fp']}, fn {defects['fn']} over all images)")
    reliability = summary.get("reliability")
    if isinstance(reliability, Mapping):
        lines.append(f"========== ece of all pixels: {value_text('ece', float(reliability['ece']))} "
                     f"({reliability['pixels']:,} pixels, 15 bins)")
    return lines
