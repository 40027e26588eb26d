"""`segscope eval --dataset DIR`: evaluate a dataset like the original script, plus hard metrics; one line
per image, then the summary (or one JSON document), with the export, devices, cluster, tiling and precision
options. The run itself is `eval_driver` with the unit of `eval_image` (each image's ROI) or `eval_tiled`
(`--tile`), imported when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..backends.precision_options import add_precision_options, refuse_bad_precision_options
from ..errors import SegScopeError
from ..export.names import DEFAULT_KINDS, EXPORT_KINDS, PNG_MAX_SIDE, RUN_KINDS, STITCHED_FORMATS
from ..quality.options import add_metric_options, metric_spec
from ..wholeslide.tiling import BLENDS, DEFAULT_MAX_CANVAS_BYTES, DEFAULT_MAX_TILES, EDGE_EFFECT
from .cache import add_cache_options, apply_cache_options
from .options import add_backend_options, add_dataset_option, checked, refuse_remote_only_options

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


def run(args: argparse.Namespace, out: TextIO) -> int:
    from .eval_driver import drive

    refuse_remote_only_options(args)
    apply_cache_options(args)
    refuse_bad_precision_options(args)
    spec = metric_spec(args)
    for given, flag in ((args.ship_images, "--ship-images"), (args.task_resources, "--task-resources")):
        if given and not args.cluster:
            raise SegScopeError(f"{flag}: only applies with --cluster tcp://HOST:PORT; add --cluster or drop it")
    if args.tile is not None:
        from .eval_tiled import TiledUnit

        return drive(args, out, TiledUnit())
    refuse_without_tile(args)
    from .eval_image import RoiUnit

    return drive(args, out, RoiUnit(spec))


def register(commands: argparse._SubParsersAction) -> None:
    ev = commands.add_parser("eval", help="evaluate a dataset headless")
    add_dataset_option(ev)
    ev.add_argument("--roi", help="x0,y0,x1,y1 for every image (default: per-image ROI from DIR/segscope.json, "
                                  "else 2200,1000,4000,2800 when it fits, else the whole image)")
    ev.add_argument("--export", type=Path, metavar="OUT",
                    help="write masks, tensors and metrics to OUT, all or nothing: OUT changes only when the whole "
                         "run succeeded, in one step (files already there are kept)")
    ev.add_argument("--export-kinds", default=",".join(DEFAULT_KINDS),
                    help=f"comma-separated, from {', '.join([*EXPORT_KINDS, *RUN_KINDS])}: geojson is each mask as "
                         "QuPath annotations, corrected each image's saved correction (mask_corrected.png) as "
                         "<id>_corrected_truth.png, coco one annotations.coco.json (RLE) for the run "
                         f"(default: {','.join(DEFAULT_KINDS)})")
    ev.add_argument("--overwrite", action="store_true", help="replace existing files in OUT")
    ev.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    ev.add_argument("--no-overlap", dest="overlap", action="store_false",
                    help="run read/decode, inference and scoring one after another (same output, slower; "
                         "each stage's time then excludes the others')")
    add_tiling_options(ev)
    add_metric_options(ev)
    ev.add_argument("--devices", metavar="ID,ID,...",
                    help="one stream per device, each image on the first free one (results in input order); "
                         "embedded: one ONNX Runtime session per id, the cores split between them. Per-device "
                         "throughput goes to stderr (or --json's \"devices\")")
    ev.add_argument("--cluster", metavar="tcp://HOST:PORT | ssh://HOST,...",
                    help="run the images as tasks on this Dask scheduler's workers, or on a cluster started over "
                         "SSH for the run (the first host runs the scheduler, every host a worker, with "
                         "--remote-python; hosts checked as --remote checks one) (pip install "
                         "\"segscope[cluster]\"); each worker opens --backend once, the pipeline and model at "
                         "the same path there; same Python and package versions on every node")
    ev.add_argument("--ship-images", action="store_true",
                    help="with --cluster: send each image's bytes to the workers instead of having them read "
                         "its path (for workers without the shared storage)")
    ev.add_argument("--task-resources", metavar="NAME=N,...",
                    help="with --cluster: what each image's task needs of a worker, e.g. NPU=1, so it runs only "
                         "on workers started with dask worker --resources NPU=1 (one image per chip at a time)")
    add_backend_options(ev)
    add_precision_options(ev)
    add_cache_options(ev)
    ev.set_defaults(handler=run)
