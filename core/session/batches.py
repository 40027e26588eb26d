"""The session's runs: what the last run did to each image (`Outcome`: queued, failed, ...), the run commands
(`run` for images, `run_whole_slide` for a slide in tiles) that return jobs for the thread owning the backend,
and storing what they bring back (`add_evaluation`, `add_slide_run`), kept on disk too.

`SessionRuns` is the part of `core.session.session.Session` that runs; it reads the session's dataset, ROIs,
truths and document and announces what changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from ..backends.base import Backend
from ..dataset.dataset import Dataset, DatasetItem
from ..editing.document import MaskDocument
from ..evaluate import ImageEvaluation
from ..metrics import catalogue
from ..quality.spec import NO_QA_METRICS, MetricSpec
from ..roi import Roi
from ..slides import SlideReader
from ..stream.input import RegionSource, StreamInput
from ..wholeslide.evaluate import TiledEvaluation, TilePlan
from ..wording import plural
from .answers import WHOLE_SLIDE, Answer
from .events import (
    CANCELLED,
    FAILED,
    NOT_RUN,
    QUEUED,
    Message,
    Outcome,
    ResultAdded,
    SessionEvents,
    SlideRunAdded,
)
from .jobs import Progress, RunJob
from .running import Batch, Describe, Evaluated, Failed, RunStep, SlideEvaluated, batch_steps, slide_steps
from .runs import RunRecord
from .scoring import ScoreKey
from .store import SessionStore
from .truth import ImageTruth


def run_summary(done: int, failed: int, cancelled: bool) -> str:
    """What a run of several images (or one that failed or was cancelled) says as it ends ("": nothing)."""
    if not (cancelled or failed or done > 1):
        return ""
    return f"Run {'cancelled' if cancelled else 'finished'}: {done} done, {failed} failed"


class SessionRuns:
    """The runs third of `Session` (a mixin); see the module docstring."""

    events: SessionEvents
    store: SessionStore | None
    current: DatasetItem | None
    document: MaskDocument | None
    quality: MetricSpec
    describe_as: Describe
    _sizes: dict[str, tuple[int, int]]
    _dataset: Callable[[], Dataset]
    _item_changed: Callable[[str], None]
    _items_changed: Callable[[Sequence[str]], None]
    _keep_run: Callable[..., RunRecord]
    _keep_slide_run: Callable[[TiledEvaluation], list[str]]
    _scored: Callable[..., None]
    truth: Callable[[str], ImageTruth]
    truth_versions: Callable[[], Callable[[str], int | None]]
    answer: Callable[[str], Answer | None]

    def __init__(self) -> None:
        self._outcomes: dict[str, Outcome] = {}
        self._store_warned = False

    def outcome(self, item_id: str) -> Outcome | None:
        """What the last run asked of the image did while it gave no result (queued, failed, ...)."""
        return self._outcomes.get(item_id)

    def _set_outcome(self, item_id: str, outcome: Outcome | None) -> None:
        if self._outcomes.get(item_id) != outcome:
            if outcome is None:
                self._outcomes.pop(item_id, None)
            else:
                self._outcomes[item_id] = outcome
            self._item_changed(item_id)

    def _set_outcomes(self, item_ids: Sequence[str], outcome: Outcome) -> None:
        """`_set_outcome` of many images, announced in one event (a Run all of 100,000 images is queued at once)."""
        self._outcomes.update(dict.fromkeys(item_ids, outcome))
        self._items_changed(item_ids)

    def run_plan(self, item_ids: list[str]) -> dict[str, Roi]:
        """The ROIs a run uses, taken now (the run works on this snapshot, whatever the user drags later): the
        ROI picked for each image, or the default rule for the sizes seen. Images never shown are left to the
        run (their size needs their file, read there; an unreadable one is that image's error)."""
        dataset = self._dataset()
        items = {item.id: item for item in dataset.items}
        plan = {}
        for item_id in item_ids:
            size = self._sizes.get(item_id)
            roi = dataset.stored_roi(items[item_id]) or (dataset.default_roi_for(size) if size else None)
            if roi is not None:
                plan[item_id] = roi
        return plan

    def held_masks(self) -> dict[str, np.ndarray]:
        """Ground truth in memory exactly as its file holds it (the open image's mask as loaded or last saved),
        by image id: a run scores on it instead of decoding the file again."""
        document = self.document
        if document is None or document.disk_mask is None:
            return {}
        return {document.item.id: document.disk_mask}

    def _run_key(self, record: RunRecord, scored_on: int | None, quality: MetricSpec) -> ScoreKey:
        return ScoreKey(("run", record.id), -1 if scored_on is None else scored_on, quality)

    def run(self, item_ids: list[str], sources: Mapping[str, RegionSource] | None = None,
            stream: StreamInput | None = None) -> RunJob[RunStep]:
        """Run these images on a snapshot of their ROIs (`run_plan`): their rows are queued now; the job, on the
        thread that owns the open backend, evaluates them (`sources` read some from the open slide, `stream`:
        the stream's ROI rule, `core.evaluate.evaluate_dataset`)."""
        dataset = self._dataset()
        batch = Batch(dataset, tuple(dataset.item(i) for i in item_ids), self.run_plan(item_ids), dict(sources or {}),
                      self.held_masks(), stream, self.quality)
        scored_on = self.truth_versions()
        self._set_outcomes(item_ids, Outcome(QUEUED))
        describe_as, counts = self.describe_as, {"done": 0, "failed": 0}

        def work(backend: Backend | None, cancel: threading.Event, progress: Progress) -> Iterator[RunStep]:
            return batch_steps(batch, backend, cancel, progress, describe_as)

        def each(step: RunStep) -> None:
            if isinstance(step, Evaluated):
                result = step.evaluation.result
                if result.roi_note and not counts["done"]:  # the stream has no crop: said once a run
                    self.events.message.emit(Message("info", f"{result.roi_note}: each image's ROI was sent to "
                                                             "the stream as its whole image"))
                counts["done"] += 1
                self.add_evaluation(step.evaluation, scored_on(step.evaluation.item.id), batch.quality)
            elif isinstance(step, Failed):
                counts["failed"] += 1
                self._failed(step)

        def finished(cancelled: bool) -> None:
            self._ended(item_ids, cancelled)
            summary = run_summary(counts["done"], counts["failed"], cancelled)
            if summary:
                self.events.message.emit(Message("warning" if cancelled or counts["failed"] else "info", summary))
        return RunJob("run", tuple(item_ids), len(item_ids), work, each, finished)

    def _failed(self, step: Failed) -> None:
        self._set_outcome(step.item_id, Outcome(FAILED, step.text, step.details))
        self.events.message.emit(Message("error", f"{step.item_id}: {step.text}", step.details))

    def _ended(self, item_ids: list[str] | tuple[str, ...], cancelled: bool) -> None:
        """A run ended: images still queued were never run."""
        left = [item_id for item_id in item_ids if (outcome := self._outcomes.get(item_id)) and outcome.kind == QUEUED]
        if left:
            self._set_outcomes(left, Outcome(CANCELLED if cancelled else NOT_RUN))

    def run_whole_slide(self, reader: SlideReader, plan: TilePlan, tiles: int, item_id: str | None = None
                        ) -> RunJob[RunStep]:
        """Run an image's whole slide (the current one by default) in tiles from its open `reader`; `tiles` of
        them make the progress."""
        dataset = self._dataset()
        item = dataset.item(item_id or (self.current.id if self.current is not None else ""))
        self._set_outcome(item.id, Outcome(QUEUED))
        describe_as = self.describe_as
        scored_on = self.truth_versions()(item.id)  # the mask file the run scores the slide on (None: edits)

        def work(backend: Backend | None, cancel: threading.Event, progress: Progress) -> Iterator[RunStep]:
            return slide_steps(dataset, item, reader, plan, backend, cancel, progress, describe_as)

        def each(step: RunStep) -> None:
            if isinstance(step, SlideEvaluated):
                self.add_slide_run(step.run, scored_on)
            elif isinstance(step, Failed):
                self._failed(step)
        return RunJob("whole slide", (item.id,), tiles, work, each, lambda cancelled: self._ended((item.id,),
                                                                                                  cancelled))

    def add_evaluation(self, evaluation: ImageEvaluation, scored_on: int | None = None,
                       quality: MetricSpec | None = None) -> RunRecord:
        """Store a finished run; its metrics were scored on the mask file of truth version `scored_on` with the
        QA metrics `quality` (re-scored when either is no longer the image's)."""
        item_id = evaluation.item.id
        record = self._keep_run(item_id, evaluation.result)
        if self.store is not None:
            self.store.submit(item_id, evaluation.result)
            self._report_store_errors()
        self._outcomes.pop(item_id, None)
        self.events.result_added.emit(ResultAdded(item_id, record))
        self._scored(item_id, self._run_key(record, scored_on, quality or NO_QA_METRICS), evaluation.metrics)
        return record

    def add_slide_run(self, evaluation: TiledEvaluation, scored_on: int | None = None) -> None:
        """Keep a finished whole-slide run (replacing the image's one before; kept on disk too); its metrics were
        scored on the mask file of truth version `scored_on` (None: not known, scored again as a job)."""
        item_id = evaluation.item.id
        for dropped in self._keep_slide_run(evaluation):  # (an image whose older whole-slide run was let go)
            self._item_changed(dropped)
        if self.store is not None:
            self.store.submit_slide(evaluation)
            self._report_store_errors()
        self._outcomes.pop(item_id, None)
        metrics = evaluation.metrics
        scores = "" if metrics is None else f": {catalogue.brief(catalogue.row_values(metrics))} over the slide"
        self.events.message.emit(Message("info", f"Whole slide of {item_id}: {plural(evaluation.tiles, 'tile')} in "
                                                 f"{evaluation.seconds:.1f} s at output scale "
                                                 f"{evaluation.stitched.scale:.4g}{scores}"))
        self.events.slide_run_added.emit(SlideRunAdded(item_id, evaluation))
        answer = self.answer(item_id)
        if scored_on is not None and answer is not None and answer.source == WHOLE_SLIDE:  # (its numbers: no rescore)
            self._scored(item_id, ScoreKey(answer.scored, scored_on, self.quality), evaluation.metrics)
        else:
            self._item_changed(item_id)

    def _report_store_errors(self) -> None:
        """Failed writes of the store (earlier ones: reported here, in the session's thread), said once: every
        result after it would say the same."""
        for note in self.store.take_notes() if self.store is not None else []:
            self.events.message.emit(Message("info", note))
        errors = self.store.take_errors() if self.store is not None else []
        if errors and not self._store_warned:
            self._store_warned = True
            self.events.message.emit(Message("warning", f"{errors[0]}: results are kept for this session only"))
