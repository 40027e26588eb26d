"""`eval`'s unit of work without `--tile`: each image's ROI through the stream (as the original script ran
it), with the chosen quality metrics, the precision variant's check and the export written beside inference. The
images run as the viewer's and the Python API's do, as one batch of the session's runner
(`core.session.running.batch_steps`), ended by the first error."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator

from ..backends.base import Backend
from ..backends.pool import UsageLog
from ..backends.precision_check import AccuracyCheck, with_precision
from ..errors import SegScopeError
from ..evaluate import ImageEvaluation, evaluation_row
from ..export.files import ExportFolder
from ..export.provenance import source_for
from ..quality.options import line_text
from ..quality.scoring import MetricSpec, QualitySummary
from ..session.running import Batch, Evaluated, Failed, batch_steps, raise_error
from ..stream.input import StreamInput
from ..stream.source import chosen_source
from .eval_driver import EvalRun, Scored, format_line, truth_text
from .output import Progress, note


class RoiUnit:
    """Each image's ROI (--roi, its stored one, or the dataset's default) run once through the stream."""

    tiled = False

    def __init__(self, spec: MetricSpec):
        self.spec, self.quality = spec, QualitySummary(spec)
        self.usage: UsageLog | None = None
        self.check: AccuracyCheck | None = None
        self.progress: Progress | None = None

    def prepare(self, run: EvalRun) -> None:
        self.progress = Progress(len(run.dataset))

    def evaluate(self, run: EvalRun, backend: Backend) -> Iterator[Scored]:
        args, dataset, progress = run.args, run.dataset, self.progress
        assert progress is not None  # made by prepare
        stream = StreamInput.of(chosen_source(args))  # the shipped pipeline when none is given
        backend, notes = with_precision(backend, args, dataset, run.roi, stream)  # fp32: the backend itself
        self.check = check = AccuracyCheck(backend)
        for line in notes:
            note(line)
        export = run.export  # its files written beside inference (`ExportRun`)

        def print_line(done: int, evaluation: ImageEvaluation) -> None:  # once the image's files are in place
            if not args.json:
                progress.clear()
                chosen = line_text(self.spec, evaluation.metrics.quality, backend.capabilities.class_names) \
                    if evaluation.metrics is not None and evaluation.metrics.quality else ""
                run.say(format_line(evaluation.item.image_path, evaluation.metrics, evaluation.result.roi_note)
                        + chosen + truth_text(evaluation.truth, dataset.root))
            progress.update(done, evaluation.item.id)

        rois = dict.fromkeys((item.id for item in dataset.items), run.roi) if run.roi is not None else {}
        batch = Batch(dataset, tuple(dataset.items), rois, {}, {}, stream, self.spec, overlap=args.overlap,
                      default_rois=False, stamps=False)
        for done, step in enumerate(batch_steps(batch, backend, threading.Event(), _unseen, raise_error), 1):
            if isinstance(step, Failed):  # (a folder `Dataset.open` would have refused: `DatasetItem.problem`)
                raise SegScopeError(f"{step.item_id}: {step.text}")
            assert isinstance(step, Evaluated)  # (a batch has no whole-slide step)
            evaluation = step.evaluation
            self.quality.add(evaluation.metrics)
            check.add(evaluation)
            result, item = evaluation.result, evaluation.item
            yield evaluation_row(item, result.roi, evaluation.metrics, result.timings, result.roi_note,
                                 evaluation.truth, dataset.root), evaluation.metrics
            source = source_for(item, backend.capabilities, truth=evaluation.truth, root=dataset.root,
                                truth_labels=evaluation.truth_labels)
            then = functools.partial(print_line, done, evaluation)
            if export is None:
                then()
            else:
                export.write(functools.partial(ExportFolder.export_result, result=result, source=source,
                                               kinds=run.kinds), then)
        if export is not None:
            export.flush()
        progress.clear()
        usage = getattr(backend, "usage", None)  # per device (or cluster worker): images, throughput, busy time
        self.usage = usage if isinstance(usage, UsageLog) else None

    def means(self) -> dict[str, object]:
        return self.quality.summary()


def _unseen(done: int, total: int) -> None:
    """The batch's progress: eval shows its own, once each image's line is out."""
