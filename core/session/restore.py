"""What an earlier session kept on disk of a dataset, read back: its results and whole-slide runs, each re-scored
against today's mask (`Session.restore_entries` hands these to `Session.adopt_restored` one at a time)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ..dataset.dataset import Dataset
from ..errors import SegScopeError
from ..evaluate import score
from ..files.stamp import Stamp
from ..metrics.scores import ImageMetrics
from ..result import InferenceResult
from ..wholeslide.evaluate import TiledEvaluation
from .store import SessionStore


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


def _same_content(result: InferenceResult, image_path: Path) -> InferenceResult:
    """`result` whose image file now has another size, time or inode but the content its run read (a dataset
    copied or touched between sessions) made of the file as it is now, so it is not taken for changed; any
    other result as it is (the session then looks at the file: `Session.check_images`)."""
    read = result.image
    if read is None or not read.sha256:
        return result
    try:
        if read.same(Stamp.of(image_path)):
            return result
        now = Stamp.of(image_path, content=True)
    except (OSError, SegScopeError):
        return result
    return replace(result, image=now) if now.sha256 == read.sha256 else result


def restored_entries(store: SessionStore, dataset: Dataset) -> Iterator[Restored]:
    """What `store` keeps of `dataset`, each read and re-scored against today's mask on disk as it is asked for
    (reads and scores only: any thread), a line for each entry that cannot be read."""
    root = dataset.root
    known = {item.id: item for item in dataset.items}
    for entry in store.results():
        if isinstance(entry, str):
            yield Restored(root, note=entry)
            continue
        item = known.get(entry.image_id)
        if item is None:
            continue
        result = _same_content(entry.result, item.image_path)
        try:
            metrics = score(dataset, item, result).metrics  # as a run scores (a tiled mask: its region)
        except SegScopeError as exc:
            yield Restored(root, note=f"{item.id}: stored result not restored: {exc}")
            continue
        yield Restored(root, item.id, result, metrics=metrics)
    for slide in store.slides():
        if isinstance(slide, str):
            yield Restored(root, note=slide)
            continue
        item = known.get(slide.image_id)
        if item is None:
            continue
        try:
            run = TiledEvaluation.scored(dataset, item, slide.stitched, slide.tiles, slide.seconds, slide.plan)
        except SegScopeError as exc:
            yield Restored(root, note=f"{item.id}: stored whole-slide run not restored: {exc}")
            continue
        yield Restored(root, item.id, slide_run=run)
