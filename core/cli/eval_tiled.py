"""`eval --tile [SIZE]`'s options and unit of work: every image run as a whole slide (or its --roi) as a grid
of tiles, one line per slide (its slide metrics and tile count), the stitched outputs exported at the output
scale (`core.wholeslide.export`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from ..backends.base import Backend
from ..dataset.dataset import Dataset
from ..errors import SegScopeError
from ..roi import Roi
from ..wholeslide.evaluate import AUTO, TilePlan, evaluate_tiled, tile_count
from ..wholeslide.export import (
    PNG_MAX_SIDE,
    STITCHED_FORMATS,
    TILED_KINDS,
    export_stitched,
    planned_tiled_files,
    tiled_row,
)
from ..wholeslide.plan import overlap_note, plain_tiles
from ..wholeslide.tiling import BLENDS, DEFAULT_MAX_CANVAS_BYTES, DEFAULT_MAX_TILES, EDGE_EFFECT
from .eval_driver import EvalRun, Scored, format_line, truth_text
from .options import checked
from .output import Progress, note, status

_scale = checked(float, lambda v: 0 < v <= 1, "a number in (0, 1] (output pixels per slide pixel)")
_size = checked(int, lambda v: v > 0, "a positive number of slide pixels")
_gib = checked(float, lambda v: 0 < v < 1 << 20, "a positive number of GiB")
_pixels = checked(int, lambda v: v >= 0, "0 or more slide pixels")


def add_tiling_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tiled whole-slide inference")
    group.add_argument("--tile", type=_size, nargs="?", const=0, metavar="SIZE",
                       help="run each image as a whole slide (or its --roi) in SIZE x SIZE tiles of slide pixels "
                            "(SIZE left out: the dataset's default ROI size, the scale the model was trained at)")
    edge = f"{EDGE_EFFECT[0]}/{EDGE_EFFECT[1]}"
    group.add_argument("--overlap", dest="tile_overlap", type=_pixels, default=None, metavar="PX",
                       help="with --tile: slide pixels neighbouring tiles share. Each tile counts only inside its "
                            f"outer margin (the model's edge effect, {edge} of the tile, or half the overlap if "
                            "less) and the slide's borders are mirrored by as much, so no tile border shows "
                            "(default: twice the edge effect, 480 px of 1800 px tiles, about 1.9x the tiles of "
                            "--overlap 0 on a large slide; 0: plain tiles, whose borders may show)")
    group.add_argument("--blend", choices=BLENDS, default=None,
                       help="with --tile: how tiles are blended where they overlap by more than their margins "
                            "(default linear)")
    group.add_argument("--output-scale", type=_scale, default=None, metavar="F",
                       help="with --tile: output pixels per slide pixel (default: model input / tile size)")
    group.add_argument("--max-tiles", type=_size, default=None, metavar="N",
                       help=f"with --tile: refuse a slide that takes more than N tiles (default {DEFAULT_MAX_TILES:,})")
    group.add_argument("--max-canvas", type=_gib, default=None, metavar="GIB",
                       help=f"with --tile: refuse a stitched output needing more than this many GiB of memory "
                            f"(default {DEFAULT_MAX_CANVAS_BYTES >> 30})")
    group.add_argument("--stitched-format", choices=STITCHED_FORMATS, default=None,
                       help="with --tile --export: the stitched mask and heatmap as PNG or as tiled pyramidal "
                            f"OME-TIFF (.tif, opens in QuPath and napari); default auto: PNG up to {PNG_MAX_SIDE} "
                            "px a side, OME-TIFF beyond")


def refuse_without_tile(args: argparse.Namespace) -> None:
    """A tiling option given without --tile is an error, not ignored."""
    given = [option for option, name in (("--overlap", "tile_overlap"), ("--blend", "blend"),
                                         ("--output-scale", "output_scale"), ("--stitched-format", "stitched_format"),
                                         ("--max-tiles", "max_tiles"), ("--max-canvas", "max_canvas"))
             if getattr(args, name) is not None]
    if given:
        raise SegScopeError(f"{given[0]}: only applies with --tile [SIZE]; add --tile or drop the option")


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

    def planned_files(self, item_id: str, kinds: list[str]) -> list[str]:
        return planned_tiled_files(item_id, kinds, self.stitched_format)

    def run_files(self, kinds: list[str]) -> list[str]:
        return []

    def evaluate(self, run: EvalRun, backend: Backend, stack: contextlib.ExitStack) -> Iterator[Scored]:
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
                    export_stitched(run.export, evaluation, backend.capabilities, run.kinds, self.stitched_format)
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
