"""Inference off the GUI thread.

The backend lives on the job runner's `BACKEND` lane (one thread, in order): it is opened, runs images through
`core.evaluate.evaluate_dataset` (or a whole slide in tiles through `core.wholeslide.evaluate.evaluate_slide`)
and is closed there. The controller in the GUI thread queues those jobs, tracks progress and ETA, and turns
every failure into a message (never an exception in the GUI).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Protocol, Union

import numpy as np
from PySide6.QtCore import QObject, Signal

from ..core.backends.base import Backend, Capabilities
from ..core.backends.pool import UsageLog
from ..core.dataset.dataset import Dataset, DatasetItem
from ..core.errors import CancelledError
from ..core.evaluate import ImageEvaluation, evaluate_dataset
from ..core.quality.spec import MetricSpec
from ..core.roi import Roi
from ..core.session.backend_state import BackendState
from ..core.slides import SlideReader
from ..core.stream.input import RegionSource, StreamInput
from ..core.wholeslide.evaluate import TiledEvaluation, TilePlan, evaluate_slide
from .jobs import BACKEND, Flag, Jobs, describe_error

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


@dataclass(frozen=True)
class ItemFailed:
    item_id: str
    text: str
    details: str


@dataclass(frozen=True)
class Usage:
    """Per device or cluster worker: `UsageLog.as_dicts()`, `UsageLog.lines()`."""

    devices: list
    lines: list


@dataclass(frozen=True)
class BatchDone:
    done: int
    failed: int
    cancelled: bool


#: What a run on the backend lane yields to the GUI thread, in order.
Message = Union[ImageEvaluation, TiledEvaluation, ItemFailed, Usage, BatchDone]


class Inference:
    """The open backend; its methods run on the `BACKEND` lane only (`cancel` of the backend aside)."""

    def __init__(self) -> None:
        self.backend: Backend | None = None

    def open(self, factory: BackendFactory) -> Capabilities:
        self.backend = factory()
        return self.backend.capabilities

    def close(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()

    def run(self, dataset: Dataset, items: list[DatasetItem], rois: dict[str, Roi], sources: Sources,
            masks: Masks, stream: StreamInput | None, quality: MetricSpec, cancel: Flag) -> Iterator[Message]:
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
                yield ItemFailed(item.id, *describe_error(exc))
                failed += 1
                continue
            remaining.append(item)
        while remaining and not cancelled:
            if self.backend is None:
                for item in remaining:
                    yield ItemFailed(item.id, NO_BACKEND, "")
                failed += len(remaining)
                break
            yielded = 0
            try:
                for evaluation in evaluate_dataset(self.backend, dataset, items=remaining, cancel=cancel,
                                                   rois=rois, sources=sources, masks=masks, stream=stream,
                                                   quality=quality):
                    yielded += 1
                    done += 1
                    yield evaluation
                    yield from self._usage()
                    if cancel.is_set():
                        raise CancelledError("cancelled")
                remaining = []
            except CancelledError:
                cancelled = True
            except Exception as exc:  # noqa: BLE001 - one bad image must not end the batch
                if cancel.is_set():
                    cancelled = True
                    break
                yield ItemFailed(remaining[yielded].id, *describe_error(exc))
                failed += 1
                remaining = remaining[yielded + 1 :]
        yield BatchDone(done, failed, cancelled)

    def _usage(self) -> Iterator[Usage]:
        """The devices' or cluster workers' counts so far, where the backend keeps them."""
        usage = getattr(self.backend, "usage", None)
        if isinstance(usage, UsageLog):
            yield Usage(usage.as_dicts(), usage.lines())

    def run_slide(self, dataset: Dataset, item: DatasetItem, reader: SlideReader, plan: TilePlan,
                  progress: Callable[[int, int], None], cancel: Flag) -> Iterator[Message]:
        """The whole slide of `item` in tiles from its open `reader`, scored against its mask."""
        if self.backend is None:
            yield ItemFailed(item.id, NO_BACKEND, "")
            yield BatchDone(0, 1, False)
            return
        try:
            evaluation = evaluate_slide(self.backend, dataset, item, reader, plan, progress=progress, cancel=cancel)
        except CancelledError:
            yield BatchDone(0, 0, True)
            return
        except Exception as exc:  # noqa: BLE001 - reported to the user, the lane keeps running
            if cancel.is_set():
                yield BatchDone(0, 0, True)
                return
            yield ItemFailed(item.id, *describe_error(exc))
            yield BatchDone(0, 1, False)
            return
        yield evaluation
        yield from self._usage()
        yield BatchDone(1, 0, False)


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

    def __init__(self, state: BackendState[Openable], jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state, self.jobs = state, jobs
        self.quality = MetricSpec()  # the QA metrics each image is also scored by (`set_quality`)
        self._inference = Inference()
        self._cancel = Flag()
        self._closed = False
        self._total = self._finished = 0
        self._started = 0.0
        state.events.opening.connect(self._open)

    @property
    def busy(self) -> bool:
        return self.state.busy

    def _open(self, choice: Openable) -> None:
        """Close the backend open now, then open `choice`'s, both on the backend lane."""
        self.jobs.submit(None, self._inference.close, None, partial(self._warn, "Closing the backend: "), lane=BACKEND)
        self.jobs.submit(None, partial(self._inference.open, choice.open), self._on_opened, self._on_open_failed,
                         lane=BACKEND)

    def run(self, dataset: Dataset, items: list[DatasetItem], rois: dict[str, Roi] | None = None,
            sources: Sources | None = None, masks: Masks | None = None, stream: StreamInput | None = None) -> bool:
        """Queue a batch on `rois` (a snapshot per image; the dataset's ROIs for the others); `sources` make
        some images' requests from an open slide instead of their file, `masks` score some on ground truth
        already in memory instead of reading it, `stream` is the stream's ROI rule (`evaluate_dataset`).
        False (and a message) when one is already running."""
        if not items or not self._start(len(items)):
            return False
        self._queue(partial(self._inference.run, dataset, list(items), dict(rois or {}), dict(sources or {}),
                            dict(masks or {}), stream, self.quality, self._cancel))
        return True

    def run_slide(self, dataset: Dataset, item: DatasetItem, reader: SlideReader, plan: TilePlan,
                  tiles: int) -> bool:
        """Queue a whole-slide run of `item` from its open `reader` (`tiles` of them, for the progress);
        False (and a message) when a run is already going."""
        if not self._start(tiles):
            return False
        self._queue(partial(self._inference.run_slide, dataset, item, reader, plan,
                            self.jobs.relay(self._on_tiles_done), self._cancel))
        return True

    def _start(self, total: int) -> bool:
        if self.busy:
            self.message.emit("warning", "A run is in progress: wait for it or cancel it (Esc)", "")
            return False
        self._cancel = Flag()
        self._total, self._finished, self._started = total, 0, time.perf_counter()
        self._set_busy(True)
        self.progress.emit(0, total, float("nan"))
        return True

    def _queue(self, run: Callable[[], Iterator[Message]]) -> None:
        self.jobs.stream(None, run, self._on_message, None, self._on_run_failed, lane=BACKEND)

    def set_quality(self, spec: MetricSpec) -> None:
        """Score the images of the runs started from now on by these QA metrics too (on the backend lane)."""
        self.quality = spec

    def cancel(self) -> None:
        """Stop the batch after the image in flight (and interrupt it where the backend can)."""
        if not self.busy:
            return
        self._cancel.set()
        backend = self._inference.backend
        if backend is not None:
            backend.cancel()  # thread-safe by the Backend contract

    def shutdown(self) -> None:
        """Cancel, then close the backend on its lane and wait for it (call once, on window close)."""
        if self._closed:
            return
        self._closed = True
        self.cancel()
        self.jobs.submit(None, self._inference.close, lane=BACKEND).wait()

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

    def _on_message(self, message: Message) -> None:
        if isinstance(message, ImageEvaluation):
            self._step()
            self.evaluated.emit(message)
        elif isinstance(message, TiledEvaluation):
            self.slideEvaluated.emit(message)
        elif isinstance(message, Usage):
            self.usage.emit(message.devices, message.lines)
        elif isinstance(message, ItemFailed):
            self._on_item_failed(message.item_id, message.text, message.details)
        else:
            self._on_batch_done(message.done, message.failed, message.cancelled)

    def _on_run_failed(self, text: str, details: str) -> None:
        """A bug outside the per-image handling: said, and the run ends (the next one may start)."""
        self.message.emit("error", text, details)
        self._on_batch_done(0, 1, False)

    def _warn(self, prefix: str, text: str, details: str) -> None:
        self.message.emit("warning", prefix + text, details)

    def _on_item_failed(self, item_id: str, text: str, details: str) -> None:
        self._step()
        self.itemFailed.emit(item_id, text, details)
        self.message.emit("error", f"{item_id}: {text}", details)

    def _on_batch_done(self, done: int, failed: int, cancelled: bool) -> None:
        self._set_busy(False)
        self.batchFinished.emit(done, failed, cancelled)
