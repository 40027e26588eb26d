"""`segscope eval --metrics LIST [--min-defect-area PX]` (and `report`): the options, and the summary lines
that follow the original script's."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from ..errors import SegScopeError
from ..metrics import catalogue
from ..wording import class_name
from .defects import MATCH_IOU
from .spec import CALIBRATION_KEYS, COUNT_KEYS, ImageQuality, MetricSpec

#: What --metrics computes by default, per command.
METRICS_HELP = ("QA metrics per image and per foreground class, comma-separated: hd95 (95th percentile Hausdorff "
                "distance, px), nsd or nsd@T (normalised surface Dice within T px, default 2), cldice (centreline "
                "Dice), defect_f1 (per-defect F1, precision, recall, counts, fragments and merges, matched at "
                "--defect-iou), ece (expected calibration error of all pixels and of the foreground, 15 bins, and "
                "the Brier score), or all. Default: {default}")


def _area(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of pixels, got {text!r}") from None


def _iou(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IoU in (0, 1], got {text!r}") from None


def add_metric_options(parser: argparse.ArgumentParser, default: str = "") -> None:
    shown = f"{default} (every one above)" if default == "all" else "none (the original lines and the hard Dice)"
    parser.add_argument("--metrics", metavar="LIST", default=default, help=METRICS_HELP.format(default=shown))
    parser.add_argument("--min-defect-area", type=_area, default=1, metavar="PX",
                        help="with --metrics defect_f1: connected components smaller than PX pixels are not "
                             "defects, in the prediction or in the truth (default 1: every component)")
    parser.add_argument("--defect-iou", type=_iou, default=MATCH_IOU, metavar="T",
                        help=f"with --metrics defect_f1: a predicted and a true defect match at IoU >= T (default "
                             f"{MATCH_IOU:g}); an unmatched predicted defect lying mostly inside a true one is a "
                             "fragment, not a false alarm")


def metric_spec(args: argparse.Namespace) -> MetricSpec:
    """The metrics asked for; --min-defect-area without defect_f1 is refused rather than ignored, and so are
    metrics with --tile (a whole slide is scored a band at a time, these need the whole mask)."""
    spec = MetricSpec.parse(args.metrics, args.min_defect_area, args.defect_iou)
    if spec and getattr(args, "tile", None) is not None:
        raise SegScopeError("--metrics: not available with --tile (whole slides are scored a band at a time); "
                            "evaluate ROIs without --tile, or drop --metrics")
    for given, option in ((args.min_defect_area != 1, "--min-defect-area"), (args.defect_iou != MATCH_IOU,
                                                                          "--defect-iou")):
        if given and "defect_f1" not in spec.names:
            raise SegScopeError(f"{option}: only applies with --metrics defect_f1 (or all); add it or drop the option")
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
            text += f" [{class_name(names, c)}{_values_text(spec, values)}]"
    return text


def _values_text(spec: MetricSpec, values: dict[str, float]) -> str:
    parts = []
    for name in spec.names:
        if name == "defect_f1":
            tp, fp, fn, split, merged = (value_text(k, values[k]) for k in COUNT_KEYS)
            parts.append(f"defect f1: {value_text('defect_f1', values['defect_f1'])} (tp {tp} fp {fp} fn {fn} "
                         f"split {split} merged {merged})")
        elif name == "nsd":
            parts.append(f"nsd@{spec.nsd_tolerance:g}: {value_text('nsd', values['nsd'])}")
        elif name == "ece":
            parts += [f"{key.replace('_foreground', ' fg')}: {value_text(key, values[key])}" for key in CALIBRATION_KEYS
                      if key in values]
        elif name in values:
            parts.append(f"{name}: {value_text(name, values[name])}")
    return "".join(f", {p}" for p in parts)


def aggregate_text(key: str, found: Mapping[str, object]) -> str:
    """An `Aggregate.as_dict()` in words: "mean 3.21, median 2.00 over 7 images (1 inf, 1 n/a left out); with the
    worst case (inf replaced by ...): mean 40.1, median 2.24"."""
    finite, infinite, na = (int(found[k]) for k in ("finite", "infinite", "na"))  # type: ignore[call-overload]
    worst = found.get("worst_case")
    has_worst = isinstance(worst, Mapping)  # a metric that can be inf (HD95): its inf count is always said
    left = ", ".join(f"{n} {what}" for n, what, said in ((infinite, "inf", has_worst), (na, "n/a", False))
                     if n or said)
    text = (f"mean {value_text(key, found['mean'])}, median {value_text(key, found['median'])} over {finite} "  # type: ignore[arg-type]
            f"image{'s' if finite != 1 else ''}" + (f" ({left} left out)" if left else ""))
    if has_worst and infinite:
        text += (f"; with the worst case ({worst['substitute']}): mean {value_text(key, worst['mean'])}, median "  # type: ignore[index]
                 f"{value_text(key, worst['median'])}")  # type: ignore[index]
    return text


def summary_lines(summary: Mapping[str, object]) -> list[str]:
    """The dataset lines of the chosen metrics in a run's summary (the catalogue's aggregates and
    `QualitySummary.summary()`): means and medians with their n/a and inf counts, the defects summed, the
    calibration of all pixels; none when no metric was chosen."""
    lines = []
    aggregates: Mapping[str, Mapping[str, object]] = summary.get("aggregates", {})  # type: ignore[assignment]
    for key in MetricSpec.parse(",".join(summary.get("metrics", ()))).keys():  # type: ignore[arg-type]
        if key in COUNT_KEYS or key not in aggregates or key in CALIBRATION_KEYS:
            continue  # counts follow on the defects line, the calibration on its own
        label = f"nsd@{summary['nsd_tolerance_px']:g}" if key == "nsd" else key
        lines.append(f"========== {label}: {aggregate_text(key, aggregates[key])}")
    defects = summary.get("defects")
    if isinstance(defects, Mapping):
        lines.append(f"========== defects: f1 {value_text('defect_f1', defects['f1'])}, precision "
                     f"{value_text('defect_precision', defects['precision'])}, recall "
                     f"{value_text('defect_recall', defects['recall'])} (tp {defects['tp']}, fp {defects['fp']}, fn "
                     f"{defects['fn']} of which {defects['merged']} merged, {defects['split']} fragments; over all "
                     f"images, matched at IoU >= {summary['defect_iou']:g})")
    calibration = summary.get("calibration")
    if isinstance(calibration, Mapping):
        lines.append(f"========== calibration pooled over all images' pixels (not a mean of the images' values): ece "
                     f"{value_text('ece', calibration['ece'])}, ece (foreground) "
                     f"{value_text('ece', calibration['ece_foreground'])}, brier "
                     f"{value_text('brier', calibration['brier'])} ({calibration['pixels']:,} pixels, 15 bins)")
    return lines
