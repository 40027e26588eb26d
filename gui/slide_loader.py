"""Slides are opened off the GUI thread (a 16k x 16k PNG takes seconds to decode; a pyramidal TIFF only
has its coarsest level read), with their masks."""

from __future__ import annotations

import threading

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal, Slot

from ..core.dataset.dataset import Dataset, DatasetItem
from ..core.slides import SlideReader, open_slide
from .run_controller import describe_error

#: The coarsest level is read whole and always shown when its longest side is at most this.
BASE_MAX_SIDE = 4096


def read_base(reader: SlideReader) -> np.ndarray | None:
    """The coarsest level as RGB, or None where even that level is too big to hold as one texture."""
    level = len(reader.levels) - 1
    lv = reader.levels[level]
    if max(lv.width, lv.height) > BASE_MAX_SIDE:
        return None
    return np.ascontiguousarray(reader.read_region(level, 0, 0, lv.width, lv.height)[..., ::-1])


class SlideLoader(QObject):
    """Opens a slide (+ mask) and reads its coarsest level in its own thread; stale requests are skipped."""

    loaded = Signal(int, object, object, object, object)  # generation, item, SlideReader, base RGB, mask
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
        reader = None
        try:
            reader = open_slide(item.image_path, dataset.max_pixels)
            base = read_base(reader)
            mask = dataset.load_mask(item)
        except Exception as exc:  # noqa: BLE001 - shown in the message area
            if reader is not None:
                reader.close()
            self.failed.emit(generation, item, *describe_error(exc))
            return
        self.loaded.emit(generation, item, reader, base, mask)


class SlideLoading(QObject):
    """A window's loader thread: `request(item, dataset)`; only the newest request's answer comes back."""

    loaded = Signal(object, object, object, object)  # item, SlideReader, base RGB or None, mask or None
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

    def _on_loaded(self, generation: int, item: DatasetItem, reader: SlideReader, base: object,
                   mask: object) -> None:
        if generation == self._generation:
            self.loaded.emit(item, reader, base, mask)
        else:
            reader.close()

    def _on_failed(self, generation: int, item: DatasetItem, text: str, details: str) -> None:
        if generation == self._generation:
            self.failed.emit(item, text, details)

    def shutdown(self) -> None:
        self._thread.quit()
        self._thread.wait(10000)
