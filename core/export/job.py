"""The viewer's export as one job, Qt-free: what the session can export now (`Exportable`), the user's choices
(`ExportChoices`), the files they will write (`ExportPlan`: each file's name, format, pixel size and bytes,
derived from the results themselves, so the Export dialog offers and sizes what is really written), and the
work that writes them (`Exportable.steps`): the same export run (`core.export.writer.ExportRun`) and plan
(`core.export.plan.plan_item`) as `segscope eval --export`.

What is offered depends on the kind of result: an image's ROI run (`ROI_KINDS`: masks at ROI size, a canvas
at slide size, the softmax at model resolution, ...) or its whole-slide run (`TILED_KINDS`, stitched at the
run's output scale, as `eval --tile --export` writes it).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Protocol

import numpy as np

from ..backends.base import Capabilities
from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.masks import mask_to_labels
from ..errors import CancelledError, SegScopeError
from ..evaluate import DatasetSummary, truth_at_result
from ..metrics.catalogue import Metric
from ..result import InferenceResult
from ..wholeslide.evaluate import TiledEvaluation
from ..wholeslide.export import export_stitched, tiled_row
from .files import ExportFolder, described_files
from .names import EXPORT_KINDS, PROVENANCE_NAME, RUN_KINDS
from .plan import (
    TILED_KINDS,
    TITLES,
    Estimate,
    PlannedFile,
    check_kinds,
    corrected_plan,
    exports_review_log,
    plan_item,
    plan_run,
    summary,
)
from .provenance import Source, source_for
from .writer import ExportRun

#: What an ROI run exports, in the order offered.
ROI_KINDS = (*EXPORT_KINDS, *RUN_KINDS)
Table = Callable[[], "tuple[list[dict[str, object]], dict[str, object]]"]
#: Where the mask an image is scored against is read from (None: its truth file), `Session.edited_mask`.
MaskSource = Callable[[], Optional[np.ndarray]]


class ScoredTruth(Protocol):
    """What the export reads of the truth an image is scored against (`core.session.truth.ImageTruth`)."""

    @property
    def exists(self) -> bool: ...

    def describe(self, root: Path | None = None) -> dict[str, str] | None: ...


class ExportSession(Protocol):
    """What the export reads of the viewer's session (`core.session.session.Session`)."""

    dataset: Dataset | None
    current: DatasetItem | None
    ranking: Metric

    @property
    def result_ids(self) -> list[str]: ...

    def result(self, item_id: str) -> InferenceResult | None: ...

    def slide_run_of(self, item_id: str) -> TiledEvaluation | None: ...

    def metrics_table_job(self, item_ids: list[str] | None = None) -> Table: ...

    def truth(self, item_id: str) -> ScoredTruth: ...

    def edited_mask(self, item_id: str) -> MaskSource: ...


@dataclass(frozen=True)
class ExportChoices:
    """What the user chose to export."""

    kinds: tuple[str, ...]  # of ROI_KINDS (or TILED_KINDS with `stitched`), in that order
    metrics: bool  # metrics.csv + metrics.json
    folder: Path
    scope: str  # "current" or "all" (every image with such a result)
    item_ids: tuple[str, ...]  # the images in scope
    overwrite: bool
    stitched: bool = False  # the images' whole-slide runs (stitched, at their output scale), not their ROI runs


@dataclass(frozen=True)
class ExportPlan:
    """Every file an export of `choices` writes, per image (its provenance sidecar last), then once for the run."""

    choices: ExportChoices
    items: dict[str, list[PlannedFile]]
    run: list[PlannedFile] = field(default_factory=list)

    def files(self) -> list[PlannedFile]:
        return [f for files in self.items.values() for f in files] + self.run

    def targets(self) -> list[Path]:
        """Every file's path in the export folder."""
        return [self.choices.folder / f.name for f in self.files()]

    def removed(self) -> list[Path]:
        """Files of an earlier export of these images that this one, replacing it, leaves out (with overwrite:
        an image's export is replaced as a whole, so its sidecar never describes files of another run)."""
        folder = self.choices.folder
        return [folder / name for item, files in self.items.items()
                for name in described_files(folder / PROVENANCE_NAME.format(id=item))
                if name not in {f.name for f in files} and (folder / name).exists()]

    def estimate(self) -> Estimate:
        return Estimate.of(self.files())


@dataclass(frozen=True)
class Progress:
    """One step of the export: images written so far; at the end, what was published. `notes`: what was found
    of an interrupted export in the folder and done about it."""

    done: int
    total: int
    written: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()


class Exportable:
    """What `session` can export now: its ROI results and whole-slide runs, taken at once (referenced, not
    copied), so an export planned or started from it is unaffected by later runs."""

    def __init__(self, session: ExportSession, capabilities: Capabilities | None = None):
        dataset = session.dataset
        self.dataset = dataset
        self.root = dataset.root if dataset is not None else None
        self.current_id = session.current.id if session.current is not None else None
        self.ranking = session.ranking
        self._session = session
        items = {item.id: item for item in dataset.items} if dataset is not None else {}
        self._results = {i: (result, source_for(items[i], capabilities)) for i in session.result_ids
                         if (result := session.result(i)) is not None}
        self._truths = {i: (session.truth(i), session.edited_mask(i)) for i in self._results}
        self._runs = {i: (run, capabilities) for i in items if (run := session.slide_run_of(i)) is not None}
        self._sources: dict[str, Source] = {i: s for i, (_, s) in self._results.items()}
        self._sources.update({i: source_for(r.item, capabilities) for i, (r, _) in self._runs.items()})

    def ids(self, stitched: bool) -> tuple[str, ...]:
        """The images with such a result, in dataset order."""
        return tuple(self._runs if stitched else self._results)

    @staticmethod
    def kinds(stitched: bool) -> tuple[str, ...]:
        return TILED_KINDS if stitched else ROI_KINDS

    def _item_files(self, item_id: str, kinds: Sequence[str], stitched: bool) -> list[PlannedFile]:
        source = self._sources[item_id]
        corrected = corrected_plan(item_id, source.corrected) if "corrected" in kinds else None
        output = self._runs[item_id][0].stitched if stitched else self._results[item_id][0]
        files = plan_item(item_id, kinds, output, tiled=stitched, corrected=corrected)
        return files + [PlannedFile(PROVENANCE_NAME.format(id=item_id), "provenance", "JSON")] if files else []

    def plan(self, choices: ExportChoices) -> ExportPlan:
        """The files `choices` write; unknown kinds and images without such a result are refused."""
        kinds = list(choices.kinds)
        check_kinds(kinds, self.kinds(choices.stitched))
        missing = next((i for i in choices.item_ids if i not in self.ids(choices.stitched)), None)
        if missing is not None:
            what = "whole-slide run" if choices.stitched else "result"
            raise SegScopeError(f"{missing}: its {what} is no longer in memory; run it again to export")
        items = {i: self._item_files(i, kinds, choices.stitched) for i in choices.item_ids}
        truths = any(self._truths[i][0].exists for i in items if i in self._truths)
        run = plan_run(kinds if choices.item_ids else [], truths, choices.metrics,
                       exports_review_log(kinds, self.root))
        return ExportPlan(choices, {i: files for i, files in items.items() if files}, run)

    def offer(self, kind: str, stitched: bool, item_ids: Sequence[str]) -> tuple[str, str]:
        """How the dialog offers `kind` for the images `item_ids`: what it is, and its files as they will be
        written (format, pixel size, values) with their estimated size."""
        title = TITLES[kind].format(class_index=1)
        if kind in RUN_KINDS:
            return title, "one file for the export"
        files = [f for i in item_ids for f in self._item_files(i, [kind], stitched) if f.kind == kind]
        if not files:
            return title, "none of these images has one" if kind == "corrected" else ""
        count = f" for {len(files)} of {len(item_ids)} images" if kind == "corrected" else ""
        return title, f"{summary(files)}{count} — {Estimate.of(files).text()}"

    def steps(self, choices: ExportChoices, cancel: threading.Event | None = None) -> Callable[[], Iterator[Progress]]:
        """The export as work for a worker, everything it needs taken now: it writes one image per step, then
        the COCO file and the metrics table (of the exported images only), all published as one unit at the
        end (the last step holds the files written); the folder is as it was after any failure. `cancel` set:
        it stops before the next image (a `CancelledError`), the folder as it was."""
        ids, kinds, ranking = list(choices.item_ids), list(choices.kinds), self.ranking
        table = self._stitched_table(ids) if choices.stitched else self._session.metrics_table_job(ids)

        def write(item_id: str, folder: ExportFolder) -> None:
            if choices.stitched:
                run, capabilities = self._runs[item_id]
                export_stitched(folder, run, capabilities, kinds)
            else:
                folder.export_result(self._results[item_id][0], self._scored_source(item_id, kinds), kinds)

        def check_cancel(done: int, total: int) -> None:
            if cancel is not None and cancel.is_set():
                raise CancelledError(f"export to {choices.folder} cancelled after {done} of {total} images")

        def run() -> Iterator[Progress]:
            planned = self.plan(choices)  # refuses what cannot be written before the folder is touched
            todo = [i for i in ids if i in planned.items]
            with ExportRun(choices.folder, choices.overwrite, self.root, metrics=choices.metrics,
                           review_log=exports_review_log(kinds, self.root)) as export:
                yield Progress(0, len(todo), notes=tuple(export.notes))
                for done, item_id in enumerate(todo):
                    check_cancel(done, len(todo))
                    export.write(functools.partial(write, item_id))
                    yield Progress(done + 1, len(todo))
                check_cancel(len(todo), len(todo))
                rows, means = table() if choices.metrics else ([], {})
                for row in rows:
                    export.add_row(row)
                export.finish(means, ranking)
            yield Progress(len(todo), len(todo), tuple(export.written))
        return run

    def _scored_source(self, item_id: str, kinds: Sequence[str]) -> Source:
        """An ROI result's source with the truth it is scored against, as `eval --export` has it: named in the
        provenance, and for COCO its classes under the ROI (the truth side; read here, on the export's worker)."""
        result, source = self._results[item_id]
        truth, mask = self._truths[item_id]
        if not truth.exists:
            return source
        labels = None
        if "coco" in kinds and self.dataset is not None:
            roi_mask = truth_at_result(self.dataset, self.dataset.item(item_id), result, mask())
            labels = None if roi_mask is None else mask_to_labels(roi_mask, result.num_classes)
        return replace(source, truth=truth.describe(self.root), truth_labels=labels)

    def _stitched_table(self, ids: list[str]) -> Table:
        runs = [self._runs[i][0] for i in ids if i in self._runs]

        def table() -> tuple[list[dict[str, object]], dict[str, object]]:
            summary = DatasetSummary()
            for run in runs:
                summary.add(run.metrics)
            return [tiled_row(run, self.root) for run in runs], dict(summary.means())
        return table
