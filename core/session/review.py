"""The session's review queue (`core.review.model`): each image's entries are those of what answers for it against
the truth its numbers are of, made by a job like its score (`job`, run on any thread, `adopt`), and kept with the
same key as its score (`ScoreKey`): when the score is fresh and the entries are not, a job is due. A decision goes
through the mask document of the image on screen (one undoable edit), into the review log beside the dataset, and
on to the next entry; undo puts the pixels it changed back (its image on screen again), whatever came between.

Two runs compared (`compare`): a second model or backend (B) run over the images the session's model has answers
for, each image's parity with that answer (A; where its whole-slide run answers, its run on its ROI, as B's is)
adopted into `parity` (`core.review.compare`), the queue a view steps instead of the truth's while it is `active`.
While its current entry's image is on screen, B's classes of it are what the result panels show in the truth's
place (`b_on_screen`), and the mask tools edit nothing (`views.actions`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from typing import Callable, Protocol

import numpy as np

from ..backend_spec import BackendSpec
from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.masks import mask_to_labels
from ..editing.document import MaskDocument
from ..errors import SegScopeError
from ..evaluate import truth_at_result
from ..result import InferenceResult
from ..review.compare import Compared, ParityQueue, compare_steps
from ..review.log import ReviewLog
from ..review.model import ReviewQueueModel
from ..review.queue import DEFAULT_OPTIONS, QueueOptions, ReviewEntry, result_entries
from ..roi import Roi
from .answers import WHOLE_SLIDE, Answer
from .events import SessionEvents
from .jobs import StreamJob
from .runs import RunRecord
from .scoring import ScoreKey


class ReviewedSession(Protocol):
    """What of the session (`core.session.session.Session`, which holds this part) the review queue reads."""

    events: SessionEvents
    dataset: Dataset | None
    current: DatasetItem | None
    document: MaskDocument | None

    def score_key(self, item_id: str) -> ScoreKey | None: ...
    def is_fresh(self, item_id: str) -> bool: ...
    def answer(self, item_id: str) -> Answer | None: ...
    def edited_mask(self, item_id: str) -> Callable[[], np.ndarray | None]: ...
    def answered_ids(self, dataset: Dataset | None) -> list[str]: ...
    def record(self, item_id: str) -> RunRecord | None: ...
    def is_stale(self, item_id: str) -> bool: ...


@dataclass(frozen=True)
class ReviewJob:
    """What one image's entries need, taken in the session's thread; `run()` may run on any other."""

    item_id: str
    key: ScoreKey
    order: int  # the image's place in the dataset
    dataset: Dataset
    item: DatasetItem
    result: InferenceResult
    mask: Callable[[], np.ndarray | None]  # the mask with unsaved edits; None: the file
    options: QueueOptions

    def run(self) -> list[ReviewEntry]:
        roi_mask = truth_at_result(self.dataset, self.item, self.result, self.mask())
        if roi_mask is None:
            return []
        labels = mask_to_labels(roi_mask, self.result.num_classes)
        return result_entries(self.item_id, self.order, self.result, labels, self.options)


@dataclass(frozen=True, eq=False)
class BOnScreen:
    """Run B's classes of the image on screen (the parity entry's), shown in the truth's panel: `labels` uint8
    class ids at ROI resolution over `roi` (the ROI of the result on screen); `b` what B is, in a few words."""

    image: str
    b: str
    roi: Roi
    labels: np.ndarray

    def title(self, labels_title: str) -> str:
        """The panel's title: whose classes these are, and that they are not the truth (first: a narrow panel cuts
        the end)."""
        return f"B, not the truth: {labels_title} of {self.b}"


class SessionReview:
    """The review queue of one session: `queue` (the model views draw), the jobs that fill it, the decisions."""

    def __init__(self, session: ReviewedSession, options: QueueOptions = DEFAULT_OPTIONS):
        self.session, self.options = session, options
        self.queue = ReviewQueueModel()
        self.parity = ParityQueue()  # two runs compared (`compare`)
        self._compare_cancel = threading.Event()
        self._keys: dict[str, ScoreKey] = {}  # what each image's entries in the queue are of
        self._orders: dict[str, int] | None = None  # the dataset's order by id, made when first asked
        session.events.dataset.connect(self._on_dataset)

    def _on_dataset(self, dataset: Dataset | None, old: Dataset | None) -> None:
        """Another dataset (or the same one reopened: its truths are read again): its own log, no entry yet."""
        self._keys.clear()
        self._orders = None
        self.cancel_compare()
        self.parity.close()
        self.queue.set_log(ReviewLog.beside(dataset.root) if dataset is not None else None,
                           read=not self.queue.deferred)

    def job(self, item_id: str) -> ReviewJob | None:
        """The job that brings the image's entries up to date (None: they are, its numbers are not fresh yet, or
        nothing answers for it)."""
        session = self.session
        key = session.score_key(item_id)
        answer = session.answer(item_id)
        if key is None or answer is None or answer.result is None or not session.is_fresh(item_id) \
                or self._keys.get(item_id) == key or session.dataset is None:
            return None
        dataset = session.dataset
        if self._orders is None:
            self._orders = {item.id: n for n, item in enumerate(dataset.items)}
        return ReviewJob(item_id, key, self._orders[item_id], dataset, dataset.item(item_id), answer.result,
                         session.edited_mask(item_id), self.options)

    def due(self) -> list[str]:
        """The images whose entries can be brought up to date now, in dataset order."""
        return [item_id for item_id in self.session.answered_ids(self.session.dataset) if self.job(item_id)]

    def adopt(self, job: ReviewJob, entries: list[ReviewEntry]) -> bool:
        """Take a finished job's entries; False (ignored) when what they are of changed since it was taken."""
        if job.key != self.session.score_key(job.item_id):
            return False
        self._keys[job.item_id] = job.key
        self.queue.set_image(job.item_id, entries)
        return True

    def _shown(self, entry: ReviewEntry) -> tuple[InferenceResult, MaskDocument]:
        """The result and the mask document of the entry's image, which must be the one on screen."""
        session = self.session
        document = session.document
        answer = session.answer(entry.image)
        if document is None or document.item.id != entry.image or answer is None or answer.result is None:
            raise SegScopeError(f"{entry.image}: show the image first (it is still loading)")
        if document.saving:
            raise SegScopeError(f"{entry.image}: its mask is being saved; decide once it is written")
        return answer.result, document

    def decide(self, decision: str) -> Roi | None:
        """The current entry decided on the image on screen; the box its truth changed in (None: it did not)."""
        entry = self.queue.current
        if entry is None:
            return None
        result, document = self._shown(entry)
        changed: list[Roi | None] = []

        def apply(chosen: ReviewEntry, how: str) -> tuple[Roi, np.ndarray] | None:
            edit = document.review_decision(result, chosen, how, self.options.min_area)
            changed.append(edit[0] if edit is not None else None)
            return edit

        self.queue.decide(decision, apply)
        return changed[0]

    def undo(self) -> Roi | None:
        """Take back the last decision (its image must be on screen: its pixels are put back as one edit); the box
        that changed back."""
        entry = self.queue.last_decided()
        if entry is None:
            return None
        result, document = self._shown(entry)
        undone: list[Roi | None] = []

        def revert(_entry: ReviewEntry, _decision: str, edit: object) -> None:
            if isinstance(edit, tuple):  # (None: the decision changed nothing, as a keep)
                undone.append(document.put_back(result, *edit))

        self.queue.undo(revert)
        return undone[0] if undone else None

    # ---------------------------------------------------------------------------------- two runs compared
    def b_on_screen(self) -> BOnScreen | None:
        """B's classes to show instead of the truth: while the two runs' queue is listed and its current entry's
        image is on screen with a result of the ROI B ran on (None otherwise: the truth is shown)."""
        parity, session = self.parity, self.session
        entry, current = parity.current, session.current
        if not parity.active or entry is None or current is None or current.id != entry.image:
            return None
        theirs, answer = parity.theirs(entry.image), session.answer(entry.image)
        if theirs is None or answer is None or answer.result is None or answer.result.roi != theirs[0]:
            return None
        return BOnScreen(entry.image, parity.b, *theirs)

    def compare(self, spec: BackendSpec, b: str) -> StreamJob[Compared]:
        """Compare B (`spec`, `b` what it is in a few words) with what answers for each image now (A): the job
        that runs B (on the thread that may hold a backend) and hands each image's parity to `parity`. Refused
        (`SegScopeError`) when nothing answers for any image yet."""
        session = self.session
        dataset = session.dataset
        if dataset is None:
            raise SegScopeError("Open a dataset and run it first: two runs are compared on its images")
        first = {}
        for item_id in session.answered_ids(dataset):
            result = self._run_on_roi(item_id)
            if result is not None:
                first[item_id] = result
        if not first:
            raise SegScopeError("Run the images first (Run all): B is compared with the model's results on them")
        self.cancel_compare()
        cancel = self._compare_cancel = threading.Event()
        items = [item for item in dataset.items if item.id in first]
        self.parity.start(b, len(items), len(dataset.items) - len(items))
        options, parity, run = self.options, self.parity, self.parity.run  # (a later comparison makes its own run)

        def each(image: Compared) -> None:
            if parity.run is run:
                parity.add(image)

        def finished() -> None:
            if parity.run is run and parity.running:
                parity.finish("cancelled" if cancel.is_set() else "")
        return StreamJob("review-compare", partial(compare_steps, spec, dataset, items, first, cancel, options),
                         each, finished)

    def _run_on_roi(self, item_id: str) -> InferenceResult | None:
        """A's result of an image: what answers for it, but where its whole-slide run does, its run on its ROI by the
        open model (None: none kept). B runs on the ROI, as `segscope review --against` compares two ROI runs: the
        stitched slide's part against B's ROI run listed where tiling differs from one run as flips."""
        session = self.session
        answer = session.answer(item_id)
        if answer is None or answer.source != WHOLE_SLIDE:
            return answer.result if answer is not None else None
        record = session.record(item_id)
        return record.result if record is not None and not session.is_stale(item_id) else None

    def compare_failed(self, text: str) -> None:
        """The comparison's job failed (`text`: why, one line)."""
        if self.parity.running:
            self.parity.finish(text)

    def cancel_compare(self) -> None:
        """Stop the comparison after the image in flight (what it compared stays listed)."""
        self._compare_cancel.set()
