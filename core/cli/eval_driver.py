"""The one `eval` driver: the dataset, the export folder, the backend, the metric table and the summary, around
a unit of work that runs each image (`eval_image.RoiUnit`: its ROI through the stream; `eval_tiled.TiledUnit`:
the whole slide as tiles). `report` opens its dataset and backend as eval does (`open_dataset`,
`open_eval_backend`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from ..backend_spec import open_backend, opening_notes, spec_from_args
from ..backends.base import Backend
from ..backends.pool import UsageLog
from ..backends.precision_check import AccuracyCheck
from ..dataset.dataset import Dataset
from ..dataset.preflight import check_sizes_up_front, prepare_truths
from ..dataset.truth import Truth, choice_note
from ..export.names import PROVENANCE_NAME
from ..export.plan import exports_review_log, plan_item, plan_run
from ..export.writer import ExportRun
from ..metrics import catalogue
from ..metrics.catalogue import DatasetSummary, catalogue_document
from ..metrics.document import StreamedDocument
from ..metrics.scores import ImageMetrics
from ..quality.options import summary_lines
from ..roi import Roi
from ..wording import plural
from .cache import CacheReport
from .output import note, status, warning

EXIT_OK = 0
#: One image's row of the metric table and its metrics (None without a mask), as a unit hands them on.
Scored = tuple[dict[str, object], "ImageMetrics | None"]


def open_dataset(args: argparse.Namespace) -> Dataset:
    """`--dataset` with the `--truth` choice; which truth the run uses is said once on stderr (a note)."""
    dataset = Dataset.open(args.dataset, max_pixels=args.max_pixels, truth=args.truth)
    said = choice_note(dataset.items, dataset.truth_choice)
    if said:
        note(said)
    return dataset


@contextlib.contextmanager
def open_eval_backend(args: argparse.Namespace) -> Iterator[Backend]:
    """The backend `eval` asked for, its notes (which stream of several it drives; how DVPP is approximated)
    printed on stderr."""
    with open_backend(spec_from_args(args)) as backend:
        for line in opening_notes(backend.capabilities):
            note(line)
        yield backend


def _six(value: object) -> str:
    """A metric in the original script's format; None (n/a) says so."""
    return "n/a" if value is None else f"{value:.6f}"


def format_line(path: Path, evaluation_metrics: ImageMetrics | None, roi_note: str = "") -> str:
    """The original script's line for one image, then the hard foreground Dice/IoU ("n/a" without any
    foreground in either mask), and how the ROI reached the stream when not by its own crop."""
    note = f" [{roi_note}]" if roi_note else ""
    if evaluation_metrics is None:
        return f"image: {path}, dice: n/a, iou: n/a (no mask){note}"
    values = catalogue.row_values(evaluation_metrics)
    return (f"image: {path}, dice: {_six(values['soft_dice'])}, iou: {_six(values['soft_iou'])}, "
            f"hard dice: {_six(values['foreground_dice'])}, hard iou: {_six(values['foreground_iou'])}{note}")


def truth_text(truth: Truth | None, root: Path) -> str:
    """What ends an image's line: the truth it was scored against (kind, file in the dataset, hash prefix)."""
    return "" if truth is None else f", truth: {truth.brief(root)}"


@dataclass
class EvalRun:
    """What the driver hands a unit: the command's options, the dataset and ROI, the export (None without
    --export) and where result lines go."""

    args: argparse.Namespace
    out: TextIO
    dataset: Dataset
    roi: Roi | None
    kinds: list[str]
    export: ExportRun | None = None

    def say(self, line: str) -> None:
        """One image's result line (none with --json)."""
        if not self.args.json:
            print(line, file=self.out, flush=True)


class EvalUnit(Protocol):
    """One kind of eval work: what it refuses, which runs it exports, and how it runs the images."""

    @property
    def tiled(self) -> bool:
        """Whether it exports whole-slide runs (stitched, `core.export.plan.TILED_KINDS`), else ROI runs."""

    @property
    def usage(self) -> UsageLog | None:
        """Per device (or cluster worker) use, once the images ran, when the unit counts it."""

    @property
    def check(self) -> AccuracyCheck | None:
        """The precision variant's check against fp32, when the unit runs one."""

    def prepare(self, run: EvalRun) -> None:
        """Refuse what this unit cannot do, before the export folder or the backend is opened."""

    def evaluate(self, run: EvalRun, backend: Backend) -> Iterator[Scored]:
        """Each image scored in dataset order, its files exported and its line said."""

    def means(self) -> dict[str, object]:
        """What the unit adds to the dataset means."""


def drive(args: argparse.Namespace, out: TextIO, unit: EvalUnit) -> int:
    """`eval` with `unit`: the sizes in every header and every export target checked before the first image,
    the images run, the metrics written and the summary printed. The export is published all or nothing,
    once the metrics are written (`ExportFolder`): a run that fails leaves its folder as it was.

    Nothing grows with the images but the dataset's items and the summary's values (`DatasetSummary`): each
    image's row goes out as it comes, as a line or an element of the JSON document, and into the export's metric
    tables (`MetricsTable`, which keeps it on the export's disk)."""
    roi = Roi.parse(args.roi) if args.roi is not None else None
    dataset = open_dataset(args)
    kinds = [k.strip() for k in args.export_kinds.split(",") if k.strip()]
    run = EvalRun(args, out, dataset, roi, kinds)
    unit.prepare(run)
    cached = CacheReport()  # what came from the decoded-input cache (truth checks included), said once at the end
    check_sizes_up_front(dataset)
    review_log = exports_review_log(kinds, dataset.root)
    run.export = export = ExportRun(args.export, args.overwrite, dataset.root, record_written=False,
                                    background=args.overlap and not unit.tiled, review_log=review_log) \
        if args.export else None
    summary = DatasetSummary()
    document = StreamedDocument(functools.partial(_write_now, out), "images") if args.json else None
    foreground = 0  # images with a foreground Dice (in their mask or prediction)
    with contextlib.ExitStack() as stack:
        if export is not None:
            stack.enter_context(export)  # locked and staged for the whole run, published when the block ends
            planned = functools.partial(plan_item, kinds=run.kinds, tiled=unit.tiled,
                                        stitched_format=args.stitched_format or "auto")
            export.refuse_existing(itertools.chain(  # every name it may write, before the first image: all said at once
                itertools.chain.from_iterable([*(f.name for f in planned(item.id)), PROVENANCE_NAME.format(id=item.id)]
                                              for item in dataset.items),
                (f.name for f in plan_run(run.kinds, review_log=review_log))))
        backend = stack.enter_context(open_eval_backend(args))
        prepare_truths(dataset, backend.capabilities.class_names, backend.capabilities.details)  # before any result
        images = 0
        for row, metrics in unit.evaluate(run, backend):
            images += 1
            summary.add(metrics)
            foreground += row.get("foreground_dice") is not None
            if document is not None:
                document.add(row)
            if export is not None:
                export.add_row(row)
        for said in (cached.line(images), backend.cache_note()):
            if said:
                note(said)
        means: dict[str, object] = {**summary.means(), **unit.means()}
        if export is not None:
            export.finish(means)
    if export is not None:  # published as the block ended
        note(f"exported {', '.join(run.kinds)} for {plural(images, 'image')}, and metrics.csv and metrics.json, to "
             f"{export.folder.out_dir}")
    return print_results(args, document, foreground, means, out, unit.usage, unit.check)


def _write_now(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()


def print_results(args: argparse.Namespace, document: StreamedDocument | None, foreground: int,
                  means: Mapping[str, object], out: TextIO, usage: UsageLog | None = None,
                  check: AccuracyCheck | None = None) -> int:
    """The end of the JSON `document` whose rows went out (the means, the metrics' definitions, the ranking,
    per-device usage and the precision check), or the original script's summary lines (usage on stderr);
    `foreground`: how many images had a foreground Dice."""
    if usage is not None and not args.json:
        for line in usage.lines():
            status(line)
    precision = check.summary() if check is not None else None
    if document is not None:
        document.close({"summary": means, **catalogue_document(), **({"devices": usage.as_dicts()} if usage else {}),
                        **({"precision": precision} if precision else {})})
        out.write("\n")
    else:
        def shown(key: str) -> object:
            if not means["images_with_masks"]:
                return "n/a (no image has a mask)"
            return "n/a (no image has a foreground in its mask or prediction)" if means[key] is None else means[key]

        print(f"========== Cross Valid dice coeff is: {shown('soft_dice')}", file=out)
        print(f"========== Cross Valid IOU is: {shown('soft_iou')}", file=out)
        without = int(means["images_with_masks"]) - foreground  # type: ignore[call-overload]
        counted = f" (over {foreground} images with masks" + (
            f"; {without} without any foreground in mask or prediction: n/a" if without else "") + ")"
        print(f"========== Hard foreground dice is: {shown('foreground_dice')}"
              f"{counted if means['images_with_masks'] else ''}", file=out)
        for line in summary_lines(means):
            print(line, file=out)
    if check is not None and precision:
        line, problem = check.lines()
        if not args.json:
            print(line, file=out)
        if problem:
            warning(problem)
    return EXIT_OK
