"""File > Export: ask what and where (`ExportDialog` never lets a file be replaced silently), then write the
chosen files on a worker, one image per step, with `core.export.files` (ROI results) or `core.wholeslide.export.
export_stitched` (whole-slide runs: the files `eval --tile --export` writes); progress goes to the status bar,
problems and the list of written files to the message area."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ..core.backends.base import Capabilities
from ..core.errors import SegScopeError
from ..core.evaluate import DatasetSummary
from ..core.export.files import ExportFolder
from ..core.export.provenance import Source, source_for
from ..core.result import InferenceResult
from ..core.session.session import Session
from ..core.wholeslide.evaluate import TiledEvaluation
from ..core.wholeslide.export import export_stitched, tiled_row
from .export_dialog import ExportChoices, ExportDialog
from .jobs import Jobs
from .status_labels import count

#: (images done, images in all, files written by this step)
Step = tuple[int, int, list[Path]]


def ask_export(session: Session, parent: QWidget) -> ExportChoices | None:
    """The user's choices (None: cancelled); the current image is offered when it has a result or a
    whole-slide run."""
    dataset = session.dataset
    slide_ids = [item.id for item in dataset.items if session.slide_run_of(item.id)] if dataset else []
    current = session.current.id if session.current is not None else None
    dialog = ExportDialog(current, session.result_ids, parent, slide_ids=slide_ids)
    return dialog.choices() if dialog.exec() == ExportDialog.DialogCode.Accepted else None


def export_steps(session: Session, capabilities: Capabilities | None,
                 choices: ExportChoices) -> Callable[[], Iterator[Step]]:
    """The export as work for a worker, everything it needs taken now: it writes one image per step, then
    the COCO file and the metrics table (of the exported images only), all as one export of the folder."""
    dataset = session.dataset
    assert dataset is not None
    ids, kinds, ranking = list(choices.item_ids), list(choices.kinds), session.ranking
    writers: list[Callable[[ExportFolder], list[Path]]] = []
    missing = ""
    if choices.stitched:
        runs = [run for run in map(session.slide_run_of, ids) if run is not None]
        missing = next((item_id for item_id in ids if session.slide_run_of(item_id) is None), "")
        writers = [partial(_write_stitched, run=run, capabilities=capabilities, kinds=kinds) for run in runs]

        def table() -> tuple[list[dict[str, object]], dict[str, object]]:
            summary = DatasetSummary()
            for run in runs:
                summary.add(run.metrics)
            return [tiled_row(run) for run in runs], dict(summary.means())
    else:
        for item_id in ids:
            result, source = session.result(item_id), source_for(dataset.item(item_id), capabilities)
            missing = missing or ("" if result is not None else item_id)
            writers.append(partial(_write_result, result=result, source=source, kinds=kinds))
        table = session.metrics_table_job(ids)

    def steps() -> Iterator[Step]:
        if missing:
            raise SegScopeError(f"{missing}: its result is no longer in memory; run it again to export")
        with ExportFolder(choices.folder, choices.overwrite, dataset.root) as folder:
            for done, write in enumerate(writers if kinds else [], 1):
                yield done, len(writers), write(folder)
            yield len(writers), len(writers), folder.write_coco()
            if choices.metrics:
                rows, means = table()
                yield len(writers), len(writers), folder.write_metrics(rows, means, ranking)
    return steps


def _write_stitched(folder: ExportFolder, run: TiledEvaluation, capabilities: Capabilities | None,
                    kinds: list[str]) -> list[Path]:
    return export_stitched(folder, run, capabilities, kinds)


def _write_result(folder: ExportFolder, result: InferenceResult | None, source: Source, kinds: list[str]) -> list[Path]:
    assert result is not None  # (missing results stop the export before its first file)
    return folder.export_result(result, source, kinds)


class Exporter(QObject):
    """Runs one export at a time in the background; `finished(list of paths)` when it ends (also after a
    failure: the files written before it)."""

    finished = Signal(list)
    #: (level, text, details) for the message area
    message = Signal(str, str, str)
    #: a short note for the status bar
    note = Signal(str)

    def __init__(self, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self.running = False

    def start(self, session: Session, capabilities: Capabilities | None, choices: ExportChoices) -> bool:
        """Start writing `choices` (False, with a note, when an export is already running)."""
        if self.running:
            self.note.emit("An export is running: wait for it to finish")
            return False
        written: list[Path] = []

        def step(answer: Step) -> None:
            done, total, paths = answer
            written.extend(paths)
            self.note.emit(f"Exporting to {choices.folder}: {done} of {count(total, 'image')}…")

        def end(error: str = "", details: str = "") -> None:
            self.running = False
            if error:
                self.message.emit("error", f"Export: {error}", details)
            if written:
                self.message.emit("info", f"Exported {count(len(written), 'file')} to {choices.folder}",
                                  "\n".join(str(p) for p in written))
            self.note.emit("Export finished" if not error else "Export failed")
            self.finished.emit(written)

        self.running = True
        self.note.emit(f"Exporting to {choices.folder}…")
        self.jobs.stream("export", export_steps(session, capabilities, choices), step, end, end)
        return True
