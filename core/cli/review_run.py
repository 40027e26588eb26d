"""`segscope review`'s run (its options: `review.py`): the dataset evaluated as `eval` evaluates it (same dataset,
truth, ROI and backend options), each image's disagreements offered to the bounded queue as it comes; or two runs
side by side (`--against`), each image's parity offered to the gate."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TextIO

from ..dataset.dataset import Dataset
from ..dataset.preflight import check_sizes_up_front, prepare_truths
from ..errors import SegScopeError
from ..evaluate import ImageEvaluation, evaluate_dataset
from ..files.fileio import atomic_write_bytes, refuse_folder
from ..metrics.scores import argmax_at_roi
from ..quality.spec import MetricSpec
from ..review import AREA_HALF, MIN_DICE
from ..review.parity import FLIP_KINDS, ParityRun, image_parity
from ..review.queue import KINDS, QueueOptions, ReviewQueue, result_entries
from ..roi import Roi
from ..stream.input import StreamInput
from ..stream.source import chosen_source
from ..wording import class_name, plural
from .cache import apply_cache_options
from .eval_driver import open_dataset, open_eval_backend
from .options import refuse_remote_only_options
from .output import EXIT_FAIL, Progress

RANKING = (f"score = confidence x area / (area + {AREA_HALF}); confidence: the model's mean margin for its decision "
           "against the truth over the disagreeing pixels (p of the predicted class - p of the true class, at ROI "
           "resolution); best first by score, then area, dataset order, class, box")
_ENTRY_COLUMNS = ("rank", "image", "kind", "class", "class_name", "x0", "y0", "x1", "y1", "area", "score",
                  "confidence", "id", "to_class", "to_class_name")
_PARITY_COLUMNS = ("rank", "image", "dice", *FLIP_KINDS, "passed")


def review(args: argparse.Namespace, out: TextIO) -> int:
    refuse_remote_only_options(args)
    if args.min_dice is not None and args.against is None and args.against_backend is None:
        raise SegScopeError("--min-dice: only applies to two runs (--against or --against-backend); add one or "
                            "drop the option")
    apply_cache_options(args)
    MetricSpec.parse("", args.min_defect_area, args.defect_iou)  # its ranges, refused in one line
    options = QueueOptions(args.min_defect_area, args.defect_iou, args.min_boundary_area)
    if args.out is not None:
        refuse_folder(args.out, "--out")
        if args.out.exists() and not args.overwrite:
            raise SegScopeError(f"--out {args.out}: already exists (use --overwrite to replace it)")
        if not args.out.parent.is_dir():
            raise SegScopeError(f"--out {args.out}: no such folder {args.out.parent}; create it first")
    roi = Roi.parse(args.roi) if args.roi is not None else None
    dataset = open_dataset(args)
    check_sizes_up_front(dataset)
    if args.against is not None or args.against_backend is not None:
        return _parity(args, out, dataset, roi, options)
    return _queue(args, out, dataset, roi, options)


def _evaluations(args: argparse.Namespace, dataset: Dataset, roi: Roi | None, progress: bool = True,
                 truths: bool = True) -> Generator[ImageEvaluation, None, None]:
    """The dataset's evaluations by the run `args` names, as `eval` makes them (its classes' names set as
    `args.class_names` before the first), with a progress line on stderr unless not asked for; without `truths`,
    results only: no truth is checked or read (two runs compared need none)."""
    shown = Progress(len(dataset)) if progress else None
    with open_eval_backend(args) as backend:
        capabilities = backend.capabilities
        args.class_names = list(capabilities.class_names)
        if truths:
            prepare_truths(dataset, capabilities.class_names, capabilities.details)
        stream = StreamInput.of(chosen_source(args))
        for done, evaluation in enumerate(evaluate_dataset(backend, dataset, roi, stream=stream, truths=truths), 1):
            yield evaluation
            if shown is not None:
                shown.update(done, evaluation.item.id)
        if shown is not None:
            shown.clear()


def _queue(args: argparse.Namespace, out: TextIO, dataset: Dataset, roi: Roi | None, options: QueueOptions) -> int:
    queue = ReviewQueue(args.top or None)
    without = 0
    for order, evaluation in enumerate(_evaluations(args, dataset, roi)):
        if evaluation.truth_labels is None:
            without += 1
            continue
        queue.add(result_entries(evaluation.item.id, order, evaluation.result, evaluation.truth_labels, options))
    names: list[str] = args.class_names
    entries = queue.entries()
    by_kind = {kind: sum(n for (k, _), n in queue.counts.items() if k == kind) for kind in KINDS}
    summary = {"images": len(dataset), "images_with_truth": queue.images, "images_without_truth": without,
               "entries": queue.total, "shown": len(entries), "by_kind": by_kind,
               "by_class": {class_name(names, c): sum(n for (_, k), n in queue.counts.items()
                                                                       if k == c)
                            for c in sorted({c for _, c in queue.counts})},
               "min_defect_area": options.min_area, "defect_iou": options.iou,
               "min_boundary_area": options.min_boundary_area, "ranking": RANKING}
    if args.csv:
        text = _csv(_ENTRY_COLUMNS, ([rank, *_entry_cells(e.record(names))] for rank, e in enumerate(entries, 1)))
    elif args.json or args.out is not None:
        text = json.dumps({"entries": [e.record(names) for e in entries], "summary": summary}, indent=1) + "\n"
    else:
        lines = [f"{rank:>4}  {e.image}  {e.kind}  class {e.cls} ({class_name(names, e.cls)})"
                 + (f" as {e.to} ({class_name(names, e.to)})" if e.kind == "wrong_class" else "")
                 + f"  bbox {list(e.bbox)}  area {e.area}  score {e.score:.6f}" for rank, e in enumerate(entries, 1)]
        counted = ", ".join(f"{n} {kind}" for kind, n in by_kind.items() if n)
        lines.append(f"{plural(queue.total, 'disagreement')} in {plural(queue.images, 'image')} with a truth"
                     + (f" ({counted})" if counted else "") + (f", the best {len(entries)} shown"
                                                               if len(entries) < queue.total else "")
                     + (f"; {plural(without, 'image')} without a truth" if without else ""))
        text = "\n".join(lines) + "\n"
    _emit(args, out, text, f"{len(entries)} of {plural(queue.total, 'disagreement')} in "
                           f"{plural(queue.images, 'image')}")
    return 0


def _entry_cells(record: dict[str, object]) -> list[object]:
    box: list[int] = record["bbox"]  # type: ignore[assignment]
    return [record["image"], record["kind"], record["class"], record["class_name"], *box, record["area"],
            record["score"], record["confidence"], record["id"], record.get("to_class", ""),
            record.get("to_class_name", "")]


def _csv(columns: tuple[str, ...], rows: Iterator[list[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


def _emit(args: argparse.Namespace, out: TextIO, text: str, said: str) -> None:
    """`text` on the standard output, or into --out (whole or not at all) with one line saying so."""
    if args.out is None:
        out.write(text)
        return
    atomic_write_bytes(args.out, text.encode(), overwrite=args.overwrite)
    print(f"wrote {args.out}: {said}", file=out)


def _against(args: argparse.Namespace) -> argparse.Namespace:
    """The options of the second run: A's, with --against's pipeline or card and --against-backend's backend."""
    other = argparse.Namespace(**vars(args))
    if args.against is not None:
        pipeline = Path(args.against).suffix == ".pipeline"
        other.pipeline, other.model = (args.against, None) if pipeline else (None, args.against)
    other.backend = args.against_backend or args.backend
    return other


def _compare(args: argparse.Namespace, run: ParityRun, order: int, a: ImageEvaluation, b: ImageEvaluation,
             options: QueueOptions) -> None:
    """One image of the two runs offered to the gate."""
    if a.result.roi != b.result.roi:
        raise SegScopeError(f"{a.item.image_path}: the two runs read different ROIs ({a.result.roi} and "
                            f"{b.result.roi}); give --roi")
    if a.result.num_classes != b.result.num_classes:
        raise SegScopeError(f"--against {args.against}: {b.result.num_classes} classes, but the first run has "
                            f"{a.result.num_classes}; compare models of the same classes")
    run.add(image_parity(a.item.id, order, argmax_at_roi(a.result), argmax_at_roi(b.result), a.result.roi,
                         a.result.num_classes, options))


def _parity(args: argparse.Namespace, out: TextIO, dataset: Dataset, roi: Roi | None, options: QueueOptions) -> int:
    run = ParityRun(MIN_DICE if args.min_dice is None else args.min_dice, args.top or None)
    other = _against(args)
    with contextlib.closing(_evaluations(args, dataset, roi, truths=False)) as first, \
            contextlib.closing(_evaluations(other, dataset, roi, progress=False, truths=False)) as second:
        for order, (a, b) in enumerate(zip(first, second)):
            _compare(args, run, order, a, b, options)
    names: list[str] = args.class_names
    ranked = run.ranked()
    gate = run.gate()
    records = [p.record(names, run.min_dice) for p in ranked]
    if args.csv:
        text = _csv(_PARITY_COLUMNS, ([rank, r["image"], r["dice"], *(r[k] for k in FLIP_KINDS), r["passed"]]
                                      for rank, r in enumerate(records, 1)))
    elif args.json or args.out is not None:
        text = json.dumps({"images": records, "gate": gate, "runs": {"a": str(chosen_source(args)), "a_backend":
                           args.backend, "b": str(chosen_source(other)), "b_backend": other.backend}}, indent=1) + "\n"
    else:
        lines = [f"{rank:>4}  {r['image']}  dice {'n/a' if r['dice'] is None else format(r['dice'], '.6f')}  "
                 + "  ".join(f"{kind} {r[kind]}" for kind in FLIP_KINDS) for rank, r in enumerate(records, 1)
                 if not r["passed"]]
        lines.append(f"gate {'passed' if run.passed else 'FAILED'}: {gate['rule']}; {run.failed} of "
                     f"{plural(run.images, 'image')} fail ({', '.join(f'{run.flips[k]} {k}' for k in FLIP_KINDS)})")
        text = "\n".join(lines) + "\n"
    _emit(args, out, text, f"{plural(run.images, 'image')} compared, gate {'passed' if run.passed else 'failed'}")
    return 0 if run.passed else EXIT_FAIL
