"""Inference off the GUI thread.

A worker object living in its own QThread owns the `Backend`: it opens it, runs images through
`core.evaluate.evaluate_dataset` (or a whole slide in tiles through `core.wholeslide.evaluate.evaluate_slide`) and
closes it. The controller in the GUI thread queues requests to it,
tracks progress and ETA, and turns every failure into a message (never an exception in the GUI).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal, Slot

from ..core.backends.base import Backend, Capabilities
from ..core.backends.pool import UsageLog
from ..core.dataset.dataset import Dataset, DatasetItem
from ..core.errors import CancelledError, describe
from ..core.evaluate import ImageEvaluation, evaluate_dataset
from ..core.quality.spec import MetricSpec
from ..core.roi import Roi
from ..core.session.backend_state import BackendState
from ..core.slides import SlideReader
from ..core.stream.input import RegionSource, StreamInput
from ..core.wholeslide.evaluate import TilePlan, evaluate_slide
from .option_labels import OPTION_LABELS

BackendFactory = Callable[[], Backend]


class Openable(Protocol):
    """A backend choice the controller can open (the Backend dialog's `BackendChoice`)."""

    def describe(self) -> str: ...

    def open(self) -> Backend: ...


NO_BACKEND = "No backend is open: choose one in Backend > Connection…"
#: Per image id: its request made from its ROI (a region read of the slide the viewer has open).
Sources = Mapping[str, RegionSource]
#: Per image id: its ground truth as read from its mask file, already in memory (the viewer's open mask).
Masks = Mapping[str, np.ndarray]


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(one line for the message list, details): a user-fixable error is its own message, its option named
    as the viewer's control; anything else is a bug, shown with its traceback."""
    described = describe(exc, OPTION_LABELS)
    return (f"Internal error: {described.line}" if described.bug else described.line), described.details


class _Worker(QObject):
    opened = Signal(object)  # Capabilities
    openFailed = Signal(str, str)
    closeFailed = Signal(str, str)
    evaluated = Signal(object)  # ImageEvaluation
    slideEvaluated = Signal(object)  # TiledEvaluation
    tilesDone = Signal(int, int)  # tiles blended in, tiles in all
    usage = Signal(list, list)  # per device or cluster worker: `UsageLog.as_dicts()`, `UsageLog.lines()`
    itemFailed = Signal(str, str, str)  # item id, message, details
    batchDone = Signal(int, int, bool)  # done, failed, cancelled
    closed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.backend: Backend | None = None
        self.cancel_event = threading.Event()
        self.quality = MetricSpec()  # the QA metrics each image is also scored by (`RunController.set_quality`)

    @Slot(object)
    def open_backend(self, factory: BackendFactory) -> None:
        self._close_backend()
        try:
            self.backend = factory()
        except Exception as exc:  # noqa: BLE001 - reported to the user, the worker keeps running
            self.openFailed.emit(*describe_error(exc))
            return
        self.opened.emit(self.backend.capabilities)

    @Slot(object, list, object, object, object, object)
    def run(self, dataset: Dataset, items: list[DatasetItem], rois: dict[str, Roi], sources: Sources,
            masks: Masks, stream: StreamInput | None) -> None:
        """Evaluate `items` on `rois` (`sources`, `masks`, `stream`: see `RunController.run`); a failing image
        is reported and the batch goes on with the next one. An image without an ROI in `rois` (never shown:
        its size was not known) gets the dataset's rule for its size here, read from its file's header; one
        that cannot be read is that image's error."""
        done = failed = 0
        cancelled = False
        rois, remaining = dict(rois), []
        for item in items:
            try:
                rois.setdefault(item.id, dataset.roi_for(item))
            except Exception as exc:  # noqa: BLE001 - one unreadable image must not end the batch
                self.itemFailed.emit(item.id, *describe_error(exc))
                failed += 1
                continue
            remaining.append(item)
        while remaining and not cancelled:
            if self.backend is None:
                for item in remaining:
                    self.itemFailed.emit(item.id, NO_BACKEND, "")
                failed += len(remaining)
                break
            yielded = 0
            try:
                for evaluation in evaluate_dataset(self.backend, dataset, items=remaining, cancel=self.cancel_event,
                                                   rois=rois, sources=sources, masks=masks, stream=stream,
                                                   quality=self.quality):
                    yielded += 1
                    done += 1
                    self.evaluated.emit(evaluation)
                    self._report_usage()
                    if self.cancel_event.is_set():
                        raise CancelledError("cancelled")
                remaining = []
            except CancelledError:
                cancelled = True
            except Exception as exc:  # noqa: BLE001 - one bad image must not end the batch
                if self.cancel_event.is_set():
                    cancelled = True
                    break
                text, details = describe_error(exc)
                self.itemFailed.emit(remaining[yielded].id, text, details)
                failed += 1
                remaining = remaining[yielded + 1 :]
        self.batchDone.emit(done, failed, cancelled)

    def _report_usage(self) -> None:
        """The devices' or cluster workers' counts so far, where the backend keeps them."""
        usage = getattr(self.backend, "usage", None)
        if isinstance(usage, UsageLog):
            self.usage.emit(usage.as_dicts(), usage.lines())

    @Slot(object, object, object, object)
    def run_slide(self, dataset: Dataset, item: DatasetItem, reader: SlideReader, plan: TilePlan) -> None:
        """The whole slide of `item` in tiles from its open `reader`, scored against its mask."""
        if self.backend is None:
            self.itemFailed.emit(item.id, NO_BACKEND, "")
            self.batchDone.emit(0, 1, False)
            return
        try:
            evaluation = evaluate_slide(self.backend, dataset, item, reader, plan,
                                        progress=self.tilesDone.emit, cancel=self.cancel_event)
        except CancelledError:
            self.batchDone.emit(0, 0, True)
            return
        except Exception as exc:  # noqa: BLE001 - reported to the user, the worker keeps running
            if self.cancel_event.is_set():
                self.batchDone.emit(0, 0, True)
                return
            self.itemFailed.emit(item.id, *describe_error(exc))
            self.batchDone.emit(0, 1, False)
            return
        self.slideEvaluated.emit(evaluation)
        self._report_usage()
        self.batchDone.emit(1, 0, False)

    @Slot()
    def close(self) -> None:
        self._close_backend()
        self.closed.emit()

    def _close_backend(self) -> None:
        if self.backend is not None:
            backend, self.backend = self.backend, None
            try:
                backend.close()
            except Exception as exc:  # noqa: BLE001 - closing must never take the app down
                self.closeFailed.emit(*describe_error(exc))


class RunController(QObject):
    """The GUI side: `run(dataset, items)`, `cancel()`, progress with ETA, and the backend's lifecycle: it opens
    each choice of `state` and reports back to it (capabilities, failures, busy)."""

    backendOpened = Signal(object)  # Capabilities
    backendFailed = Signal(str, str)  # text, details: no backend is open now
    evaluated = Signal(object)  # ImageEvaluation
    slideEvaluated = Signal(object)  # TiledEvaluation
    usage = Signal(list, list)  # per device or cluster worker, after each image: as_dicts(), lines()
    itemFailed = Signal(str, str, str)  # item id, message, details
    message = Signal(str, str, str)  # level, text, details
    progress = Signal(int, int, float)  # finished, total, ETA in seconds (nan while unknown)
    batchFinished = Signal(int, int, bool)  # done, failed, cancelled

    _open = Signal(object)
    _run = Signal(object, list, object, object, object, object)
    _run_slide = Signal(object, object, object, object)
    _close = Signal()

    def __init__(self, state: BackendState[Openable], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self._total = self._finished = 0
        self._started = 0.0
        self._thread = QThread()
        self._thread.setObjectName("segscope-inference")
        self._worker = _Worker()
        self._worker.moveToThread(self._thread)
        self._open.connect(self._worker.open_backend)
        self._run.connect(self._worker.run)
        self._run_slide.connect(self._worker.run_slide)
        self._worker.slideEvaluated.connect(self.slideEvaluated)
        self._worker.usage.connect(self.usage)
        self._worker.tilesDone.connect(self._on_tiles_done)
        self._close.connect(self._worker.close)
        self._worker.opened.connect(self._on_opened)
        self._worker.openFailed.connect(self._on_open_failed)
        self._worker.closeFailed.connect(lambda text, details: self.message.emit("warning", f"Closing the backend: "
                                                                                           f"{text}", details))
        self._worker.evaluated.connect(self._on_evaluated)
        self._worker.itemFailed.connect(self._on_item_failed)
        self._worker.batchDone.connect(self._on_batch_done)
        self._thread.start()
        state.events.opening.connect(lambda choice: self._open.emit(choice.open))  # the previous one closes first

    @property
    def busy(self) -> bool:
        return self.state.busy

    def run(self, dataset: Dataset, items: list[DatasetItem], rois: dict[str, Roi] | None = None,
            sources: Sources | None = None, masks: Masks | None = None, stream: StreamInput | None = None) -> bool:
        """Queue a batch on `rois` (a snapshot per image; the dataset's ROIs for the others); `sources` make
        some images' requests from an open slide instead of their file, `masks` score some on ground truth
        already in memory instead of reading it, `stream` is the stream's ROI rule (`evaluate_dataset`).
        False (and a message) when one is already running."""
        if self.busy:
            self.message.emit("warning", "A run is in progress: wait for it or cancel it (Esc)", "")
            return False
        if not items:
            return False
        self._worker.cancel_event.clear()
        self._total, self._finished, self._started = len(items), 0, time.perf_counter()
        self._set_busy(True)
        self.progress.emit(0, self._total, float("nan"))
        self._run.emit(dataset, list(items), dict(rois or {}), dict(sources or {}), dict(masks or {}), stream)
        return True

    def run_slide(self, dataset: Dataset, item: DatasetItem, reader: SlideReader, plan: TilePlan,
                  tiles: int) -> bool:
        """Queue a whole-slide run of `item` from its open `reader` (`tiles` of them, for the progress);
        False (and a message) when a run is already going."""
        if self.busy:
            self.message.emit("warning", "A run is in progress: wait for it or cancel it (Esc)", "")
            return False
        self._worker.cancel_event.clear()
        self._total, self._finished, self._started = tiles, 0, time.perf_counter()
        self._set_busy(True)
        self.progress.emit(0, tiles, float("nan"))
        self._run_slide.emit(dataset, item, reader, plan)
        return True

    def set_quality(self, spec: MetricSpec) -> None:
        """Score the images of the runs started from now on by these QA metrics too (on the worker thread)."""
        self._worker.quality = spec

    def cancel(self) -> None:
        """Stop the batch after the image in flight (and interrupt it where the backend can)."""
        if not self.busy:
            return
        self._worker.cancel_event.set()
        backend = self._worker.backend
        if backend is not None:
            backend.cancel()  # thread-safe by the Backend contract

    def shutdown(self, timeout_ms: int = 15000) -> None:
        """Cancel, close the backend in its thread and stop the thread (call once, on window close)."""
        if not self._thread.isRunning():
            return
        self.cancel()
        self._close.emit()
        self._thread.quit()
        self._thread.wait(timeout_ms)

    def _set_busy(self, busy: bool) -> None:
        self.state.set_busy(busy)

    def _on_tiles_done(self, done: int, total: int) -> None:
        self._total, self._finished = total, done - 1
        self._step()

    def _step(self) -> None:
        self._finished += 1
        elapsed = time.perf_counter() - self._started
        eta = elapsed / self._finished * (self._total - self._finished)
        self.progress.emit(self._finished, self._total, eta)

    def _on_opened(self, capabilities: Capabilities) -> None:
        self.state.opened(capabilities)
        self.backendOpened.emit(capabilities)

    def _on_open_failed(self, text: str, details: str) -> None:
        self.backendFailed.emit(text, details)
        self.state.failed(text, details)  # may open the backend open before again

    def _on_evaluated(self, evaluation: ImageEvaluation) -> None:
        self._step()
        self.evaluated.emit(evaluation)

    def _on_item_failed(self, item_id: str, text: str, details: str) -> None:
        self._step()
        self.itemFailed.emit(item_id, text, details)
        self.message.emit("error", f"{item_id}: {text}", details)

    def _on_batch_done(self, done: int, failed: int, cancelled: bool) -> None:
        self._set_busy(False)
        self.batchFinished.emit(done, failed, cancelled)
