"""Slides are opened off the GUI thread, on the job runner's `SLIDES` lane (a 16k x 16k PNG takes seconds to
decode; a pyramidal TIFF only has its coarsest level read), with their masks."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Signal

from ...core.dataset.dataset import Dataset, DatasetItem
from ...core.session.jobs import Job as SessionJob
from ...core.slides import SlideReader, open_slide
from .jobs import SLIDES, Job, Jobs

#: The coarsest level is read whole and always shown when its longest side is at most this.
BASE_MAX_SIDE = 4096

def read_base(reader: SlideReader) -> np.ndarray | None:
    """The coarsest level as RGB, or None where even that level is too big to hold as one texture."""
    level = len(reader.levels) - 1
    lv = reader.levels[level]
    if max(lv.width, lv.height) > BASE_MAX_SIDE:
        return None
    return np.ascontiguousarray(reader.read_region(level, 0, 0, lv.width, lv.height)[..., ::-1])


def open_reader(item: DatasetItem, dataset: Dataset) -> tuple[SlideReader, np.ndarray | None]:
    """Open `item`'s slide and read its coarsest level (on a worker); nothing stays open on failure."""
    reader = open_slide(item.image_path, dataset.max_pixels)
    try:
        return reader, read_base(reader)
    except BaseException:
        reader.close()
        raise


class SlideLoading(QObject):
    """A window's slide loading: `request(load, item, dataset)` opens the slide and runs the session's `load` job
    (`Session.select`: the image's size and mask) beside it; only the newest request's answer comes back (an
    older one not started yet never starts; one that opened its slide meanwhile closes it)."""

    loaded = Signal(object, object, object, object)  # item, SlideReader, base RGB or None, the load job's answer
    failed = Signal(object, str, str)  # item, message, details

    def __init__(self, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self._generation = 0
        self._job: Job | None = None

    def request(self, load: SessionJob[Any], item: DatasetItem, dataset: Dataset) -> None:
        if self._job is not None:
            self._job.dequeue()
        self._generation += 1
        self._job = self.jobs.submit(None, partial(_load, load, item, dataset),
                                     partial(self._on_loaded, self._generation, item),
                                     partial(self._on_failed, self._generation, item), lane=SLIDES)

    def _on_loaded(self, generation: int, item: DatasetItem, opened: tuple[SlideReader, object, object]) -> None:
        reader, base, answer = opened
        if generation == self._generation:
            self.loaded.emit(item, reader, base, answer)
        else:
            reader.close()

    def _on_failed(self, generation: int, item: DatasetItem, text: str, details: str) -> None:
        if generation == self._generation:
            self.failed.emit(item, text, details)


def _load(load: SessionJob[Any], item: DatasetItem, dataset: Dataset) -> tuple[SlideReader, object, object]:
    reader, base = open_reader(item, dataset)
    try:
        return reader, base, load.work()
    except BaseException:
        reader.close()
        raise
