"""`segscope eval --tile SIZE`: every image run as a whole slide (or its --roi) as a grid of tiles.

The options are added to `eval` by `add_tiling_options`; `core.cli.run_eval` hands a run with `--tile` to
`run_tiled_eval`, passing what it shares with a plain run (the backend it opens, its progress bar, its line).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TextIO

import numpy as np

from .backends.base import Backend, Capabilities
from .cli_lines import note
from .dataset import Dataset
from .errors import SegScopeError
from .evaluate import DatasetSummary, evaluation_row
from .export import ExportFolder, _npy_bytes, encode_mask, heatmap_image, mask_image, refuse_existing
from .export_names import EXPORT_KINDS, METRICS_FILES, PROVENANCE_NAME
from .fileio import encode_image, staging_folder
from .metrics import ImageMetrics
from .provenance import provenance, source_for
from .result import InferenceResult
from .roi import Roi
from .slides.ome_writer import write_ome_tiff
from .tiled_eval import TiledEvaluation, TilePlan, evaluate_tiled
from .tiling import BLENDS, DEFAULT_MAX_CANVAS_BYTES, DEFAULT_MAX_TILES

#: What a tiled run exports (at the output scale); a slide-size canvas is what tiling exists to avoid.
TILED_KINDS = ("mask", "softmax", "heatmap")
#: How the stitched mask and heatmap are written; `auto`: PNG up to `PNG_MAX_SIDE`, pyramidal OME-TIFF beyond.
STITCHED_FORMATS = ("auto", "png", "ome-tiff")
#: Longest side (output pixels) up to which `--stitched-format auto` writes PNG.
PNG_MAX_SIDE = 8192
#: The kinds written as images (PNG or OME-TIFF); the softmax stays a .npy.
_IMAGE_KINDS = ("mask", "heatmap")


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 1 or value != value:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1] (output pixels per slide pixel), got {text!r}")
    return value


def _size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of slide pixels, got {text!r}")
    return value


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 1 << 20:
        raise argparse.ArgumentTypeError(f"expected a positive number of GiB, got {text!r}")
    return value


def _pixels(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more slide pixels, got {text!r}")
    return value


def add_tiling_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tiled whole-slide inference")
    group.add_argument("--tile", type=_size, nargs="?", const=0, metavar="SIZE",
                       help="run each image as a whole slide (or its --roi) in SIZE x SIZE tiles of slide pixels "
                            "(SIZE left out: the dataset's default ROI size, the scale the model was trained at)")
    group.add_argument("--overlap", dest="tile_overlap", type=_pixels, default=None, metavar="PX",
                       help="with --tile: slide pixels neighbouring tiles share (default 0)")
    group.add_argument("--blend", choices=BLENDS, default=None,
                       help="with --tile: how overlapping tiles are blended (default linear)")
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
    overlap = args.tile_overlap or 0
    if overlap >= min(tile):
        raise SegScopeError(f"--overlap: {overlap} px must be less than the tile size ({min(tile)} px)")
    if tile[0] * tile[1] > args.max_pixels:
        raise SegScopeError(f"--tile: one {tile[0]}x{tile[1]} tile is {tile[0] * tile[1]:,} pixels, over the limit "
                            f"of {args.max_pixels:,}: give a smaller --tile, or raise --max-pixels")
    return TilePlan(tile, overlap, args.blend or "linear", args.output_scale,
                    max_bytes=int(args.max_canvas * (1 << 30)) if args.max_canvas else DEFAULT_MAX_CANVAS_BYTES,
                    max_tiles=args.max_tiles or DEFAULT_MAX_TILES)


def _export_name(item_id: str, kind: str, ome: bool) -> str:
    name = EXPORT_KINDS[kind].format(id=item_id)
    return str(Path(name).with_suffix(".tif")) if ome and kind in _IMAGE_KINDS else name


def planned_tiled_files(item_id: str, kinds: list[str], stitched_format: str) -> list[str]:
    """The names a tiled export may write for one item (both image formats under `auto`), sidecar last."""
    formats = {"auto": (False, True), "png": (False,), "ome-tiff": (True,)}[stitched_format]
    names = [_export_name(item_id, k, ome) for k in TILED_KINDS if k in kinds for ome in formats]
    return list(dict.fromkeys(names)) + [PROVENANCE_NAME.format(id=item_id)]


def _ome_tiff_bytes(image: np.ndarray, compression: str, resample: str, folder: Path) -> bytes:
    """`image` as a tiled pyramidal OME-TIFF, made in a staging folder of the export `folder` (locked, so a
    killed run's scratch goes with the next run there) and handed over as bytes so the export publishes it
    with the item's other files as one unit."""
    with staging_folder(folder) as scratch:
        path = scratch / "stitched.tif"
        write_ome_tiff(path, image, (image.shape[1], image.shape[0]), channels=1 if image.ndim == 2 else 3,
                       compression=compression, resample=resample)
        return path.read_bytes()


def export_stitched(folder: ExportFolder, evaluation: TiledEvaluation, capabilities: Capabilities | None,
                    kinds: list[str], stitched_format: str = "auto") -> list[Path]:
    """Write one whole-slide run's stitched `kinds` (of `TILED_KINDS`) with their provenance into `folder`
    (what `eval --tile --export` writes, also the viewer's export of a whole-slide run); the paths written."""
    stitched, item, plan = evaluation.stitched, evaluation.item, evaluation.plan
    classes = stitched.probabilities.shape[-1]
    ome = stitched_format == "ome-tiff" or (stitched_format == "auto" and max(stitched.argmax.shape) > PNG_MAX_SIDE)
    files: dict[str, tuple[str, bytes]] = {}
    for kind in (k for k in TILED_KINDS if k in kinds):
        name = _export_name(item.id, kind, ome)
        if kind == "softmax":
            files[name] = (kind, _npy_bytes(stitched.probabilities))
        elif kind == "mask":
            mask = mask_image(stitched.argmax, classes)
            files[name] = (kind, _ome_tiff_bytes(mask, "zlib", "nearest", folder.out_dir) if ome
                           else encode_mask(mask, "png"))
        else:  # a colour map: JPEG tiles and area-averaged levels suit it (never a mask)
            heatmap = heatmap_image(stitched.probabilities)
            files[name] = (kind, _ome_tiff_bytes(heatmap, "jpeg", "area", folder.out_dir) if ome
                           else encode_image(heatmap))
    result = InferenceResult(stitched.probabilities, stitched.argmax, stitched.region, stitched.slide_size,
                             backend=capabilities.name if capabilities else "", threshold=stitched.threshold)
    document = provenance(source_for(item, capabilities), result, files)
    document["tiling"] = {**({"tile": list(plan.tile), "overlap": plan.overlap, "blend": plan.blend}
                             if plan is not None else {}),
                          "tiles": evaluation.tiles, "output_scale": stitched.scale,
                          "output_units": "output pixel (i, j) covers slide pixels x0 + j / output_scale ..."}
    payload = {name: data for name, (_, data) in files.items()}
    payload[PROVENANCE_NAME.format(id=item.id)] = (json.dumps(document, indent=2) + "\n").encode()
    return folder.publish_files(payload)


def tiled_row(evaluation: TiledEvaluation) -> dict[str, object]:
    """One whole-slide run's row of the metrics table (its region, slide metrics, time and tile count)."""
    return {**evaluation_row(evaluation.item, evaluation.stitched.region, evaluation.metrics,
                             {"tiled": evaluation.seconds}), "tiles": evaluation.tiles}


def run_tiled_eval(args: argparse.Namespace, out: TextIO,
                   open_backend: Callable[[], AbstractContextManager[Backend]], progress_bar: Callable[[int], object],
                   format_line: Callable[[Path, ImageMetrics | None], str]
                   ) -> tuple[list[dict[str, object]], dict[str, object]]:
    """`eval` with `--tile`: one line per slide (its slide metrics and tile count) unless --json; returns
    the metric rows and means for `core.cli` to print as a plain run's."""
    roi = Roi.parse(args.roi) if args.roi is not None else None
    dataset = Dataset.open(args.dataset, max_pixels=args.max_pixels)
    plan = tiling_plan(args, dataset)
    kinds = [k.strip() for k in args.export_kinds.split(",") if k.strip()]
    unsupported = [k for k in kinds if k not in (*TILED_KINDS, "canvas")]
    if unsupported:
        raise SegScopeError(f"--export-kinds: {unsupported[0]} is not written by --tile runs (they write "
                            f"{', '.join(TILED_KINDS)}); drop it or run without --tile")
    stitched_format = args.stitched_format or "auto"
    summary, rows = DatasetSummary(), []
    done = [0, 0]
    export = ExportFolder(args.export, args.overwrite, dataset.root) if args.export else None
    with contextlib.ExitStack() as stack:
        if export is not None:
            stack.enter_context(export)
            names = [n for item in dataset.items for n in planned_tiled_files(item.id, kinds, stitched_format)]
            names += list(METRICS_FILES)
            refuse_existing([args.export / name for name in names], args.overwrite)
            if "canvas" in kinds:
                note("--tile exports the stitched mask at the output scale; no slide-size canvas")
        backend = stack.enter_context(open_backend())
        bar: object = None

        def tick(tiles_done: int, total: int) -> None:
            nonlocal bar
            bar = bar or progress_bar(total)
            done[:] = [tiles_done, total]
            bar.update(tiles_done, f"tile {tiles_done}/{total}")  # type: ignore[attr-defined]

        evaluations = evaluate_tiled(backend, dataset, plan, roi, tick)
        try:
            for evaluation in evaluations:
                summary.add(evaluation.metrics)
                rows.append(tiled_row(evaluation))
                if export is not None:
                    export_stitched(export, evaluation, backend.capabilities, kinds, stitched_format)
                if bar is not None:
                    bar.clear()  # type: ignore[attr-defined]
                if not args.json:
                    print(f"{format_line(evaluation.item.image_path, evaluation.metrics)}, tiles: {evaluation.tiles}",
                          file=out, flush=True)
        except KeyboardInterrupt:
            if bar is not None:
                bar.clear()  # type: ignore[attr-defined]
            print(f"segscope: stopped after {done[0]}/{done[1]} tiles; the slide in progress is not scored or "
                  "exported", file=sys.stderr)
            raise
        means = summary.means()
        if export is not None:
            export.write_metrics(rows, means)
    return rows, means
