"""`segscope eval --dataset DIR`: evaluate a dataset like the original script, plus hard metrics; one line
per image, then the summary (or one JSON document), with the export, devices, cluster and precision options."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..backends.precision_check import add_precision_options, refuse_bad_precision_options
from ..errors import SegScopeError
from ..export.names import DEFAULT_KINDS, EXPORT_KINDS, RUN_KINDS
from ..quality.options import add_metric_options, metric_spec
from .cache import add_cache_options, apply_cache_options
from .eval_driver import drive
from .eval_image import RoiUnit
from .eval_tiled import TiledUnit, add_tiling_options, refuse_without_tile
from .options import add_backend_options, add_truth_option, refuse_remote_only_options


def run(args: argparse.Namespace, out: TextIO) -> int:
    refuse_remote_only_options(args)
    apply_cache_options(args)
    refuse_bad_precision_options(args)
    spec = metric_spec(args)
    for given, flag in ((args.ship_images, "--ship-images"), (args.task_resources, "--task-resources")):
        if given and not args.cluster:
            raise SegScopeError(f"{flag}: only applies with --cluster tcp://HOST:PORT; add --cluster or drop it")
    if args.tile is not None:
        return drive(args, out, TiledUnit())
    refuse_without_tile(args)
    return drive(args, out, RoiUnit(spec))


def register(commands: argparse._SubParsersAction) -> None:
    ev = commands.add_parser("eval", help="evaluate a dataset headless")
    ev.add_argument("--dataset", type=Path, required=True, help="DIR/<id>/image.png [+ mask.png], or a flat folder")
    add_truth_option(ev)
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
