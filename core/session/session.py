"""The viewer's state without Qt: the session is the application (as napari keeps its layers free of Qt).

`Session` owns the dataset, the current image, its ROI, every result (`core.session.answers`), the numbers
(`core.session.scoring`), the ground truth each image is scored against and the mask document of the image on
screen (`core.session.edits`), and what the last run did to each image. Its fields are evented
(`core.events.Evented`: an assignment announces itself), every other change is announced by a typed event
(`core.session.events`), and everything a view shows is derived from it (`core.session.views`), so two views
cannot disagree. Each fact has one owner:

- the ROI of an image lives in the dataset (its sidecar); the session is the only writer and keeps an undo
  stack of moves; a run takes a snapshot (`run_plan`), so dragging during a run never fights it;
- what answers for an image is one rule (`answer`): the newer of its run on its ROI and its whole-slide run;
- its numbers are always those of that answer against the truth the session names for it, re-scored as a job
  whenever either changes;
- the metric that ranks the images is `ranking`, the QA metrics computed beside Dice `quality`.

The user's operations are commands: `open_dataset`, `select`, `set_roi`/`undo_roi`/`redo_roi`, `run`,
`run_whole_slide`, edits through `document`, `save_job`, `discard`, `adopt_recovered`/`discard_recovered`,
`score_job`, `start_export`/`cancel_export`, `add_timing`. What takes time comes back as a job
(`core.session.jobs`) that any thread runs; its answers come back through the session's adopt methods, which
change state and announce it. Restoring an earlier session's
runs and a crash's edits goes through the same adopt methods as a user's own runs and edits. With `persist`,
each image's newest result and whole-slide run are kept on disk (`core.session.store`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.masks import MaskRule
from ..dataset.preflight import set_mask_rule, truth_refusal
from ..editing.autosave import AutoSave
from ..editing.document import MaskDocument, mask_source
from ..editing.files import read_stamps
from ..errors import SegScopeError
from ..events import Evented
from ..export.job import Exportable, ExportChoices
from ..export.job import Progress as ExportProgress
from ..files.fileio import why_unwritable
from ..files.stamp import Stamp
from ..metrics import catalogue
from ..metrics.catalogue import Metric
from ..quality.spec import NO_QA_METRICS, MetricSpec
from ..roi import Roi
from ..wholeslide.plan import OutputPlan, SlideRun, gigabytes, output_plan
from ..wording import plural
from .answers import SessionResults
from .backend_state import BackendState
from .batches import SessionRuns
from .edits import Recovered, SessionEdits, recovered_edits
from .events import (
    FAILED,
    UNREADABLE,
    Message,
    Outcome,
    ResultAdded,
    RoiChanged,
    RunTimed,
    SessionEvents,
    SlideRunAdded,
)
from .jobs import Job, StreamJob
from .restore import Restored, restored_entries
from .review import SessionReview
from .roi_undo import RoiUndo
from .running import Describe, describe_error
from .runs import RunHistory, RunRecord
from .scoring import SessionScores
from .store import SessionStore
from .truth import TruthFiles

#: What loading the current image reads on a worker: its size, its mask (None: none, or refused) and its truth files
#: as they were just before the mask was read (`Session.select`).
Loaded = tuple[tuple[int, int], Optional[np.ndarray], dict[Path, Stamp]]


@dataclass(frozen=True)
class Counted:
    """How many images of a dataset just opened have a mask (counted on the job's thread: a stat per image)."""

    masks: int


#: How many masks `Session.check_truths` checks between two chances for its runner to stop it.
CHECKED_BETWEEN_YIELDS = 200
#: What the job of an open brings back, one at a time: the masks counted, then what is restored.
Found = Union[Counted, Recovered, Restored]


class Session(SessionResults, SessionScores, SessionEdits, SessionRuns):
    """The state of one viewer window; see the module docstring."""

    dataset = Evented[Optional[Dataset]](None)
    current = Evented[Optional[DatasetItem]](None)
    document = Evented[Optional[MaskDocument]](None)  # the current image's mask, once its slide is loaded
    ranking = Evented[Metric](catalogue.lookup(catalogue.DEFAULT_RANKING))
    quality = Evented[MetricSpec](NO_QA_METRICS)  # QA metrics computed beside Dice
    exporting = Evented[bool](False)
    #: The class the result panels show and the Error regions dock maps (`set_shown_class`): 1, the first
    #: foreground class, until one is picked.
    shown_class = Evented[int](1)

    def __init__(self, history: RunHistory | None = None, persist: bool = True,
                 backend: BackendState | None = None, describe_as: Describe = describe_error) -> None:
        self.events = SessionEvents()
        SessionResults.__init__(self, history)
        SessionScores.__init__(self)
        SessionEdits.__init__(self)
        SessionRuns.__init__(self)
        self.persist = persist
        self.store: SessionStore | None = None
        self.backend = backend  # the viewer's backend (None headless: no model is open)
        self.describe_as = describe_as  # how run errors are worded (the viewer names its controls)
        self.recovery_dir: Path | None = None
        self.autosave = AutoSave()  # the unsaved edits' recovery file (a window's timer triggers it)
        self._sizes: dict[str, tuple[int, int]] = {}  # image sizes seen, for the default-ROI rule
        self._checked: tuple[Dataset, MaskRule] | None = None  # the dataset and rule `truths_by_model` checked last
        self.roi_moves = RoiUndo()
        self._export_cancel: threading.Event | None = None  # the running export's (`start_export`)
        self.review = SessionReview(self)  # the review queue over the dataset (`core.session.review`)
        if backend is not None:
            backend.events.opened.connect(lambda *_args: self._all_changed())  # another model: answers change

    # ------------------------------------------------------------------------------------------ dataset
    def open_dataset(self, dataset: Dataset, read: TruthFiles | None = None) -> StreamJob[Found]:
        """Show a dataset. Reopening the same folder keeps its runs; another folder's are dropped (their ids name
        other images). Every truth is read again, when asked for (nothing is read per image here: a dataset of
        100,000 images opens at once), or as `read` ahead on a worker (`truth_files`: the rows on screen when it
        opens), by the open model's rule when a backend is open (`truths_by_model` then returns the job that checks
        them). Returns the job that counts the masks (its first message says how many),
        brings back the edits a crash left (announced at once) and, for another folder, the runs an earlier
        session kept on disk."""
        self._leaving()
        new_folder = self.dataset is None or dataset.root != self.dataset.root
        if new_folder:
            self._forget_results()
            self._forget_scores()
            self._sizes.clear()
            self.roi_moves.clear()
            self.store = SessionStore(dataset.root) if self.persist else None
        self._outcomes.clear()
        self._forget_truths()
        self.document = None
        self.current = None
        self.dataset = dataset
        self.read_truths_by_model()  # (by the open model's rule from the start: the restore scores by it)
        self._read_ahead(read or {})
        damaged = [item for item in dataset.items if item.problem]  # (`Dataset.open(partial=True)`)
        for item in damaged:
            self._outcomes[item.id] = Outcome(UNREADABLE, item.problem)
        kept = self.answered_ids(dataset)
        if kept or damaged:
            self._items_changed([*kept, *(item.id for item in damaged)])  # (kept: their truths are read again)
        return self._restore_job(dataset, new_folder, len(kept))

    def read_truths_by_model(self) -> bool:
        """Read the open dataset's masks by the open model's rule from now on, `eval`'s (`set_mask_rule`: a card's
        truth_values included); called when a dataset or a backend opens. False: nothing changed (no dataset or no
        backend open, or the rule is the one already read by); True: `check_truths` is due, and a mask read before
        (the current image's) is to be read again."""
        dataset, capabilities = self.dataset, self.capabilities
        if dataset is None or capabilities is None:
            return False
        before = dataset.mask_rule
        if set_mask_rule(dataset, capabilities.class_names, capabilities.details) == before:
            return False
        self._forget_truths(keep_edits=True)
        self._all_changed()  # every score taken by the old rule (a restore's included) is stale: scored again
        return True

    def truths_by_model(self) -> StreamJob[tuple[str, str] | None] | None:
        """Once a dataset and a backend are open (either one opening): read the truths by the model's rule and
        return the job that checks them all, once per dataset and rule (None: checked already, or no dataset or
        no backend is open)."""
        self.read_truths_by_model()
        dataset = self.dataset
        if dataset is None or dataset.mask_rule is None or (
                self._checked is not None and self._checked[0] is dataset and self._checked[1] == dataset.mask_rule):
            return None
        self._checked = (dataset, dataset.mask_rule)
        return self.check_truths()

    def check_truths(self) -> StreamJob[tuple[str, str] | None]:
        """The job that checks every truth as `eval` does before a run (`truth_refusal`: its size, its values by the
        dataset's rule): each refused mask is one error line naming its file and what is wrong, and its image's row
        says so (never scored as an empty truth). It also yields None every `CHECKED_BETWEEN_YIELDS` images, so that
        a runner can stop it there (another dataset opened, the window closed): 100,000 masks take a minute."""
        dataset = self._dataset()
        rule = dataset.mask_rule

        def work() -> Iterator[tuple[str, str] | None]:
            for index, item in enumerate(dataset.items, 1):  # (finding a truth looks at the folder: on the worker)
                truth = dataset.truth(item)
                refused = truth_refusal(dataset, item, truth) if truth is not None else None
                if refused is not None:
                    yield item.id, refused
                elif index % CHECKED_BETWEEN_YIELDS == 0:
                    yield None

        def each(refused: tuple[str, str] | None) -> None:
            if refused is None or self.dataset is not dataset or dataset.mask_rule is not rule:
                return  # (a heartbeat, or a refusal by a rule since replaced)
            self._set_outcome(refused[0], Outcome(FAILED, refused[1]))
            self.events.message.emit(Message("error", refused[1]))
        return StreamJob("truths", work, each)

    def _restore_job(self, dataset: Dataset, stored: bool, kept: int) -> StreamJob[Found]:
        store, recovery_dir = self.store if stored else None, self.recovery_dir
        scored_on = self.truth_versions()
        restored: list[str] = []

        def work() -> Iterator[Found]:
            yield Counted(dataset.truth_count())
            why = why_unwritable(dataset.root)
            if why:  # said at once, before any run or edit is made that could not be kept
                yield Restored(dataset.root, note=f"{dataset.root}: runs and edits cannot be kept here: {why}")
            yield recovered_edits(dataset, recovery_dir)
            if store is not None:
                yield from restored_entries(store, dataset)

        def each(found: Found) -> None:
            if isinstance(found, Counted):
                self.events.message.emit(Message("info", f"Opened {dataset.root}: {plural(len(dataset), 'image')}, "
                                                         f"{found.masks} with masks" + (
                                                             f"; {plural(kept, 'earlier run')} kept" if kept else "")))
            elif isinstance(found, Recovered):
                self.adopt_recovered(found)
            elif found.note:
                self.events.message.emit(Message("warning", found.note))
            elif self.adopt_restored(found, scored_on(found.image_id)):
                restored.append(found.image_id)

        def finished() -> None:
            if restored and self.dataset is dataset:
                self.events.message.emit(Message("info", f"Restored {plural(len(restored), 'earlier run')} of "
                                                         f"{dataset.root}"))
        return StreamJob("restore", work, each, finished)

    def adopt_restored(self, entry: Restored, scored_on: int | None = None) -> bool:
        """Take one restored entry (scored against the truth of version `scored_on`); False when it is not taken:
        an image of another dataset, or one that got a newer result or whole-slide run meanwhile."""
        dataset = self.dataset
        if dataset is None or entry.root != dataset.root or not entry.image_id or entry.image_id not in dataset:
            return False
        item_id = entry.image_id
        if entry.result is not None:
            if self.newest(item_id) is not None:  # a run of this session is newer
                return False
            record = self._keep_run(item_id, entry.result, restored=True)
            self._image_seen(item_id, entry.image_now)  # (it may have changed between the sessions)
            self.events.result_added.emit(ResultAdded(item_id, record, restored=True))
            self._scored(item_id, self._run_key(record, scored_on, NO_QA_METRICS), entry.metrics)
            return True
        if entry.slide_run is not None and item_id not in self.slide_runs:
            for dropped in self._keep_slide_run(entry.slide_run):
                self._item_changed(dropped)
            self.events.slide_run_added.emit(SlideRunAdded(item_id, entry.slide_run, restored=True))
            self._item_changed(item_id)
            return True
        return False

    def look_at_images(self, item_ids: Iterable[str]) -> list[str]:
        """Whether these images' files changed since their newest runs read them (`check_images`), and their truth
        files since they were read (`check_truth_files`), now: on a look (`select`), and when the window gets the
        focus back; their views follow. Returns the images whose truth was read again (a mask on screen without
        edits is then out of date: the window loads it again)."""
        item_ids = list(item_ids)
        for item_id in self.check_images(item_ids):
            self._item_changed(item_id)
        return self.check_truth_files(item_ids)

    def flush(self) -> None:
        """Wait until every result is on disk (before closing, or reading the store elsewhere)."""
        if self.store is not None:
            self.store.flush()

    def _dataset(self) -> Dataset:
        if self.dataset is None:
            raise SegScopeError("no dataset is open: open a dataset folder first")
        return self.dataset

    def _all_changed(self) -> None:
        self._items_changed(self.answered_ids(self.dataset))

    # ---------------------------------------------------------------------------------------- current
    def select(self, item_id: str) -> Job[Loaded]:
        """Make `item_id` the current image; the job reads its size and mask (a window reads its slide instead),
        the truth files stamped just before the mask is read (a later save refuses what another writer put there
        since), and `slide_loaded` takes them. A mask the model's rule refuses is not read (its row says why), so
        the image still shows, without a truth to draw or edit on."""
        dataset = self._dataset()
        item = dataset.item(item_id)
        self._leaving()
        self.document = None
        self.current = item
        self.look_at_images((item_id,))

        def read() -> Loaded:
            size = dataset.image_size(item)
            stamps = read_stamps(mask_source(item))
            try:
                return size, dataset.load_mask(item), stamps
            except SegScopeError:
                if dataset.mask_rule is None:
                    raise
                return size, None, stamps  # refused by the model's rule: `check_truths` said why; the slide shows
        def loaded(answer: Loaded) -> None:
            self.slide_loaded(item_id, *answer)
        return Job(f"slide:{item_id}", read, loaded)

    def _leaving(self) -> None:
        """The image on screen is about to go: refused while its mask has unsaved edits (ask first)."""
        document = self.document
        if document is not None and (document.dirty or document.saving):
            raise SegScopeError(f"{document.item.id} has unsaved mask edits: save or discard them first")

    def slide_loaded(self, item_id: str, image_size: tuple[int, int], mask: np.ndarray | None,
                     stamps: dict[Path, Stamp] | None = None) -> MaskDocument | None:
        """The current image's slide is decoded: its size is known and its mask becomes the document (None: the
        image is no longer the current one); `stamps`: its truth files as they were when the mask was read."""
        if self.current is None or self.current.id != item_id:
            return None
        dataset = self._dataset()
        self._sizes[item_id] = image_size
        document = MaskDocument(dataset, dataset.item(item_id), image_size, mask, self.recovery_dir, stamps)
        self.document = document
        self._adopt_document(document)
        self._item_changed(item_id)
        return document

    def slide_failed(self, item_id: str, text: str, details: str = "") -> None:
        """The image's slide cannot be read: its row says why."""
        self._set_outcome(item_id, Outcome(UNREADABLE, text, details))

    @property
    def ready(self) -> bool:
        """Whether the current image's slide is loaded (so it has a size, a ROI and a document)."""
        return self.current is not None and self.document is not None and self.document.item.id == self.current.id

    @property
    def mask(self) -> np.ndarray | None:
        """The current image's ground truth on screen (edited, or as on disk); None before its slide loads, and
        while it has no mask (a blank one made for editing counts once it is edited)."""
        document = self.document
        if document is None or not self.ready or not self.truth(document.item.id).exists:
            return None
        return document.mask

    # ---------------------------------------------------------------------------------------------- ROI
    def roi_for(self, item_id: str) -> Roi:
        """The ROI an image is run with: the one picked for it, else the dataset's default rule."""
        dataset = self._dataset()
        return dataset.roi_for(dataset.item(item_id), self._sizes.get(item_id))

    @property
    def roi(self) -> Roi | None:
        """The current image's ROI (None until its slide is loaded)."""
        return self.roi_for(self.current.id) if self.ready and self.current is not None else None

    def set_roi(self, roi: Roi, item_id: str | None = None, undoable: bool = True) -> Roi:
        """Move an image's ROI (the current one by default), clamped into the image; saved in the sidecar.
        A sidecar that cannot be written raises SegScopeError after the ROI was set for this session."""
        dataset = self._dataset()
        item_id = item_id or (self.current.id if self.current is not None else "")
        item = dataset.item(item_id)
        size = self._sizes.get(item_id) or dataset.image_size(item)
        roi = roi.clamped(*size)
        before = self.roi_for(item_id)
        if roi == before:
            return roi
        if undoable:
            self.roi_moves.record(item_id, before, roi)
        try:
            for warning in dataset.set_roi(item, roi):
                self.events.message.emit(Message("warning", warning))
        finally:
            self._roi_moved(item_id, roi)
        return roi

    def _roi_moved(self, item_id: str, roi: Roi) -> None:
        self.events.roi_changed.emit(RoiChanged(item_id, roi))
        self._item_changed(item_id)

    def reset_roi(self) -> Roi | None:
        """Back to the dataset's default ROI for the current image (undoable)."""
        if not self.ready or self.current is None:
            return None
        item_id = self.current.id
        before = self.roi_for(item_id)
        try:
            for warning in self._dataset().reset_roi(self.current):  # the default rule applies again
                self.events.message.emit(Message("warning", warning))
        finally:
            after = self.roi_for(item_id)
            if after != before:
                self.roi_moves.record(item_id, before, after)
            self._roi_moved(item_id, after)
        return after

    def undo_roi(self) -> str | None:
        """Undo the last ROI move (of any image); returns that image's id."""
        move = self.roi_moves.undo()
        if move is not None:
            self.set_roi(move[1], move[0], undoable=False)
        return move[0] if move is not None else None

    def redo_roi(self) -> str | None:
        move = self.roi_moves.redo()
        if move is not None:
            self.set_roi(move[2], move[0], undoable=False)
        return move[0] if move is not None else None

    @property
    def result_ids(self) -> list[str]:
        """Images with a result to show or export (a run's, or a whole-slide run's part), in dataset order."""
        return [item_id for item_id in self.answered_ids(self.dataset) if self.result(item_id) is not None]

    # ------------------------------------------------------------------------------------------ whole slide
    def slide_run(self, size: tuple[int, int]) -> SlideRun | None:
        """A whole-slide run, with the open model, of a slide of `size` (None: no dataset or no model open)."""
        dataset, capabilities = self.dataset, self.capabilities
        if dataset is None or capabilities is None:
            return None
        return SlideRun.of(size, dataset.default_roi, capabilities)

    def whole_slide_plan(self, size: tuple[int, int], chosen: float = 0.0) -> OutputPlan:
        """How the current image's slide of `size` runs whole (`output_plan`: at `chosen`, 0 automatic); the plan
        and tile count `run_whole_slide` takes. SegScopeError (one line): no model, or `chosen` over the bound."""
        run = self.slide_run(size)
        if run is None or self.current is None:
            raise SegScopeError("Select an image and open a backend first")
        return output_plan(run, chosen)

    def unkept(self, run: SlideRun, scale: float) -> str:
        """Why `run`'s result at output `scale` will not be restored when the dataset is reopened (larger than the
        session's store keeps on disk), or "" when it will be (or nothing is stored)."""
        store = self.store
        size = run.stored_bytes(scale)
        if store is None or store.keeps(size):
            return ""
        return (f"its result ({gigabytes(size)}) is more than the {gigabytes(store.max_bytes)} this dataset keeps "
                "on disk: it is kept until the dataset is closed, and not restored when it is reopened")

    # ------------------------------------------------------------------------------------------- export
    @property
    def can_export(self) -> bool:
        """The one rule for File > Export (the menu's enabled state and the command alike): something to write (a
        result, or a whole-slide run) and no export running."""
        return self.dataset is not None and (self.has_results or bool(self.slide_runs)) and not self.exporting

    def start_export(self, choices: ExportChoices) -> Callable[[], Iterator[ExportProgress]]:
        """Begin exporting `choices` (of what `Exportable` offers now, with the open model's capabilities): the work,
        for any thread, one image per step, all or nothing (`Exportable.steps`). `exporting` until `export_ended`
        (call it however the work ends); `cancel_export` stops it before its next image. SegScopeError: an export
        is running, or the choices cannot be planned."""
        if self.exporting:
            raise SegScopeError("an export is running: wait for it to finish or cancel it")
        cancel = threading.Event()
        work = Exportable(self, self.capabilities).steps(choices, cancel)
        self._export_cancel, self.exporting = cancel, True
        return work

    def cancel_export(self) -> None:
        """Stop the running export before its next image (its folder left as it was)."""
        if self._export_cancel is not None:
            self._export_cancel.set()

    def export_ended(self) -> bool:
        """The running export ended (written, failed or cancelled); True when it was cancelled."""
        cancel, self._export_cancel = self._export_cancel, None
        self.exporting = False
        return cancel is not None and cancel.is_set()

    def add_timing(self, record: RunRecord, stage: str, seconds: float) -> bool:
        """A stage timed after `record`'s run (the viewer's "render": drawing its result) joins its timings,
        announced (`run_timed`); False when it has that stage already or is no longer its image's run."""
        if stage in record.timings or self.record(record.image_id) is not record:
            return False
        record.timings[stage] = seconds
        self.events.run_timed.emit(RunTimed(record.image_id, record, stage))
        return True

    # ------------------------------------------------------------------------------------------ choices
    def set_ranking(self, name: str) -> Metric:
        """Rank the images by the metric called `name` (a catalogue name, `dice_1` for a class)."""
        metric, old = catalogue.lookup(name, self.class_names), self.ranking
        self.ranking = metric
        if metric == old and metric.label != old.label:  # the same metric, its class named now
            self.events.ranking.emit(metric, old)
        return metric

    def set_shown_class(self, index: int) -> None:
        """Show and review the class `index` from now on (what the result panels show: their choice)."""
        self.shown_class = index

    def set_quality_spec(self, spec: MetricSpec) -> None:
        """Compute these QA metrics beside Dice from now on: every image is scored again with them."""
        self.quality = spec
        self._all_changed()
