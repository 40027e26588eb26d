"""Tiled inference over a whole slide (or a region of it) through any backend, and tiled dataset evaluation.

`run_tiled` is the one loop (the CLI's `eval --tile` and the viewer's "Run whole slide" both call it):
tiles are read by the slide reader as decoded pixels (`core.slides.requests.mirrored_request`), sent through
`backend.infer_many` (which keeps the next tile in flight), and blended by a `Stitcher`. `progress(done,
total)` is called as each tile is blended in; setting `cancel` stops it before the next tile with `CancelledError`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backends.base import Backend, InferenceRequest
from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.truth import Truth
from ..errors import CancelledError, SegScopeError
from ..metrics.scores import ImageMetrics
from ..roi import Roi
from ..slides import SlideReader, open_slide
from ..slides.requests import mirrored_request
from .metrics import array_reader, stitched_metrics, truth_at_scale
from .tiling import (
    DEFAULT_MAX_CANVAS_BYTES,
    DEFAULT_MAX_TILES,
    Stitched,
    Stitcher,
    TileGrid,
    canvas_bytes,
    check_canvas,
    edge_margin,
    fitting_scale,
    output_size,
    tile_grid,
)

ProgressCallback = Callable[[int, int], None]  # (tiles done, tiles in all)
#: Tiles read from the slide ahead of the one the backend takes next.
READ_AHEAD = 2
#: `TilePlan.overlap` / `margin` left to the plan: twice the tile's edge effect / the edge effect.
AUTO = -1


@dataclass(frozen=True)
class TilePlan:
    """How to tile: `tile` = (width, height) in slide pixels, `overlap` px shared by neighbours, the blend,
    the output scale (output px per slide px; None: model input width / tile width, the model's own scale),
    whether to keep a seams map, the canvases' memory bound, the most tiles one slide may take, and the
    `margin` px at each tile's edge that count for nothing (the slide's borders mirrored by as much).

    By default (`AUTO`) the tiles overlap by twice the tile's edge effect (`tiling.edge_margin`) and each
    counts only inside it: the U-Net paper's overlap-tile strategy; a given overlap keeps a margin of the edge
    effect or half the overlap, whichever is less (`overlap=0`: plain tiles)."""

    tile: tuple[int, int]
    overlap: int = AUTO
    blend: str = "linear"
    output_scale: float | None = None
    seams: bool = False
    max_bytes: int = DEFAULT_MAX_CANVAS_BYTES
    max_tiles: int = DEFAULT_MAX_TILES
    margin: int = AUTO

    def __post_init__(self) -> None:
        edge = edge_margin(self.tile)
        if self.overlap == AUTO:
            object.__setattr__(self, "overlap", 2 * edge)
        if self.margin == AUTO:
            object.__setattr__(self, "margin", min(edge, max(self.overlap, 0) // 2))

    def grid(self, region: Roi, slide_size: tuple[int, int]) -> TileGrid:
        """The tiles covering `region` of a slide of `slide_size`."""
        return tile_grid(region, self.tile, self.overlap, slide_size, self.max_tiles, self.margin)

    def scale_for(self, backend: Backend, tile_width: int) -> float:
        """The output scale for tiles `tile_width` slide px wide (a tile is narrower on a narrow slide)."""
        return self.output_scale or backend.capabilities.input_size[0] / tile_width


def _requests(reader: SlideReader, tiles: tuple[Roi, ...], depth: int) -> Generator[InferenceRequest, None, None]:
    """Each tile's region request, the next `depth` tiles read from the slide on a thread of their own (so a
    tile's read overlaps the model on the one before; readers may be read from several threads)."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="segscope-tile-read")
    pending: deque[Future[InferenceRequest]] = deque()
    try:
        for tile in tiles:
            pending.append(pool.submit(mirrored_request, reader, tile))
            if len(pending) > depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_tiled(backend: Backend, reader: SlideReader, plan: TilePlan, region: Roi | None = None,
              progress: ProgressCallback | None = None, cancel: threading.Event | None = None) -> Stitched:
    """The stitched output of `region` (default: the whole slide) tiled by `plan` through `backend`.

    Three things overlap: the next tiles' reads, the model on the current tile (`infer_many` also prepares
    the next one meanwhile), and the blending of the one before, on a thread of its own."""
    region = region or Roi.whole(*reader.size)
    grid = plan.grid(region, reader.size)
    classes = len(backend.capabilities.class_names) or 2
    scale = plan.scale_for(backend, grid.tiles[0].width)
    stitcher = Stitcher(region, reader.size, scale, classes, plan.blend, plan.overlap, plan.seams, plan.max_bytes,
                        plan.margin)
    requests = _requests(reader, grid.tiles, READ_AHEAD)
    results = backend.infer_many(requests)
    blending = ThreadPoolExecutor(1, thread_name_prefix="segscope-stitch")
    added: Future[None] | None = None
    try:
        for index in range(len(grid)):
            if cancel is not None and cancel.is_set():  # before the next tile is waited for
                raise CancelledError(f"{reader.path}: whole-slide run cancelled after {index}/{len(grid)} tiles")
            result = next(results)
            if result.num_classes != classes:
                raise SegScopeError(f"{reader.path}: the model gave {result.num_classes} classes, its card "
                                    f"names {classes}")
            if added is not None:
                added.result()  # one tile blending at a time, in order
                if progress is not None:
                    progress(index, len(grid))
            added = blending.submit(stitcher.add, result, grid.neighbours(index))
        if added is not None:
            added.result()
            if progress is not None:
                progress(len(grid), len(grid))
    finally:
        close = getattr(results, "close", None)  # a generator: closing it drops the tiles read ahead
        if close is not None:
            close()
        requests.close()
        blending.shutdown(wait=True)
    return stitcher.finish()


@dataclass(frozen=True)
class TiledEvaluation:
    item: DatasetItem
    stitched: Stitched
    tiles: int
    metrics: ImageMetrics | None  # None when the image has no mask
    seconds: float
    plan: TilePlan | None = None  # how it was tiled (for the export's provenance)
    truth: Truth | None = None  # the truth file it was scored against (None: none)

    @classmethod
    def scored(cls, dataset: Dataset, item: DatasetItem, stitched: Stitched, tiles: int, seconds: float,
               plan: TilePlan | None = None) -> TiledEvaluation:
        """A whole-slide run scored against the dataset's truth for the item (`score_stitched`), which it names."""
        metrics = score_stitched(dataset, item, stitched)
        return cls(item, stitched, tiles, metrics, seconds, plan, dataset.truth(item) if metrics is not None else None)


def tile_count(backend: Backend, dataset: Dataset, plan: TilePlan, roi: Roi | None = None) -> list[int]:
    """Tiles of each image (for progress over the whole run), every slide's tile count and canvases checked
    against the plan's bounds before any tile is read; reads only the slides' sizes."""
    classes = len(backend.capabilities.class_names) or 2
    counts = []
    for item in dataset.items:
        size = dataset.image_size(item)
        region = roi or Roi.whole(*size)
        grid = plan.grid(region, size)
        scale = plan.scale_for(backend, grid.tiles[0].width)
        if plan.output_scale is None:
            _check_tile_for_model(plan, backend, region, scale, classes, item.image_path)
        check_canvas(region, scale, classes, plan.seams, plan.max_bytes)
        counts.append(len(grid))
    return counts


def _check_tile_for_model(plan: TilePlan, backend: Backend, region: Roi, scale: float, classes: int,
                          source: Path) -> None:
    """With the default output scale (the model's: its input per tile), a tile too small for the slide's stitched
    output to fit is the tile's fault, not an --output-scale the user never gave: refused naming the smallest tile
    that fits (and, for a tile under the model's edge margin, that too)."""
    needed = canvas_bytes(region, scale, classes, plan.seams)
    if needed <= plan.max_bytes:
        return
    model_width = backend.capabilities.input_size[0]
    smallest = math.ceil(model_width / fitting_scale(region, scale, classes, plan.seams, plan.max_bytes))
    while canvas_bytes(region, model_width / smallest, classes, plan.seams) > plan.max_bytes:
        smallest += 1
    width, height = output_size(region, scale)
    model_margin = edge_margin(backend.capabilities.input_size)
    below = (f" is below the model's edge margin ({model_margin} px of its {model_width} px input) and"
             if plan.tile[0] < model_margin else "")
    raise SegScopeError(
        f"a {plan.tile[0]} px tile{below} is resized to the model's {model_width} px input, so {source}'s "
        f"stitched output is {scale:.3g} px per slide px: {width}x{height}, {needed:,} bytes, over the limit of "
        f"{plan.max_bytes:,}; the smallest tile that fits is {smallest} px: give --tile {smallest} or more (or "
        "an --output-scale below 1, or raise --max-canvas)", option="--tile")


def score_stitched(dataset: Dataset, item: DatasetItem, stitched: Stitched,
                   edited: np.ndarray | None = None) -> ImageMetrics | None:
    """Slide metrics against the item's mask, read region by region (a tiled TIFF mask never whole); `edited`:
    the slide's mask with unsaved edits (the viewer's), scored instead of its file."""
    if edited is not None:
        height, width = edited.shape[:2]
        truth = truth_at_scale(stitched, array_reader(edited), (width, height), f"{item.id}'s edited mask")
    else:
        mask = dataset.open_mask(item)
        if mask is None:
            return None
        with mask:
            truth = truth_at_scale(stitched, mask.read_roi, mask.size, str(mask.path))
    dataset.check_mask(item, truth, stitched.probabilities.shape[-1])
    return stitched_metrics(stitched, truth)


def evaluate_tiled(backend: Backend, dataset: Dataset, plan: TilePlan, roi: Roi | None = None,
                   progress: ProgressCallback | None = None,
                   cancel: threading.Event | None = None) -> Iterator[TiledEvaluation]:
    """One tiled evaluation per image, in dataset order: the whole slide (or `roi`) and its slide metrics.
    `progress` counts tiles over all the images."""
    counts = tile_count(backend, dataset, plan, roi)
    before = 0
    for item, count in zip(dataset.items, counts):
        def tick(done: int, total: int, before: int = before) -> None:
            if progress is not None:
                progress(before + done, sum(counts))

        with open_slide(Path(item.image_path), dataset.max_pixels) as reader:
            yield evaluate_slide(backend, dataset, item, reader, plan, roi, tick, cancel)
        before += count


def evaluate_slide(backend: Backend, dataset: Dataset, item: DatasetItem, reader: SlideReader, plan: TilePlan,
                   roi: Roi | None = None, progress: ProgressCallback | None = None,
                   cancel: threading.Event | None = None) -> TiledEvaluation:
    """One image's tiled evaluation from its open `reader`: the whole slide (or `roi`) and its slide metrics."""
    start = time.perf_counter()
    stitched = run_tiled(backend, reader, plan, roi, progress, cancel)
    tiles = len(plan.grid(roi or Roi.whole(*reader.size), reader.size))
    return TiledEvaluation.scored(dataset, item, stitched, tiles, time.perf_counter() - start, plan)
