"""Slides are opened off the GUI thread, on the job runner's `SLIDES` lane (a 16k x 16k PNG takes seconds to
decode; a pyramidal TIFF only has its coarsest level read), with their masks."""

from __future__ import annotations

from functools import partial
from typing import Optional

import numpy as np
from PySide6.QtCore import QObject, Signal

from ..core.dataset.dataset import Dataset, DatasetItem
from ..core.slides import SlideReader, open_slide
from .jobs import SLIDES, Job, Jobs

#: The coarsest level is read whole and always shown when its longest side is at most this.
BASE_MAX_SIDE = 4096

#: An opened slide: its reader, its coarsest level as RGB (None: too big), its mask (None: it has none).
Opened = tuple[SlideReader, Optional[np.ndarray], Optional[np.ndarray]]  # noqa: UP007 (run-time alias, 3.9)


def read_base(reader: SlideReader) -> np.ndarray | None:
    """The coarsest level as RGB, or None where even that level is too big to hold as one texture."""
    level = len(reader.levels) - 1
    lv = reader.levels[level]
    if max(lv.width, lv.height) > BASE_MAX_SIDE:
        return None
    return np.ascontiguousarray(reader.read_region(level, 0, 0, lv.width, lv.height)[..., ::-1])


def load_slide(item: DatasetItem, dataset: Dataset) -> Opened:
    """Open `item`'s slide, read its coarsest level and its mask (on a worker); nothing stays open on failure."""
    reader = open_slide(item.image_path, dataset.max_pixels)
    try:
        return reader, read_base(reader), dataset.load_mask(item)
    except BaseException:
        reader.close()
        raise


class SlideLoading(QObject):
    """A window's slide loading: `request(item, dataset)`; only the newest request's answer comes back (an
    older one not started yet never starts; one that opened its slide meanwhile closes it)."""

    loaded = Signal(object, object, object, object)  # item, SlideReader, base RGB or None, mask or None
    failed = Signal(object, str, str)  # item, message, details

    def __init__(self, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self._generation = 0
        self._job: Job | None = None

    def request(self, item: DatasetItem, dataset: Dataset) -> None:
        if self._job is not None:
            self._job.dequeue()
        self._generation += 1
        self._job = self.jobs.submit(None, partial(load_slide, item, dataset),
                                     partial(self._on_loaded, self._generation, item),
                                     partial(self._on_failed, self._generation, item), lane=SLIDES)

    def _on_loaded(self, generation: int, item: DatasetItem, opened: Opened) -> None:
        reader, base, mask = opened
        if generation == self._generation:
            self.loaded.emit(item, reader, base, mask)
        else:
            reader.close()

    def _on_failed(self, generation: int, item: DatasetItem, text: str, details: str) -> None:
        if generation == self._generation:
            self.failed.emit(item, text, details)
