"""`segscope report --dataset D [--pipeline P] [--metrics ...] --out report.html`: evaluate a dataset as `eval`
does and write one self-contained HTML page a reviewer can mail (see `core/report`)."""

from __future__ import annotations

import argparse
import importlib.util
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from ..backends.base import Backend
from ..dataset.dataset import Dataset
from ..errors import SegScopeError
from ..evaluate import evaluate_dataset
from ..export.files import refuse_existing
from ..export.provenance import segscope_version, sha256_file
from ..files.fileio import atomic_write_bytes
from ..metrics import catalogue
from ..quality.options import add_metric_options, metric_spec
from ..quality.spec import DEFECT_KEYS, MetricSpec
from ..report.collect import ReportData
from ..report.html import metric_title, render
from ..roi import Roi
from ..stream.input import StreamInput
from ..stream.source import chosen_source
from .cache import add_cache_options, apply_cache_options
from .options import add_backend_options, open_eval_backend, refuse_remote_only_options
from .output import Progress


def _worst(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected 0 to 100 images, got {text!r}")
    return value


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("report", help="evaluate a dataset into one self-contained HTML report")
    parser.add_argument("--dataset", type=Path, required=True, help="DIR/<id>/image.png [+ mask.png], or a flat folder")
    parser.add_argument("--out", type=Path, required=True, metavar="REPORT.html", help="the HTML file to write")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    parser.add_argument("--roi", help="x0,y0,x1,y1 for every image (default: as eval)")
    add_metric_options(parser, default="all")
    parser.add_argument("--rank", default=catalogue.DEFAULT_RANKING, metavar="METRIC",
                        help="the metric the worst images are picked by: any of the catalogue's (soft_dice, "
                             f"dice_1, hd95, defect_recall, ...; default {catalogue.DEFAULT_RANKING})")
    parser.add_argument("--worst", type=_worst, default=8, metavar="N",
                        help="show the N worst images as image | heatmap | mask | truth (default 8)")
    # What `eval` has and a report does not: one stream, no cluster.
    parser.set_defaults(devices=None, cluster=None, ship_images=False, task_resources=None)
    add_backend_options(parser)
    add_cache_options(parser)
    parser.set_defaults(handler=run)


def _check(args: argparse.Namespace, spec: MetricSpec) -> catalogue.Metric:
    """The ranking metric, once every option is known to be usable."""
    if importlib.util.find_spec("matplotlib") is None:
        raise SegScopeError('report: its plots need matplotlib: pip install "segscope[report]"')
    rank = catalogue.lookup(args.rank)  # SegScopeError lists the names
    if rank.optional and rank.name.split("_class_")[0] not in spec.keys():
        raise SegScopeError(f"--rank {args.rank}: not among the metrics computed; add it to --metrics")
    refuse_existing([args.out], args.overwrite)
    if not args.out.parent.is_dir():
        raise SegScopeError(f"{args.out.parent}: no such folder for --out; create it first")
    return rank


def _provenance(args: argparse.Namespace, dataset: Dataset, backend: Backend, spec: MetricSpec) -> dict[str, str]:
    details = backend.capabilities.details
    model = details.get("model", "")
    facts = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "SegScope": segscope_version(),
        "dataset": str(dataset.root.resolve()),
        "pipeline or model card": str(chosen_source(args).resolve()),
        "backend": f"{backend.capabilities.name}: {backend.capabilities.device}",
        "model": model,
        "model SHA-256": sha256_file(Path(model)) if model and Path(model).is_file() else "n/a (not a local file)",
        "classes": ", ".join(backend.capabilities.class_names),
        "ROI": args.roi or "each image's own (as eval picks it; listed per image below)",
        "metrics": ", ".join(spec.names) or "none",
        "Python": platform.python_version(),
    }
    if "nsd" in spec.names:
        facts["NSD tolerance"] = f"{spec.nsd_tolerance:g} px"
    if "defect_f1" in spec.names:
        facts["defects"] = f"8-connected components of at least {spec.min_defect_area} px, matched at IoU >= 0.5"
    return facts


def run(args: argparse.Namespace, out: TextIO) -> int:
    refuse_remote_only_options(args)
    apply_cache_options(args)
    spec = metric_spec(args)
    rank = _check(args, spec)
    roi = Roi.parse(args.roi) if args.roi is not None else None
    dataset = Dataset.open(args.dataset, max_pixels=args.max_pixels)
    progress = Progress(len(dataset))
    with open_eval_backend(args) as backend, ReportData(dataset, spec, backend.capabilities.class_names, rank,
                                                args.worst) as data:
        stream = StreamInput.of(chosen_source(args))  # the ROI each image's stream gets, as eval's
        for done, evaluation in enumerate(evaluate_dataset(backend, dataset, roi, stream=stream, quality=spec), 1):
            data.add(evaluation)
            progress.update(done, evaluation.item.id)
        progress.clear()
        data.finish()
        provenance = _provenance(args, dataset, backend, spec)
    from ..report import plots  # matplotlib, only once it is known to be there

    summary = {**data.summary.means(), **data.quality.summary()}
    scored = [e for e in data.entries if e.metrics is not None]
    keys = ["foreground_dice", *(k for k in spec.keys() if k not in DEFECT_KEYS[1:])]
    series = {k: [v for e in scored if (v := e.value(k)) is not None] for k in keys}
    labels = {k: metric_title(spec, k) for k in keys}
    figures = {"distributions": plots.distributions(series, labels)}
    if "ece" in spec.names:
        figures["reliability"] = plots.reliability_diagram(data.quality.reliability)
    page = render(data, summary, provenance, figures).encode()
    atomic_write_bytes(args.out, page, overwrite=args.overwrite)
    print(f"wrote {args.out} ({len(page) / 1e6:.1f} MB): {len(data.entries)} images, {len(scored)} with masks, "
          f"the {len(data.worst_entries())} worst by {args.rank}", file=out)
    return 0
