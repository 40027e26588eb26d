"""The viewer's state without Qt: one model under the widgets (as napari keeps its layers free of Qt).

`Session` owns the dataset, the current image, its ROI, every result (one bounded `RunHistory`), the
metrics and the mask document of the image on screen. Each fact has one owner:

- the ROI of an image lives in the dataset (its sidecar); the session is the only writer and keeps an
  undo stack of moves; a run takes a snapshot (`run_plan`), so dragging during a run never fights it,
  and a result whose ROI differs from the image's ROI is *stale* (`is_stale`);
- results live once, in `history`; `result(id)` is the newest that still has its arrays;
- metrics are always those of the mask on screen (the document) or on disk: edits mark them stale and
  `metrics(id)` re-scores on read, so a Discard or Save can never leave an old number anywhere;
- the newest whole-slide run (`slide_run`, one at a time: its stitched canvases can be large) gives any
  ROI of that slide a result (`stitched_result`) without running it;
- the metric that ranks the images (worst first, the next/previous worst keys, the histogram) is `ranking`,
  one of `core.metric_catalogue`'s, the foreground Dice unless the user picks another (`set_ranking`);
- with `persist`, each image's newest result is also kept on disk (`core.session_store`), so reopening the
  dataset, even after a restart, restores its runs (re-scored against the masks on disk).

Views subscribe to the `Event`s in `SessionEvents` and call the session; nothing here knows about widgets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from . import metric_catalogue as catalogue
from .backends.base import Capabilities
from .dataset import Dataset, DatasetItem
from .errors import SegScopeError
from .evaluate import DatasetSummary, ImageEvaluation, evaluation_row
from .events import Event
from .mask_document import MaskDocument
from .metric_catalogue import Metric
from .metrics import ImageMetrics, image_metrics
from .quality.scoring import ImageQuality
from .result import InferenceResult
from .roi import Roi
from .runs import RunHistory, RunRecord
from .session_store import SessionStore
from .tiled_eval import TiledEvaluation

#: ROI moves remembered for undo, per session.
ROI_UNDO_LIMIT = 100


@dataclass
class SessionEvents:
    """What views subscribe to; the arguments are in each comment."""

    dataset_opened: Event = field(default_factory=lambda: Event("dataset_opened"))  # (dataset)
    current_changed: Event = field(default_factory=lambda: Event("current_changed"))  # (item or None)
    slide_loaded: Event = field(default_factory=lambda: Event("slide_loaded"))  # (item)
    roi_changed: Event = field(default_factory=lambda: Event("roi_changed"))  # (item id, roi)
    result_added: Event = field(default_factory=lambda: Event("result_added"))  # (item id, RunRecord)
    metrics_changed: Event = field(default_factory=lambda: Event("metrics_changed"))  # (item id, metrics|None)
    store_failed: Event = field(default_factory=lambda: Event("store_failed"))  # (message)
    document_changed: Event = field(default_factory=lambda: Event("document_changed"))  # (MaskDocument, kind)
    slide_run_added: Event = field(default_factory=lambda: Event("slide_run_added"))  # (TiledEvaluation)
    ranking_changed: Event = field(default_factory=lambda: Event("ranking_changed"))  # (Metric)


class Session:
    """The state of one viewer window; see the module docstring."""

    def __init__(self, history: RunHistory | None = None, persist: bool = True) -> None:
        self.events = SessionEvents()
        self.persist = persist
        self.store: SessionStore | None = None
        #: What reopening the dataset could not restore (one line each), for the views to show.
        self.restore_notes: list[str] = []
        self.history = history if history is not None else RunHistory()
        self.dataset: Dataset | None = None
        self.current: DatasetItem | None = None
        self.document: MaskDocument | None = None  # the current image's mask, once its slide is loaded
        self.capabilities: Capabilities | None = None
        self.recovery_dir: Path | None = None
        self._sizes: dict[str, tuple[int, int]] = {}  # image sizes seen, for the default-ROI rule
        self._metrics: dict[str, ImageMetrics | None] = {}
        self._stale_metrics: set[str] = set()
        self._roi_undo: list[tuple[str, Roi, Roi]] = []  # (item id, before, after)
        self._roi_redo: list[tuple[str, Roi, Roi]] = []
        self.slide_run: TiledEvaluation | None = None
        self.ranking: Metric = catalogue.lookup(catalogue.DEFAULT_RANKING)

    # ------------------------------------------------------------------------------------------ dataset
    def open_dataset(self, dataset: Dataset) -> None:
        """Show a dataset. Reopening the same folder keeps its runs and metrics; another folder's are dropped
        (their ids name other images)."""
        new_folder = self.dataset is None or dataset.root != self.dataset.root
        self.flush()
        if new_folder:
            self.history.records.clear()
            self._sizes.clear()
            self._metrics.clear()
            self._stale_metrics.clear()
            self._roi_undo.clear()
            self._roi_redo.clear()
            self.slide_run = None
        self.dataset = dataset
        self.current = self.document = None
        self.restore_notes = []
        if new_folder and self.persist:
            self.store = SessionStore(dataset.root)
            self._restore(self.store)
        self.events.dataset_opened.emit(dataset)
        self.events.current_changed.emit(None)

    def flush(self) -> None:
        """Wait until every result is on disk (before closing, or reading the store elsewhere)."""
        if self.store is not None:
            self.store.flush()

    def _restore(self, store: SessionStore) -> None:
        """Results kept on disk by an earlier session, re-scored against today's masks."""
        dataset = self._dataset()
        stored, self.restore_notes = store.load()
        known = {item.id for item in dataset.items}
        for entry in stored:
            if entry.image_id not in known:
                continue
            item = dataset.item(entry.image_id)
            try:
                mask = dataset.load_mask(item)
                metrics = image_metrics(entry.result, mask, str(item.truth_path)) if mask is not None else None
            except SegScopeError as exc:
                self.restore_notes.append(f"{item.id}: stored result not restored: {exc}")
                continue
            self.history.add(item.id, entry.result)
            self._sizes.setdefault(item.id, entry.result.image_size)
            self._metrics[item.id] = metrics

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
            self._roi_undo = [*self._roi_undo, (item_id, before, roi)][-ROI_UNDO_LIMIT:]
            self._roi_redo.clear()
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
                self._roi_undo = [*self._roi_undo, (item_id, before, after)][-ROI_UNDO_LIMIT:]
                self._roi_redo.clear()
            self.events.roi_changed.emit(item_id, after)
        return after

    @property
    def can_undo_roi(self) -> bool:
        return bool(self._roi_undo)

    @property
    def can_redo_roi(self) -> bool:
        return bool(self._roi_redo)

    def undo_roi(self) -> str | None:
        """Undo the last ROI move (of any image); returns that image's id."""
        if not self._roi_undo:
            return None
        step = self._roi_undo.pop()
        self._roi_redo.append(step)
        self.set_roi(step[1], step[0], undoable=False)
        return step[0]

    def redo_roi(self) -> str | None:
        if not self._roi_redo:
            return None
        step = self._roi_redo.pop()
        self._roi_undo.append(step)
        self.set_roi(step[2], step[0], undoable=False)
        return step[0]

    # ------------------------------------------------------------------------------------------ results
    def run_plan(self, item_ids: list[str]) -> dict[str, Roi]:
        """The ROIs a run uses, taken now (the run works on this snapshot, whatever the user drags later)."""
        return {item_id: self.roi_for(item_id) for item_id in item_ids}

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
        self._metrics[item_id] = evaluation.metrics
        self._stale_metrics.discard(item_id)
        if self.document is not None and self.document.item.id == item_id and self.document.editor is not None:
            self._stale_metrics.add(item_id)
        if self.store is not None:
            self.store.submit(item_id, evaluation.result)
            for error in self.store.take_errors():  # of earlier writes: reported here, in the caller's thread
                self.events.store_failed.emit(f"{error}: results are kept for this session only")
        self.events.result_added.emit(item_id, record)
        self.events.metrics_changed.emit(item_id, self.metrics(item_id))
        return record

    def add_slide_run(self, evaluation: TiledEvaluation) -> None:
        """Keep a finished whole-slide run (replacing the one before) and announce it."""
        self.slide_run = evaluation
        self.events.slide_run_added.emit(evaluation)

    def stitched_result(self, item_id: str, roi: Roi) -> InferenceResult | None:
        """The whole-slide run's output under `roi` of image `item_id` (None: no such run, or it did not cover
        the ROI)."""
        run = self.slide_run
        return run.stitched.crop(roi) if run is not None and run.item.id == item_id else None

    def result(self, item_id: str) -> InferenceResult | None:
        """The newest result of an image that still has its arrays (the history drops old arrays)."""
        for record in reversed(self.history.records):
            if record.image_id == item_id:
                return record.result
        return None

    def is_stale(self, item_id: str) -> bool:
        """Whether the image's newest result was computed on another ROI than the image has now."""
        result = self.result(item_id)
        return result is not None and result.roi != self.roi_for(item_id)

    @property
    def result_ids(self) -> list[str]:
        """Images with a result to show or export, in dataset order."""
        if self.dataset is None:
            return []
        return [item.id for item in self.dataset.items if self.result(item.id) is not None]

    # ------------------------------------------------------------------------------------------ metrics
    def metrics(self, item_id: str) -> ImageMetrics | None:
        """The image's metrics against the mask on screen or on disk (re-scored here after edits)."""
        if item_id in self._stale_metrics:
            self._stale_metrics.discard(item_id)
            self._metrics[item_id] = self._score(item_id)
        return self._metrics.get(item_id)

    def has_metrics(self, item_id: str) -> bool:
        """Whether the image was run (its metrics may still be None: no mask)."""
        return item_id in self._metrics

    def _score(self, item_id: str) -> ImageMetrics | None:
        result = self.result(item_id)
        if result is None:
            return self._metrics.get(item_id)
        document = self.document if self.document is not None and self.document.item.id == item_id else None
        if document is not None:
            mask, source = document.mask, str(document.item.truth_path or document.source)
        else:
            item = self._dataset().item(item_id)
            mask, source = self._dataset().load_mask(item), str(item.truth_path)
        return None if mask is None else image_metrics(result, mask, source)

    def set_quality(self, item_id: str, basis: ImageMetrics, quality: ImageQuality) -> bool:
        """Add QA metrics computed elsewhere (a worker) against the metrics `basis` to the image's metrics and
        announce them; False (dropped) when its metrics are no longer `basis` (an edit, a new run since)."""
        if self._metrics.get(item_id) is not basis or item_id in self._stale_metrics:
            return False
        self._metrics[item_id] = replace(basis, quality=quality)
        self.events.metrics_changed.emit(item_id, self._metrics[item_id])
        return True

    def refresh_metrics(self, item_id: str) -> None:
        """Announce an image's metrics (re-scored if edits made them stale); views rate-limit this."""
        if item_id in self._metrics:
            self.events.metrics_changed.emit(item_id, self.metrics(item_id))

    def _on_document_changed(self, document: MaskDocument, kind: str) -> None:
        """Edits mark the metrics stale (re-scored when read); a save or discard re-scores at once."""
        item_id = document.item.id
        if self.current is not None and self.current.id == item_id:
            self.current = document.item  # a saved new mask is adopted into the dataset
        if item_id in self._metrics:
            self._stale_metrics.add(item_id)
        self.events.document_changed.emit(document, kind)
        if kind != "edit":
            self.refresh_metrics(item_id)

    @property
    def class_names(self) -> tuple[str, ...]:
        """The model's classes (none before a backend is open)."""
        return self.capabilities.class_names if self.capabilities is not None else ()

    def set_ranking(self, name: str) -> Metric:
        """Rank the images by the metric called `name` (a catalogue name, `dice_1` for a class)."""
        metric = catalogue.lookup(name, self.class_names)
        if metric != self.ranking or metric.label != self.ranking.label:
            self.ranking = metric
            self.events.ranking_changed.emit(metric)
        return metric

    def ranking_values(self, item_ids: list[str] | None = None) -> dict[str, float | None]:
        """The ranking metric of the images run so far (or `item_ids`), None where it is n/a or there is no mask."""
        ids = item_ids if item_ids is not None else list(self._metrics)
        return {item_id: self.ranking.of(self.metrics(item_id)) for item_id in ids if self.has_metrics(item_id)}

    def summary(self, item_ids: list[str] | None = None) -> DatasetSummary:
        """Means over the images run so far (or `item_ids`) that have masks."""
        summary = DatasetSummary()
        for item_id in item_ids if item_ids is not None else list(self._metrics):
            summary.add(self.metrics(item_id))
        return summary

    def metrics_table(self, item_ids: list[str] | None = None) -> tuple[list[dict[str, object]], dict[str, object]]:
        """Rows (one per image run, or per image of `item_ids`) and their means, for `write_metrics`."""
        dataset = self._dataset()
        wanted = set(item_ids) if item_ids is not None else None
        rows, ids = [], []
        for item in dataset.items:
            if item.id in self._metrics and (wanted is None or item.id in wanted):
                result = self.result(item.id)
                roi = result.roi if result is not None else self.roi_for(item.id)
                rows.append(evaluation_row(item, roi, self.metrics(item.id), result.timings if result else None,
                                           result.roi_note if result else ""))
                ids.append(item.id)
        return rows, dict(self.summary(ids).means())
