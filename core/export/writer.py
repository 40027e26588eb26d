"""`segscope eval --export` beside inference: each image's files are encoded and written on a writer thread
while the next image is inferred.

The `ExportFolder` does the writing exactly as without the thread (into the folder's next version, published
all or nothing when the run ends); this only moves the call onto one thread, one image at a time and in
order. What follows an image (its printed line) runs once its files are written, so the lines and files
are the same as without the thread, and a failed write stops the run at that image with its one-line error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from ..result import InferenceResult
from .files import ExportFolder
from .provenance import Source


class ExportWriter:
    """Exports into `folder` (None: nothing to write) on a writer thread when `background`, else in place."""

    def __init__(self, folder: ExportFolder | None, background: bool = True):
        self.folder = folder
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="segscope-export") \
            if folder is not None and background else None
        self._pending: tuple[Future[object], Callable[[], None]] | None = None

    def submit(self, result: InferenceResult, source: Source, kinds: Iterable[str],
               then: Callable[[], None]) -> None:
        """Export one image's `kinds`, then call `then` (on this thread); the image before it is finished
        first, and its failure raises here."""
        self.finish()
        if self.folder is None:
            then()
        elif self._pool is None:
            self.folder.export_result(result, source, list(kinds))
            then()
        else:
            self._pending = (self._pool.submit(self.folder.export_result, result, source, list(kinds)), then)

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
