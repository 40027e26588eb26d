"""One export's run, as `segscope eval --export` (beside inference), the viewer's Export and `segscope.Analysis.export`
write it (`ExportRun`): the folder staged and locked (`ExportFolder`: published all or nothing when the run ends),
each image's files written as planned (`core.export.plan.plan_item`: an ROI run's, `ExportFolder.export_result`, or
a whole-slide run's, `core.wholeslide.export.export_stitched`), its metric row streamed to the table on the export's
disk, then the run's files (`plan_run`: COCO, the metric tables).

With `background`, each image's files are encoded and written on a writer thread while the next image is inferred
(`ExportWriter`): exactly as without the thread (into the folder's next version), one image at a time and in order.
What follows an image (its printed line) runs once its files are written, so the lines and files are the same as
without the thread, and a failed write stops the run at that image with its one-line error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..metrics.catalogue import Metric
from .files import ExportFolder, MetricsTable

#: One image's files, written into the export's folder (the paths written).
WriteItem = Callable[[ExportFolder], object]


def _nothing() -> None:
    return None


class ExportWriter:
    """Writes images into `folder` on a writer thread when `background`, else in place."""

    def __init__(self, folder: ExportFolder, background: bool = True):
        self.folder = folder
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="segscope-export") if background else None
        self._pending: tuple[Future[object], Callable[[], None]] | None = None

    def submit(self, write: WriteItem, then: Callable[[], None]) -> None:
        """Write one image's files (`write(folder)`), then call `then` (on this thread); the image before it is
        finished first, and its failure raises here."""
        self.finish()
        if self._pool is None:
            write(self.folder)
            then()
        else:
            self._pending = (self._pool.submit(write, self.folder), then)

    def finish(self) -> None:
        """Wait for the image in flight, raise its failure or call what follows it."""
        if self._pending is not None:
            future, then = self._pending
            self._pending = None
            future.result()
            then()

    def __enter__(self) -> ExportWriter:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        """The image in flight is always finished: after an error later in the run it is still complete and
        its line still printed (as without the thread); its own failure, earlier in order, wins."""
        try:
            self.finish()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


class ExportRun:
    """One export into `folder`, all or nothing; use it as a context manager around the whole run (see the module
    docstring). `record_written` False: `folder.written` stays empty (eval's 100,000 images); `metrics` False: no
    metric tables; `review_log`: the dataset's review log too (with the corrected masks: `plan_run`)."""

    def __init__(self, folder: Path, overwrite: bool = False, dataset_root: Path | None = None, *,
                 metrics: bool = True, background: bool = False, record_written: bool = True,
                 review_log: bool = False) -> None:
        self.folder = ExportFolder(folder, overwrite, dataset_root, record_written=record_written)
        self._metrics, self._background, self._review_log = metrics, background, review_log
        self._table: MetricsTable | None = None
        self._writer: ExportWriter | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> ExportRun:
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.folder)  # locked and staged for the whole run, published when it ends
            self._table = stack.enter_context(self.folder.metrics_table()) if self._metrics else None
            self._writer = stack.enter_context(ExportWriter(self.folder, self._background))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.__exit__(*exc_info)  # type: ignore[arg-type]

    @property
    def notes(self) -> list[str]:
        """What was found of an interrupted export in the folder and done about it."""
        return self.folder.notes

    @property
    def written(self) -> list[Path]:
        return self.folder.written

    def refuse_existing(self, names: Iterable[str]) -> None:
        """Refuse, before anything is written, names already in the folder (unless overwriting)."""
        self.folder.refuse_existing(names)

    def write(self, write: WriteItem, then: Callable[[], None] = _nothing) -> None:
        """One image's files (`write(folder)`), then `then` (see `ExportWriter.submit`)."""
        assert self._writer is not None, "write inside the run's block"
        self._writer.submit(write, then)

    def flush(self) -> None:
        """Wait for the image in flight (and call what follows it)."""
        if self._writer is not None:
            self._writer.finish()

    def add_row(self, row: Mapping[str, object]) -> None:
        """One image's row of the metric tables (kept on the export's disk, not in memory)."""
        if self._table is not None:
            self._table.add(row)

    def finish(self, means: Mapping[str, object], ranking: Metric | None = None) -> None:
        """The run's files, once every image's are written: the COCO files, the dataset's review log (asked for with
        the corrected masks), the metric tables (`means`)."""
        self.flush()
        self.folder.write_coco()
        if self._review_log:
            self.folder.write_review_log()
        if self._table is not None:
            self._table.finish(means, ranking)
