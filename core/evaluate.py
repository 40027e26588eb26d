"""Evaluating a dataset: run every image through a backend and score it against its mask."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .backends.base import Backend, InferenceRequest
from .dataset.dataset import Dataset, DatasetItem
from .dataset.masks import mask_to_labels
from .dataset.truth import Described, Truth, truth_fields
from .errors import CancelledError
from .metrics import catalogue
from .metrics.catalogue import DatasetSummary as DatasetSummary  # the dataset means, where they were
from .metrics.scores import ImageMetrics, check_mask_size, labels_metrics, truth_at_roi
from .quality.scoring import image_quality
from .quality.spec import MetricSpec
from .result import InferenceResult
from .roi import Roi
from .stream.input import CROPS_ROI, RegionSource, StreamInput


@dataclass(frozen=True)
class ImageEvaluation:
    item: DatasetItem
    result: InferenceResult
    metrics: ImageMetrics | None  # None when the image has no mask
    truth: Truth | None = None  # the truth file it was scored against
    truth_labels: np.ndarray | None = None  # its true classes under the ROI, as scored (ROI-sized)


def evaluation_row(item: DatasetItem, roi: Roi, metrics: ImageMetrics | None,
                   timings: dict[str, float] | None = None, roi_note: str = "", truth: Described | None = None,
                   root: Path | None = None) -> dict[str, object]:
    """One row of the metric tables (CLI export, GUI export): id, image, ROI (and how it reached the stream,
    when not by the stream's own crop), the truth scored against (`truth_fields`, its file relative to the
    dataset `root`), metrics (by the catalogue's names, None = n/a), stage times in ms."""
    row: dict[str, object] = {"id": item.id, "image": str(item.image_path), "roi": str(roi),
                              **({"roi_note": roi_note} if roi_note else {}), **truth_fields(truth, root)}
    row.update(catalogue.row_values(metrics))
    row.update({f"time_{stage}_ms": round(seconds * 1000, 2) for stage, seconds in (timings or {}).items()})
    return row


def evaluation_request(dataset: Dataset, item: DatasetItem, roi: Roi | None = None,
                       rois: Mapping[str, Roi] | None = None,
                       sources: Mapping[str, RegionSource] | None = None,
                       stream: StreamInput | None = None, default_rois: bool = False) -> InferenceRequest:
    """What `evaluate_dataset` asks the backend for one image, by the stream's ROI rule (`core.stream.input`):
    the ROI picked for it is `roi`, else its entry in `rois`, else the one stored in the dataset; the default
    is the dataset's ROI for it, and with `default_rois` it counts as picked (the viewer's rule: an image is run
    on the ROI it would be shown with, even by a stream without a crop). Its entry in `sources` reads an ROI from
    an open slide. `stream` None: a stream that crops the ROI itself."""
    picked = roi or (rois or {}).get(item.id) or dataset.stored_roi(item)
    if picked is None and default_rois:
        picked = dataset.roi_for(item)  # (fits the image: nothing to clip)
    else:
        _say_clipped(dataset, item, picked)
    return (stream or CROPS_ROI).request(item.image_path, picked, lambda: dataset.roi_for(item), dataset.max_pixels,
                        (sources or {}).get(item.id))


def _say_clipped(dataset: Dataset, item: DatasetItem, roi: Roi | None) -> None:
    """An ROI reaching past the image is clipped (x1/y1, as MindX's crop does): said once on stderr."""
    if roi is None:
        return
    width, height = dataset.image_size(item)
    if roi.x0 < width and roi.y0 < height and (roi.x1 > width or roi.y1 > height):  # (outside: an error later)
        dataset.warn_once(item.image_path, f"ROI {roi} reaches past the image, which the crop clips as MindX's "
                                           f"does (here {width}x{height}: {roi.x0},{roi.y0},{min(roi.x1, width)},"
                                           f"{min(roi.y1, height)})")


def evaluate_dataset(backend: Backend, dataset: Dataset, roi: Roi | None = None,
                     items: list[DatasetItem] | None = None,
                     cancel: threading.Event | None = None, rois: Mapping[str, Roi] | None = None,
                     overlap: bool = True,
                     sources: Mapping[str, RegionSource] | None = None,
                     masks: Mapping[str, np.ndarray] | None = None,
                     stream: StreamInput | None = None, quality: MetricSpec | None = None,
                     truths: bool = True, default_rois: bool = False) -> Iterator[ImageEvaluation]:
    """Yield one evaluation per image, in dataset order. `roi` overrides every image's ROI; `rois` gives
    some images theirs (a snapshot taken when the run was asked for). `sources` makes some images' requests
    from their ROI instead of from their file (a slide already open: `core.slides.requests.region_request`),
    called where the request is read (a read-ahead thread with `overlap`). `masks` gives some images the
    ground truth the caller already holds, as read from their mask file (the viewer's open mask), so it is
    not decoded again. `quality` adds the chosen QA metrics to each image with a mask (`ImageMetrics.quality`).
    Without `truths`, no mask is read: every evaluation is unscored (what two runs compared need, `segscope review
    --against`). `default_rois`: an image without a picked ROI is run on the dataset's ROI for it, as if picked
    (`evaluation_request`), its header read where its request is made.

    With `overlap` (the default) requests go to `backend.infer_many`, which may keep the next image in
    flight, and each image's mask is read and scored on a second thread while the next image is inferred;
    the evaluations, their order and any error's place in that order are the same as without.
    Without it, one stage after another: `backend.infer`, then the mask, then the metrics.
    """
    chosen = items if items is not None else dataset.items
    held = masks or {}
    scored_by = score if truths else unscored
    requests = (evaluation_request(dataset, item, roi, rois, sources, stream, default_rois) for item in chosen)
    if not overlap:
        for item, request in zip(chosen, requests):
            result = request.place(backend.infer(request.image, request.roi))
            _check_cancel(cancel, dataset, item)
            yield scored_by(dataset, item, result, held.get(item.id), quality)
        return
    results = backend.infer_many(requests)
    pool = ThreadPoolExecutor(1, thread_name_prefix="segscope-metrics")
    scored: Future[ImageEvaluation] | None = None  # the previous image, scored while this one is inferred
    try:
        for item in chosen:
            try:
                result = next(results)
            except BaseException:
                if scored is not None:  # the image before a failing one still comes first
                    yield scored.result()
                raise
            if scored is not None:
                yield scored.result()
            _check_cancel(cancel, dataset, item)
            scored = pool.submit(scored_by, dataset, item, result, held.get(item.id), quality)
        if scored is not None:
            yield scored.result()
    finally:
        close = getattr(results, "close", None)  # a generator: closing it stops its read-ahead at once
        if close is not None:
            close()
        pool.shutdown(wait=True)


def score(dataset: Dataset, item: DatasetItem, result: InferenceResult,
          mask: np.ndarray | None = None, quality: MetricSpec | None = None) -> ImageEvaluation:
    """One image's evaluation against the dataset's truth for it (`Dataset.truth`, read as `truth_at_result`
    reads it), scored (None without a mask)."""
    roi_mask = truth_at_result(dataset, item, result, mask)
    if roi_mask is None:
        return ImageEvaluation(item, result, None)
    labels = mask_to_labels(roi_mask, result.num_classes)
    metrics = labels_metrics(result, labels)
    if quality:
        metrics = replace(metrics, quality=image_quality(quality, result, roi_mask))
    return ImageEvaluation(item, result, metrics, dataset.truth(item), labels)


def unscored(dataset: Dataset, item: DatasetItem, result: InferenceResult, _mask: np.ndarray | None = None,
             _quality: MetricSpec | None = None) -> ImageEvaluation:
    """One image's result, its truth left unread (`score`'s shape, for `evaluate_dataset(truths=False)`)."""
    return ImageEvaluation(item, result, None)


def truth_at_result(dataset: Dataset, item: DatasetItem, result: InferenceResult,
                    mask: np.ndarray | None = None) -> np.ndarray | None:
    """The image's truth under the result's ROI at ROI size (None: it has none): its `mask` cropped (the whole mask
    checked by the mask rule, `core.dataset.masks`), else only the ROI read from the dataset's truth file, whose
    reader checks the whole file by its counts (`Dataset.open_mask`; of a tiled one, the region read)."""
    truth = dataset.truth(item)
    source = str(truth.path) if truth is not None else "mask"
    if mask is not None:
        dataset.check_mask(item, mask, result.num_classes)
        return truth_at_roi(result, mask, source)
    reader = dataset.open_mask(item, result.num_classes)
    if reader is None:
        return None
    with reader:
        check_mask_size(reader.size, result, source)
        roi_mask = reader.read_roi(result.roi)
    if reader.rule is None or reader.rule.num_classes != result.num_classes:  # (else read by this very rule)
        dataset.check_mask(item, roi_mask, result.num_classes)
    return roi_mask


def _check_cancel(cancel: threading.Event | None, dataset: Dataset, item: DatasetItem) -> None:
    if cancel is not None and cancel.is_set():
        raise CancelledError(f"evaluation of {dataset.root} cancelled after {item.id}")
