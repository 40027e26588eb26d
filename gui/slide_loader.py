"""Slides are decoded and their pyramids built off the GUI thread (a 16k x 16k slide takes seconds)."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal, Slot

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
