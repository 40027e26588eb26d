"""`eval --tile [SIZE]`'s unit of work (its options are in `eval.py`): every image run as a whole slide (or its
--roi) as a grid of tiles, one line per slide (its slide metrics and tile count), the stitched outputs exported
at the output scale (`core.wholeslide.export`)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Iterator

from ..backends.base import Backend
from ..dataset.dataset import Dataset
from ..errors import SegScopeError
from ..export.plan import TILED_KINDS
from ..roi import Roi
from ..wholeslide.evaluate import AUTO, TilePlan, evaluate_tiled, tile_count
from ..wholeslide.export import export_stitched, tiled_row
from ..wholeslide.plan import overlap_note, plain_tiles
from ..wholeslide.tiling import DEFAULT_MAX_CANVAS_BYTES, DEFAULT_MAX_TILES
from .eval_driver import EvalRun, Scored, format_line, truth_text
from .output import Progress, note, status


def tiling_plan(args: argparse.Namespace, dataset: Dataset) -> TilePlan:
    """The plan `--tile [SIZE]` ... asks for; without SIZE, tiles of the dataset's default ROI size."""
    tile = (args.tile, args.tile) if args.tile else (dataset.default_roi.width, dataset.default_roi.height)
    overlap = AUTO if args.tile_overlap is None else args.tile_overlap
    if overlap >= min(tile):
        raise SegScopeError(f"--overlap: {overlap} px must be less than the tile size ({min(tile)} px)")
    if tile[0] * tile[1] > args.max_pixels:
        raise SegScopeError(f"--tile: one {tile[0]}x{tile[1]} tile is {tile[0] * tile[1]:,} pixels, over the limit "
                            f"of {args.max_pixels:,}: give a smaller --tile, or raise --max-pixels")
    return TilePlan(tile, overlap, args.blend or "linear", args.output_scale,
                    max_bytes=int(args.max_canvas * (1 << 30)) if args.max_canvas else DEFAULT_MAX_CANVAS_BYTES,
                    max_tiles=args.max_tiles or DEFAULT_MAX_TILES)


class TiledUnit:
    """Each image (or its --roi) as a whole slide, run tile by tile and stitched at the output scale."""

    usage = None
    check = None
    tiled = True

    def __init__(self) -> None:
        self.plan: TilePlan | None = None
        self.stitched_format = "auto"

    def prepare(self, run: EvalRun) -> None:
        args = run.args
        self.plan = tiling_plan(args, run.dataset)
        unsupported = [k for k in run.kinds if k not in (*TILED_KINDS, "canvas")]
        if unsupported:
            raise SegScopeError(f"--export-kinds: {unsupported[0]} is not written by --tile runs (they write "
                                f"{', '.join(TILED_KINDS)}); drop it or run without --tile")
        self.stitched_format = args.stitched_format or "auto"
        if args.export and "canvas" in run.kinds:
            note("--tile exports the stitched mask at the output scale; no slide-size canvas")
        run.kinds = [k for k in run.kinds if k != "canvas"]

    def evaluate(self, run: EvalRun, backend: Backend) -> Iterator[Scored]:
        assert self.plan is not None  # made by prepare
        bar: Progress | None = None
        done = [0, 0]

        def tick(tiles_done: int, total: int) -> None:
            nonlocal bar
            bar = bar or Progress(total)
            done[:] = [tiles_done, total]
            bar.update(tiles_done, f"tile {tiles_done}/{total}")

        dataset = run.dataset
        plain = sum(plain_tiles(self.plan, run.roi or Roi.whole(*size), size)
                    for size in map(dataset.image_size, dataset.items))
        note(overlap_note(self.plan, sum(tile_count(backend, dataset, self.plan, run.roi)), plain))
        try:
            for evaluation in evaluate_tiled(backend, run.dataset, self.plan, run.roi, tick):
                yield tiled_row(evaluation, run.dataset.root), evaluation.metrics
                if run.export is not None:
                    run.export.write(functools.partial(export_stitched, evaluation=evaluation,
                                                       capabilities=backend.capabilities, kinds=run.kinds,
                                                       stitched_format=self.stitched_format))
                if bar is not None:
                    bar.clear()
                run.say(f"{format_line(evaluation.item.image_path, evaluation.metrics)}, tiles: {evaluation.tiles}"
                        + truth_text(evaluation.truth, run.dataset.root))
        except KeyboardInterrupt:
            if bar is not None:
                bar.clear()
            status(f"stopped after {done[0]}/{done[1]} tiles; the slide in progress is not scored"
                   + ("; the export folder is left as it was" if run.export is not None else ""))
            raise

    def means(self) -> dict[str, object]:
        return {}
