"""Tiled inference over a whole slide (or a region of it) through any backend, and tiled dataset evaluation.

`run_tiled` is the one loop (the CLI's `eval --tile` and the viewer's "Run whole slide" both call it):
tiles are read by the slide reader as decoded pixels (`core.slides.requests.region_request`), sent through
`backend.infer_many` (which keeps the next tile in flight), and blended by a `Stitcher`. `progress(done,
total)` is called after each tile; setting `cancel` stops it before the next tile with `CancelledError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .backends.base import Backend
from .dataset import Dataset, DatasetItem
from .errors import CancelledError, SegScopeError
from .metrics import ImageMetrics
from .roi import Roi
from .slide_metrics import array_reader, slide_metrics
from .slides import SlideReader, open_slide, slide_kind_for
from .slides.requests import region_request
from .tiling import DEFAULT_MAX_CANVAS_BYTES, Stitched, Stitcher, tile_grid

ProgressCallback = Callable[[int, int], None]  # (tiles done, tiles in all)


@dataclass(frozen=True)
class TilePlan:
    """How to tile: `tile` = (width, height) in slide pixels, `overlap` px shared by neighbours, the blend,
    the output scale (output px per slide px; None: model input width / tile width, the model's own scale),
    whether to keep a seams map, and the canvases' memory bound."""

    tile: tuple[int, int]
    overlap: int = 0
    blend: str = "linear"
    output_scale: float | None = None
    seams: bool = False
    max_bytes: int = DEFAULT_MAX_CANVAS_BYTES

    def scale_for(self, backend: Backend, tile_width: int) -> float:
        """The output scale for tiles `tile_width` slide px wide (a tile is narrower on a narrow slide)."""
        return self.output_scale or backend.capabilities.input_size[0] / tile_width


def run_tiled(backend: Backend, reader: SlideReader, plan: TilePlan, region: Roi | None = None,
              progress: ProgressCallback | None = None, cancel: threading.Event | None = None) -> Stitched:
    """The stitched output of `region` (default: the whole slide) tiled by `plan` through `backend`."""
    region = region or Roi.whole(*reader.size)
    grid = tile_grid(region, plan.tile, plan.overlap, reader.size)
    classes = len(backend.capabilities.class_names) or 2
    stitcher = Stitcher(region, reader.size, plan.scale_for(backend, grid.tiles[0].width), classes, plan.blend, plan.overlap,
                        plan.seams, plan.max_bytes)
    results = backend.infer_many(region_request(reader, tile) for tile in grid.tiles)
    try:
        for index in range(len(grid)):
            if cancel is not None and cancel.is_set():  # before the next tile is waited for
                raise CancelledError(f"{reader.path}: whole-slide run cancelled after {index}/{len(grid)} tiles")
            result = next(results)
            if result.num_classes != classes:
                raise SegScopeError(f"{reader.path}: the model gave {result.num_classes} classes, its card "
                                    f"names {classes}")
            stitcher.add(result, grid.neighbours(index))
            if progress is not None:
                progress(index + 1, len(grid))
    finally:
        close = getattr(results, "close", None)  # a generator: closing it drops the tiles read ahead
        if close is not None:
            close()
    return stitcher.finish()


@dataclass(frozen=True)
class TiledEvaluation:
    item: DatasetItem
    stitched: Stitched
    tiles: int
    metrics: ImageMetrics | None  # None when the image has no mask
    seconds: float


def tile_count(dataset: Dataset, plan: TilePlan, roi: Roi | None = None) -> list[int]:
    """Tiles of each image (for progress over the whole run); reads only the slides' sizes."""
    counts = []
    for item in dataset.items:
        with open_slide(item.image_path, dataset.max_pixels) as reader:
            counts.append(len(tile_grid(roi or Roi.whole(*reader.size), plan.tile, plan.overlap, reader.size)))
    return counts


def _score(dataset: Dataset, item: DatasetItem, stitched: Stitched) -> ImageMetrics | None:
    """Slide metrics against the item's mask: a pyramidal/tiled mask is read a band at a time by its slide
    reader, one OpenCV decodes whole is read by the dataset (its conventions applied)."""
    path = item.truth_path
    if path is None:
        return None
    if slide_kind_for(path).name != "opencv":
        with open_slide(path, dataset.max_pixels) as mask_slide:
            return slide_metrics(stitched, lambda box: mask_slide.read_roi(box)[..., 0], mask_slide.size, str(path))
    mask = dataset.load_mask(item)
    assert mask is not None
    dataset.check_mask(item, mask, stitched.probabilities.shape[-1])
    return slide_metrics(stitched, array_reader(mask), (mask.shape[1], mask.shape[0]), str(path))


def evaluate_tiled(backend: Backend, dataset: Dataset, plan: TilePlan, roi: Roi | None = None,
                   progress: ProgressCallback | None = None,
                   cancel: threading.Event | None = None) -> Iterator[TiledEvaluation]:
    """One tiled evaluation per image, in dataset order: the whole slide (or `roi`) and its slide metrics.
    `progress` counts tiles over all the images."""
    counts = tile_count(dataset, plan, roi)
    before = 0
    for item, count in zip(dataset.items, counts):
        def tick(done: int, total: int, before: int = before) -> None:
            if progress is not None:
                progress(before + done, sum(counts))

        start = time.perf_counter()
        with open_slide(Path(item.image_path), dataset.max_pixels) as reader:
            stitched = run_tiled(backend, reader, plan, roi, tick, cancel)
        yield TiledEvaluation(item, stitched, count, _score(dataset, item, stitched), time.perf_counter() - start)
        before += count
