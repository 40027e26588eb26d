"""What an earlier session kept on disk of a dataset, read back: its results and whole-slide runs, each re-scored
against today's mask (`Session.restore_entries` hands these to `Session.adopt_restored` one at a time)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, TypeVar

from ..dataset.dataset import Dataset, DatasetItem
from ..errors import SegScopeError
from ..evaluate import score
from ..files.stamp import Stamp
from ..metrics.scores import ImageMetrics
from ..result import InferenceResult
from ..wholeslide.evaluate import TiledEvaluation
from .store import SessionStore, StoredResult, StoredSlide


@dataclass(frozen=True)
class Restored:
    """One thing `restore_entries` found: a stored result or whole-slide run with its metrics against today's
    mask, or only a `note` (what could not be restored, one line)."""

    root: Path | None = None  # the dataset folder it belongs to
    image_id: str = ""
    result: InferenceResult | None = None
    slide_run: TiledEvaluation | None = None
    metrics: ImageMetrics | None = None
    note: str = ""
    #: The image file as the worker found it when it restored `result` (what `Session.check_images` would `stat`
    #: in the GUI thread); missing when it could not be read.
    image_now: Stamp = Stamp()


def _same_content(result: InferenceResult, image_path: Path) -> tuple[InferenceResult, Stamp]:
    """`result` whose image file now has another size, time or inode but the content its run read (a dataset
    copied or touched between sessions) made of the file as it is now, so it is not taken for changed; any
    other result as it is; with the image file as it is now (missing: it cannot be read), which the session
    compares with what the run read (`Session.adopt_restored`)."""
    read = result.image
    if read is None:
        return result, Stamp()
    try:
        now = Stamp.of(image_path)
        if read.same(now) or not read.sha256:
            return result, now
        now = Stamp.of(image_path, content=True)
    except (OSError, SegScopeError):
        return result, Stamp()
    return (replace(result, image=now) if now.sha256 == read.sha256 else result), now


#: How many of the dataset's first rows are restored before the others: a screenful and more, the rows a
#: dataset shows when it opens.
FIRST_ROWS = 100


def restored_entries(store: SessionStore, dataset: Dataset) -> Iterator[Restored]:
    """What `store` keeps of `dataset`, each read and re-scored against today's mask on disk as it is asked for
    (reads and scores only: any thread), the dataset's first rows first (`FIRST_ROWS`, on screen when it opens),
    a line for each entry that cannot be read."""
    root = dataset.root

    def result(item: DatasetItem, entry: StoredResult) -> Restored:
        restored, now = _same_content(entry.result, item.image_path)
        metrics = score(dataset, item, restored).metrics  # as a run scores (a tiled mask: its region)
        return Restored(root, item.id, restored, metrics=metrics, image_now=now)

    def slide(item: DatasetItem, entry: StoredSlide) -> Restored:
        run = TiledEvaluation.scored(dataset, item, entry.stitched, entry.tiles, entry.seconds, entry.plan)
        return Restored(root, item.id, slide_run=run)

    known = {item.id: item for item in dataset.items}
    first = [item.id for item in dataset.items[:FIRST_ROWS]]
    yield from _each_restored(store.results(first), known, root, "result", result)
    yield from _each_restored(store.slides(first), known, root, "whole-slide run", slide)


class _Stored(Protocol):
    @property
    def image_id(self) -> str: ...


S = TypeVar("S", bound=_Stored)


def _each_restored(entries: Iterable[S | str], known: Mapping[str, DatasetItem], root: Path, what: str,
                   restore: Callable[[DatasetItem, S], Restored]) -> Iterator[Restored]:
    """`restore` of each stored entry of an image the dataset still has; a line for one that cannot be."""
    for entry in entries:
        if isinstance(entry, str):
            yield Restored(root, note=entry)
            continue
        item = known.get(entry.image_id)
        if item is None:
            continue
        try:
            restored = restore(item, entry)
        except SegScopeError as exc:
            restored = Restored(root, note=f"{item.id}: stored {what} not restored: {exc}")
        yield restored
