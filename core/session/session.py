"""The viewer's state without Qt: one model under the widgets (as napari keeps its layers free of Qt).

`Session` owns the dataset, the current image, its ROI, every result (one bounded `RunHistory`), the
metrics and the mask document of the image on screen. Each fact has one owner:

- the ROI of an image lives in the dataset (its sidecar); the session is the only writer and keeps an
  undo stack of moves; a run takes a snapshot (`run_plan`), so dragging during a run never fights it,
  and a result whose ROI differs from the image's ROI is *stale* (`is_stale`);
- results live once, in `history`; `result(id)` is the newest that still has its arrays;
- metrics are always those of the mask on screen (the document) or on disk: edits mark them stale and
  `metrics(id)` re-scores on read, so a Discard or Save can never leave an old number anywhere;
- each image's newest whole-slide run (`slide_run_of`; kept within `SLIDE_RUN_BYTES`, the newest always)
  gives any ROI of that slide a result (`stitched_result`) without running it;
- the metric that ranks the images (worst first, the next/previous worst keys, the histogram) is `ranking`,
  one of `core.metrics.catalogue`'s, the foreground Dice unless the user picks another (`set_ranking`);
- with `persist`, each image's newest result and whole-slide run are also kept on disk
  (`core.session.store`), so reopening the dataset, even after a restart, restores them (re-scored against
  the masks on disk).

Nothing heavy has to happen in the caller's thread: re-scoring is a `ScoreJob` taken here and run anywhere
(`score_job`, `adopt_score`; `metrics()` runs it in place for headless callers), and restoring is
`restore_entries()` (reads and scores; any thread) handed to `adopt_restored` one entry at a time.
Views subscribe to the `Event`s in `SessionEvents` and call the session; nothing here knows about widgets.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..backends.base import Capabilities
from ..dataset.dataset import Dataset, DatasetItem
from ..editing.document import MaskDocument
from ..errors import SegScopeError
from ..evaluate import ImageEvaluation
from ..metrics import catalogue
from ..metrics.catalogue import Metric
from ..result import InferenceResult
from ..roi import Roi
from ..wholeslide.evaluate import TiledEvaluation
from .backend_state import BackendState
from .events import SessionEvents
from .metrics import SessionMetrics
from .restore import Restored, restored_entries
from .roi_undo import RoiUndo
from .runs import RunHistory, RunRecord
from .store import SessionStore

#: Whole-slide runs kept in memory (their stitched canvases), newest first; the newest is always kept.
SLIDE_RUN_BYTES = 1536 << 20
#: Why a result on screen is dimmed (`Session.stale_reason`).
ROI_CHANGED, OTHER_MODEL = "ROI changed", "another model"


class Session(SessionMetrics):
    """The state of one viewer window; see the module docstring."""

    def __init__(self, history: RunHistory | None = None, persist: bool = True,
                 backend: BackendState | None = None) -> None:
        super().__init__()
        self.events = SessionEvents()
        self.persist = persist
        self.store: SessionStore | None = None
        self.history = history if history is not None else RunHistory()
        self.dataset: Dataset | None = None
        self.current: DatasetItem | None = None
        self.document: MaskDocument | None = None  # the current image's mask, once its slide is loaded
        self.backend = backend  # the viewer's backend (None headless: no model is open)
        self.recovery_dir: Path | None = None
        self._sizes: dict[str, tuple[int, int]] = {}  # image sizes seen, for the default-ROI rule
        self.roi_moves = RoiUndo()
        self.slide_runs: dict[str, TiledEvaluation] = {}  # by image id, oldest first

    # ------------------------------------------------------------------------------------------ dataset
    def open_dataset(self, dataset: Dataset) -> bool:
        """Show a dataset. Reopening the same folder keeps its runs and metrics; another folder's are dropped
        (their ids name other images). Returns whether it is another folder, whose stored runs
        `restore_entries` can then bring back (`restore()` in place)."""
        new_folder = self.dataset is None or dataset.root != self.dataset.root
        if new_folder:
            self.history.records.clear()
            self._sizes.clear()
            self._forget_metrics()
            self.roi_moves.clear()
            self.slide_runs.clear()
            self.store = SessionStore(dataset.root) if self.persist else None
        self.dataset = dataset
        self.current = self.document = None
        self.events.dataset_opened.emit(dataset)
        self.events.current_changed.emit(None)
        return new_folder

    def flush(self) -> None:
        """Wait until every result is on disk (before closing, or reading the store elsewhere)."""
        if self.store is not None:
            self.store.flush()

    def restore_entries(self) -> Iterator[Restored]:
        """The open dataset's results and whole-slide runs kept on disk by an earlier session, each re-scored
        against today's mask on disk, one at a time. The iterator reads and scores only (iterate it on a
        worker; it keeps to the dataset open now); nothing changes here until each entry is given to
        `adopt_restored`."""
        store, dataset = self.store, self.dataset
        return restored_entries(store, dataset) if store is not None and dataset is not None else iter(())

    def adopt_restored(self, entry: Restored) -> bool:
        """Take one restored entry (in the session's thread); False when it is not taken: only a note, an
        image of another dataset, or one that got a newer result or whole-slide run meanwhile."""
        dataset = self.dataset
        if (dataset is None or entry.root != dataset.root or not entry.image_id
                or not any(i.id == entry.image_id for i in dataset.items)):
            return False
        if entry.result is not None:
            if self.result(entry.image_id) is not None:
                return False
            record = self.history.add(entry.image_id, entry.result)
            self._sizes.setdefault(entry.image_id, entry.result.image_size)
            self._metrics[entry.image_id] = entry.metrics
            self.events.result_restored.emit(entry.image_id, record)
            self.events.metrics_changed.emit(entry.image_id, entry.metrics)
            return True
        if entry.slide_run is not None and entry.image_id not in self.slide_runs:
            self._keep_slide_run(entry.slide_run)
            self.events.slide_run_added.emit(entry.slide_run, True)
            return True
        return False

    def restore(self) -> list[str]:
        """`restore_entries` adopted in place (headless callers); returns the notes."""
        notes = []
        for entry in self.restore_entries():
            if entry.note:
                notes.append(entry.note)
            self.adopt_restored(entry)
        return notes

    def _dataset(self) -> Dataset:
        if self.dataset is None:
            raise SegScopeError("no dataset is open: open a dataset folder first")
        return self.dataset

    def select(self, item_id: str) -> DatasetItem:
        """Make `item_id` the current image; its slide is not loaded yet (`slide_loaded` follows)."""
        item = self._dataset().item(item_id)
        self.current, self.document = item, None
        self.events.current_changed.emit(item)
        return item

    def slide_loaded(self, item_id: str, image_size: tuple[int, int], mask: np.ndarray | None) -> MaskDocument:
        """The current image's slide is decoded: its size is known and its mask becomes the document."""
        dataset = self._dataset()
        item = dataset.item(item_id)
        self._sizes[item_id] = image_size
        self.document = MaskDocument(dataset, item, image_size, mask, self.recovery_dir)
        self.document.changed.connect(self._on_document_changed)
        self.events.slide_loaded.emit(item)
        return self.document

    @property
    def ready(self) -> bool:
        """Whether the current image's slide is loaded (so it has a size, a ROI and a document)."""
        return self.current is not None and self.document is not None and self.document.item.id == self.current.id

    @property
    def mask(self) -> np.ndarray | None:
        """The current image's ground truth on screen (edited, or as on disk); None before its slide loads."""
        return self.document.mask if self.document is not None and self.ready else None

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
            dataset.set_roi(item, roi)
        finally:
            self.events.roi_changed.emit(item_id, roi)
        return roi

    def reset_roi(self) -> Roi | None:
        """Back to the dataset's default ROI for the current image (undoable)."""
        if not self.ready or self.current is None:
            return None
        item_id = self.current.id
        before = self.roi_for(item_id)
        try:
            self._dataset().reset_roi(self.current)  # forgets the picked ROI: the default rule applies again
        finally:
            after = self.roi_for(item_id)
            if after != before:
                self.roi_moves.record(item_id, before, after)
            self.events.roi_changed.emit(item_id, after)
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

    # ------------------------------------------------------------------------------------------ results
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
        """Ground truth in memory exactly as its file holds it (the open image's mask as loaded or last
        saved), by image id: a run scores on it instead of decoding the file again."""
        document = self.document
        if document is None or document.disk_mask is None:
            return {}
        return {document.item.id: document.disk_mask}

    def add_evaluation(self, evaluation: ImageEvaluation) -> RunRecord:
        """Store a finished run. Its metrics were scored on the mask file; while the image has unsaved
        edits they are re-scored on the edited mask."""
        item_id = evaluation.item.id
        record = self.history.add(item_id, evaluation.result, self.capabilities)
        self._sizes.setdefault(item_id, evaluation.result.image_size)
        self._scored(item_id, evaluation.metrics)
        if self.store is not None:
            self.store.submit(item_id, evaluation.result)
            self._report_store_errors()
        self.events.result_added.emit(item_id, record)
        self.events.metrics_changed.emit(item_id, evaluation.metrics)
        if self.document is not None and self.document.item.id == item_id and self.document.editor is not None:
            self._invalidate(item_id)  # scored on the file; the mask on screen has edits
        return record

    def _report_store_errors(self) -> None:
        if self.store is not None:
            for error in self.store.take_errors():  # of earlier writes: reported here, in the caller's thread
                self.events.store_failed.emit(f"{error}: results are kept for this session only")

    def add_slide_run(self, evaluation: TiledEvaluation) -> None:
        """Keep a finished whole-slide run (replacing the image's one before; kept on disk too) and announce
        it."""
        self._keep_slide_run(evaluation)
        if self.store is not None:
            self.store.submit_slide(evaluation)
            self._report_store_errors()
        self.events.slide_run_added.emit(evaluation, False)

    def _keep_slide_run(self, evaluation: TiledEvaluation) -> None:
        runs = self.slide_runs
        runs.pop(evaluation.item.id, None)
        runs[evaluation.item.id] = evaluation
        total = 0
        for item_id, run in reversed(list(runs.items())):  # newest first; the newest is always kept
            total += run.stitched.nbytes
            if total > SLIDE_RUN_BYTES and item_id != evaluation.item.id:
                del runs[item_id]

    def slide_run_of(self, item_id: str) -> TiledEvaluation | None:
        """The image's newest whole-slide run kept in memory."""
        return self.slide_runs.get(item_id)

    def stitched_result(self, item_id: str, roi: Roi) -> InferenceResult | None:
        """The whole-slide run's output under `roi` of image `item_id` (None: no such run, or it did not cover
        the ROI)."""
        run = self.slide_runs.get(item_id)
        return run.stitched.crop(roi) if run is not None else None

    def record(self, item_id: str) -> RunRecord | None:
        """The newest run of an image that still has its arrays (the history drops old arrays)."""
        for record in reversed(self.history.records):
            if record.image_id == item_id:
                return record if record.result is not None else None
        return None

    def result(self, item_id: str) -> InferenceResult | None:
        """The newest result of an image that still has its arrays."""
        record = self.record(item_id)
        return record.result if record is not None else None

    def stale_reason(self, item_id: str) -> str:
        """Why the image's newest result no longer answers for it ("" when it does): `ROI_CHANGED` (computed
        on another ROI than the image has now) or `OTHER_MODEL` (by another model than the one open)."""
        record = self.record(item_id)
        if record is None or record.result is None:
            return ""
        if record.result.roi != self.roi_for(item_id):
            return ROI_CHANGED
        model = self.backend.model if self.backend is not None else ""
        return OTHER_MODEL if model and record.model and record.model != model else ""

    def is_stale(self, item_id: str) -> bool:
        """Whether the image's newest result no longer answers for it (see `stale_reason`)."""
        return bool(self.stale_reason(item_id))

    @property
    def result_ids(self) -> list[str]:
        """Images with a result to show or export, in dataset order."""
        if self.dataset is None:
            return []
        return [item.id for item in self.dataset.items if self.result(item.id) is not None]

    # ------------------------------------------------------------------------------------------ model
    @property
    def capabilities(self) -> Capabilities | None:
        """The open backend's (None before one is open)."""
        return self.backend.capabilities if self.backend is not None else None

    @property
    def class_names(self) -> tuple[str, ...]:
        """The model's classes (none before a backend is open)."""
        return self.backend.class_names if self.backend is not None else ()

    def _on_document_changed(self, document: MaskDocument, kind: str) -> None:
        """Every change of the mask on screen (an edit, a save, a discard) makes the metrics stale."""
        item_id = document.item.id
        if self.current is not None and self.current.id == item_id:
            self.current = document.item  # a saved new mask is adopted into the dataset
        self.events.document_changed.emit(document, kind)
        if item_id in self._metrics:
            self._invalidate(item_id)

    def set_ranking(self, name: str) -> Metric:
        """Rank the images by the metric called `name` (a catalogue name, `dice_1` for a class)."""
        metric = catalogue.lookup(name, self.class_names)
        if metric != self.ranking or metric.label != self.ranking.label:
            self.ranking = metric
            self.events.ranking_changed.emit(metric)
        return metric
