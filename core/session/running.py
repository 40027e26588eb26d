"""The work of the session's run commands, for the thread that owns the open backend: a batch of images (one
that fails is reported and the batch goes on with the next) and a whole slide in tiles, each as steps.

`eval` runs its images as a batch too (`core.cli.eval_image`), so the viewer, the Python API and `eval` pick ROIs,
read truths and score by one runner; what eval does otherwise is said by the batch (`Batch.default_rois`,
`Batch.stamps`, `Batch.overlap`) and by its error policy (`raise_error`: the first error ends the run)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import NoReturn, Union

import numpy as np

from ..backends.base import Backend
from ..dataset.dataset import Dataset, DatasetItem
from ..errors import CancelledError, SegScopeError, describe
from ..evaluate import ImageEvaluation, evaluate_dataset
from ..files.stamp import Stamp
from ..quality.spec import MetricSpec
from ..roi import Roi
from ..slides import SlideReader
from ..stream.input import RegionSource, StreamInput
from ..wholeslide.evaluate import TiledEvaluation, TilePlan, evaluate_slide
from .jobs import Progress

NO_BACKEND = "No backend is open: choose one in Backend > Connection…"

#: (one line for the messages, details) of an error; `describe_error` unless the viewer words its options.
Describe = Callable[[BaseException], "tuple[str, str]"]


@dataclass(frozen=True)
class Evaluated:
    evaluation: ImageEvaluation


@dataclass(frozen=True)
class Failed:
    item_id: str
    text: str
    details: str = ""


@dataclass(frozen=True)
class SlideEvaluated:
    run: TiledEvaluation


RunStep = Union[Evaluated, Failed, SlideEvaluated]


def describe_error(exc: BaseException, labels: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(one line, details): a user-fixable error is its own line (its option named by `labels`); anything else
    is a bug, shown with its traceback."""
    described = describe(exc, labels)
    return (f"Internal error: {described.line}" if described.bug else described.line), described.details


def raise_error(exc: BaseException) -> NoReturn:
    """The error policy of a run that ends at its first error (`eval`): the error itself, raised, not worded."""
    raise exc


@dataclass(frozen=True)
class Batch:
    """What a run of images needs, taken when it was asked for (the ROIs a snapshot: dragging meanwhile
    changes the next run only). `sources` make some images' requests from the open slide, `masks` score some on
    ground truth already in memory (`core.evaluate.evaluate_dataset`).

    The viewer's batch (the defaults): an image with no ROI in `rois` is run on the dataset's ROI for it, picked as
    if shown, and each result keeps its image file's stamp (`InferenceResult.image`, for the next session). `eval`'s:
    an image with none goes to the stream as the stream takes it (one without a crop: the whole image, as MindX
    resizes it), nothing is stamped, and `overlap` False runs the stages one after another (`--no-overlap`)."""

    dataset: Dataset
    items: tuple[DatasetItem, ...]
    rois: Mapping[str, Roi]
    sources: Mapping[str, RegionSource]
    masks: Mapping[str, np.ndarray]
    stream: StreamInput | None
    quality: MetricSpec
    overlap: bool = True
    default_rois: bool = True
    stamps: bool = True


def batch_steps(batch: Batch, backend: Backend | None, cancel: threading.Event, progress: Progress,
                describe_as: Describe = describe_error) -> Iterator[RunStep]:
    """Evaluate the batch's images, one step each; an image without an ROI in the snapshot (never shown: its
    size was not known) gets the dataset's rule for its size (`Batch.default_rois`), read from its file's header
    as its request is made (image by image as the run goes, not all before the first), and one that cannot be read
    is that image's failure (worded by `describe_as`). Stops after the image in flight once `cancel` is set."""
    dataset, done, remaining = batch.dataset, 0, []

    def step(outcome: RunStep) -> RunStep:
        nonlocal done
        done += 1
        progress(done, len(batch.items))
        return outcome

    for item in batch.items:
        if item.problem:  # (a folder of the dataset that cannot be read: `DatasetItem.problem` says why)
            yield step(Failed(item.id, item.problem))
            continue
        remaining.append(item)
    # a stat each, before any is read
    images = {item.id: _image_stamp(item) for item in remaining} if batch.stamps else {}
    while remaining and not cancel.is_set():
        if backend is None:
            for item in remaining:
                yield step(Failed(item.id, NO_BACKEND))
            return
        yielded = 0
        try:
            for evaluation in evaluate_dataset(backend, dataset, items=remaining, cancel=cancel, rois=batch.rois,
                                               overlap=batch.overlap, sources=batch.sources, masks=batch.masks,
                                               stream=batch.stream, quality=batch.quality,
                                               default_rois=batch.default_rois):
                yielded += 1
                if batch.stamps:
                    image = _with_content(evaluation.item, images.get(evaluation.item.id))
                    evaluation = replace(evaluation, result=replace(evaluation.result, image=image))
                yield step(Evaluated(evaluation))
                if cancel.is_set():
                    return
            remaining = []
        except CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - one bad image must not end the batch
            if cancel.is_set():
                return
            yield step(Failed(remaining[yielded].id, *describe_as(exc)))
            remaining = remaining[yielded + 1 :]


#: Images up to this size get a content key (SHA-256) besides size, time and inode: a copied or touched dataset
#: is then known unchanged across restarts (`core.session.restore`); a larger slide costs too much to hash.
CONTENT_KEY_BYTES = 64 << 20


def _image_stamp(item: DatasetItem) -> Stamp | None:
    """The image file as it is before the run reads it (see `InferenceResult.image`): one stat, so a run of
    thousands starts at once."""
    try:
        return Stamp.of(item.image_path)
    except SegScopeError:
        return None  # (its read fails and says why)


def _with_content(item: DatasetItem, read: Stamp | None) -> Stamp | None:
    """`read` with the image's content key once it has been run (hashed then, image by image, not all before the
    first), when the file is still the one read and small enough (`CONTENT_KEY_BYTES`)."""
    if read is None or read.missing or read.size > CONTENT_KEY_BYTES:
        return read
    try:
        now = Stamp.of(item.image_path, content=True)
    except SegScopeError:
        return read
    return now if read.same(now) else read


def slide_steps(dataset: Dataset, item: DatasetItem, reader: SlideReader, plan: TilePlan, backend: Backend | None,
                cancel: threading.Event, progress: Progress, describe_as: Describe = describe_error
                ) -> Iterator[RunStep]:
    """The whole slide of `item` in tiles from its open `reader`, scored against its mask: one step (none when
    cancelled). `progress` counts tiles."""
    if backend is None:
        yield Failed(item.id, NO_BACKEND)
        return
    try:
        run = evaluate_slide(backend, dataset, item, reader, plan, progress=progress, cancel=cancel)
    except CancelledError:
        return
    except Exception as exc:  # noqa: BLE001 - reported to the user, the backend's thread goes on
        if not cancel.is_set():
            yield Failed(item.id, *describe_as(exc))
        return
    yield SlideEvaluated(run)
