"""`segscope report`'s run (its options: `report.py`): evaluate the dataset as `eval` does, then render and write
the page."""

from __future__ import annotations

import argparse
import importlib.util
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from ..backends.base import Backend
from ..dataset.dataset import Dataset
from ..dataset.preflight import check_sizes_up_front, prepare_truths
from ..dataset.truth import choice_note
from ..errors import SegScopeError
from ..evaluate import evaluate_dataset, evaluation_row
from ..export.files import MetricRows, refuse_existing
from ..export.provenance import segscope_version, sha256_file
from ..files.fileio import atomic_write_bytes, refuse_folder
from ..metrics import catalogue
from ..quality.options import metric_spec
from ..quality.spec import COUNT_KEYS, MetricSpec
from ..report.collect import ReportData
from ..report.html import metric_title, render
from ..roi import Roi
from ..stream.input import StreamInput
from ..stream.source import chosen_source
from ..wording import plural
from .cache import apply_cache_options
from .eval_driver import open_dataset, open_eval_backend
from .options import refuse_remote_only_options
from .output import Progress


def table_path(out: Path) -> Path:
    """Where the report's CSV of every image goes: beside the page, its name's (`report.html` -> `report.csv`)."""
    return out.with_suffix(".csv")


def _check(args: argparse.Namespace, spec: MetricSpec) -> catalogue.Metric:
    """The ranking metric, once every option is known to be usable."""
    if importlib.util.find_spec("matplotlib") is None:
        raise SegScopeError('report: its plots need matplotlib: pip install "segscope[report]"')
    rank = catalogue.lookup(args.rank)  # SegScopeError lists the names
    if rank.optional and rank.name.split("_class_")[0] not in spec.keys():
        raise SegScopeError(f"--rank {args.rank}: not among the metrics computed; add it to --metrics")
    if table_path(args.out) == args.out:
        raise SegScopeError(f"--out {args.out}: the CSV of every image goes beside the page under its name with "
                            ".csv; name the page .html")
    refuse_folder(args.out, "--out")
    if table_path(args.out).is_dir():
        raise SegScopeError(f"--out {args.out}: the CSV of every image goes to {table_path(args.out)}, which is a "
                            "folder; move it or name the page otherwise")
    refuse_existing([args.out, table_path(args.out)], args.overwrite)
    if not args.out.parent.is_dir():
        raise SegScopeError(f"{args.out.parent}: no such folder for --out; create it first")
    return rank


def _provenance(args: argparse.Namespace, dataset: Dataset, backend: Backend, spec: MetricSpec) -> dict[str, str]:
    """What the run was, file names only unless --absolute-paths."""
    def named(path: Path) -> str:
        return str(path.resolve()) if args.absolute_paths else path.name

    details = backend.capabilities.details
    model = details.get("model", "")
    facts = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "SegScope": segscope_version(),
        "dataset": named(dataset.root),
        "truth": f"--truth {dataset.truth_choice}: " + (choice_note(dataset.items, dataset.truth_choice)
                                                        or "every image's original mask"),
        "pipeline or model card": named(chosen_source(args)),
        "backend": f"{backend.capabilities.name}: {backend.capabilities.device}",
        "model": named(Path(model)) if model else "",
        "model SHA-256": sha256_file(Path(model)) if model and Path(model).is_file() else "n/a (not a local file)",
        "classes": ", ".join(backend.capabilities.class_names),
        "ROI": args.roi or "each image's own (as eval picks it; listed per image below)",
        "metrics": ", ".join(spec.names) or "none",
        "Python": platform.python_version(),
    }
    if "nsd" in spec.names:
        facts["NSD tolerance"] = f"{spec.nsd_tolerance:g} px"
    if "defect_f1" in spec.names:
        facts["defects"] = (f"8-connected components of at least {spec.min_defect_area} px, matched at IoU >= "
                            f"{spec.defect_iou:g}")
    return facts


def write_report(args: argparse.Namespace, out: TextIO) -> int:
    refuse_remote_only_options(args)
    apply_cache_options(args)
    spec = metric_spec(args)
    rank = _check(args, spec)
    roi = Roi.parse(args.roi) if args.roi is not None else None
    dataset = open_dataset(args)
    progress = Progress(len(dataset))
    check_sizes_up_front(dataset)
    table = table_path(args.out)
    with open_eval_backend(args) as backend, ReportData(dataset, spec, backend.capabilities.class_names, rank,
                                                args.worst, args.rows) as data, MetricRows(args.out.parent) as rows:
        prepare_truths(dataset, backend.capabilities.class_names, backend.capabilities.details)  # before any result
        stream = StreamInput.of(chosen_source(args))  # the ROI each image's stream gets, as eval's
        for done, evaluation in enumerate(evaluate_dataset(backend, dataset, roi, stream=stream, quality=spec), 1):
            data.add(evaluation)
            result = evaluation.result
            rows.add(evaluation_row(evaluation.item, result.roi, evaluation.metrics, result.timings, result.roi_note,
                                    evaluation.truth, dataset.root))  # as eval's rows
            progress.update(done, evaluation.item.id)
        progress.clear()
        data.finish()
        provenance = _provenance(args, dataset, backend, spec)
        atomic_write_bytes(table, rows.write_csv, overwrite=args.overwrite)
    if not args.absolute_paths:  # warnings name files by their path: within the dataset, relative to it
        data.warnings = [w.replace(str(dataset.root), dataset.root.name) for w in data.warnings]
    from ..report import plots  # matplotlib, only once it is known to be there

    summary = {**data.summary.means(confidence=True), **data.quality.summary()}
    keys = ["foreground_dice", *(k for k in spec.keys() if k not in COUNT_KEYS)]
    series = {k: [v for v in data.summary.values(catalogue.lookup(k)) if v is not None] for k in keys}
    labels = {k: metric_title(spec, k) for k in keys}
    figures = {"distributions": plots.distributions(series, labels)}
    if "ece" in spec.names:
        pooled = data.quality.calibration
        figures["reliability"] = plots.reliability_diagram(pooled.reliability, "every pixel")
        figures["reliability_foreground"] = plots.reliability_diagram(pooled.foreground, "foreground pixels")
    page = render(data, summary, provenance, figures, table.name).encode()
    atomic_write_bytes(args.out, page, overwrite=args.overwrite)
    print(f"wrote {args.out} ({len(page) / 1e6:.1f} MB): {plural(data.images, 'image')} ({data.summary.images} "
          f"with a mask), the {len(data.worst_entries())} worst by {args.rank} (in its table: "
          f"{len(data.table_entries())}); every image in {table}", file=out)
    return 0
