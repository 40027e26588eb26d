"""Slides are decoded and their pyramids built off the GUI thread (a 16k x 16k slide takes seconds)."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, QThread, Signal, Slot

from ..core.dataset import Dataset, DatasetItem
from ..core.fileio import read_image
from ..core.pyramid import Pyramid
from .run_controller import describe_error


class SlideLoader(QObject):
    """Decodes a slide (+ mask) and builds its pyramid in its own thread; stale requests are skipped."""

    loaded = Signal(int, object, object, object)  # generation, item, Pyramid, mask or None
    failed = Signal(int, object, str, str)  # generation, item, message, details

    def __init__(self) -> None:
        super().__init__()
        self.latest = 0
        self._lock = threading.Lock()

    def request(self, generation: int) -> None:
        with self._lock:
            self.latest = generation

    @Slot(int, object, object)
    def load(self, generation: int, item: DatasetItem, dataset: Dataset) -> None:
        if generation != self.latest:
            return
        try:
            image = read_image(item.image_path, dataset.max_pixels)
            pyramid = Pyramid.build(image)
            mask = dataset.load_mask(item)
        except Exception as exc:  # noqa: BLE001 - shown in the message area
            self.failed.emit(generation, item, *describe_error(exc))
            return
        self.loaded.emit(generation, item, pyramid, mask)


class SlideLoading(QObject):
    """A window's loader thread: `request(item, dataset)`; only the newest request's answer comes back."""

    loaded = Signal(object, object, object)  # item, Pyramid, mask or None
    failed = Signal(object, str, str)  # item, message, details
    _load = Signal(int, object, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._generation = 0
        self._thread = QThread(self)
        self._thread.setObjectName("segscope-slide-loader")
        self._loader = SlideLoader()
        self._loader.moveToThread(self._thread)
        self._load.connect(self._loader.load)
        self._loader.loaded.connect(self._on_loaded)
        self._loader.failed.connect(self._on_failed)
        self._thread.start()

    def request(self, item: DatasetItem, dataset: Dataset) -> None:
        self._generation += 1
        self._loader.request(self._generation)
        self._load.emit(self._generation, item, dataset)

    def _on_loaded(self, generation: int, item: DatasetItem, pyramid: Pyramid, mask: object) -> None:
        if generation == self._generation:
            self.loaded.emit(item, pyramid, mask)

    def _on_failed(self, generation: int, item: DatasetItem, text: str, details: str) -> None:
        if generation == self._generation:
            self.failed.emit(item, text, details)

    def shutdown(self) -> None:
        self._thread.quit()
        self._thread.wait(10000)
