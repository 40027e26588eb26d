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
        self._ahead: Job | None = None  # the slide opened ahead (`prefetch`), while it is being opened
        self._ahead_generation = 0
        self._ahead_item: DatasetItem | None = None
        self.ready: tuple[DatasetItem, SlideReader, np.ndarray | None] | None = None  # the one opened ahead

    def request(self, load: SessionJob[Any], item: DatasetItem, dataset: Dataset) -> None:
        if self._job is not None:
            self._job.dequeue()
        self._generation += 1
        ready, self.ready = self.ready, None
        if ready is not None and ready[0] == item:  # opened ahead: only the session's load is left to do
            work = partial(_with_reader, load, ready[1], ready[2])
        else:
            self._close(ready)
            work = partial(_load, load, item, dataset)
        self._job = self.jobs.submit(None, work, partial(self._on_loaded, self._generation, item),
                                     partial(self._on_failed, self._generation, item), lane=SLIDES)

    def prefetch(self, item: DatasetItem, dataset: Dataset) -> None:
        """Open `item`'s slide ahead (while the user looks at another), for a `request` of it to come; a slide
        opened ahead before is closed."""
        if (self.ready is not None and self.ready[0] == item) or (self._ahead_item == item and self._ahead is not None
                                                                   and not self._ahead.finished):
            return  # (opened, or being opened)
        self._ahead_item = item
        if self._ahead is not None:
            self._ahead.dequeue()
        self._close(self.ready)
        self.ready = None
        self._ahead_generation += 1
        self._ahead = self.jobs.submit(None, partial(open_reader, item, dataset),
                                       partial(self._on_ahead, self._ahead_generation, item),
                                       lambda _text, _details: None, lane=SLIDES)  # (its request says why)

    def _on_ahead(self, generation: int, item: DatasetItem, opened: tuple[SlideReader, np.ndarray | None]) -> None:
        if generation != self._ahead_generation:  # another was asked for since
            opened[0].close()
            return
        self._close(self.ready)
        self.ready = (item, *opened)

    @staticmethod
    def _close(ready: tuple[DatasetItem, SlideReader, np.ndarray | None] | None) -> None:
        if ready is not None:
            ready[1].close()

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
    return _with_reader(load, *open_reader(item, dataset))


def _with_reader(load: SessionJob[Any], reader: SlideReader, base: np.ndarray | None
                 ) -> tuple[SlideReader, object, object]:
    try:
        return reader, base, load.work()
    except BaseException:
        reader.close()
        raise
