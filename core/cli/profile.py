"""`segscope profile`: an operator profile here (ONNX Runtime) or of Ascend imports, with the roofline.

    segscope profile --pipeline P --dataset D [--images N] [--json]   this CPU, ONNX Runtime's profiler
    segscope profile --model CARD --backend ais-bench --dataset D     the .om's NPU time per inference
    segscope profile --import op_summary_0_1.csv [--import ...]       msprof / ais_bench / trace files

The run itself is `profile_run`, imported when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..backends.registry import BACKEND_KINDS
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..stream.source import add_source_options
from .cache import add_cache_options
from .options import deferred


def register(commands: argparse._SubParsersAction) -> None:
    prof = commands.add_parser("profile", help="operator profile: this CPU (ONNX Runtime) or imported Ascend files")
    add_source_options(prof, "MindX .pipeline whose model card names the model (default: the shipped one)")
    prof.add_argument("--backend", choices=BACKEND_KINDS, default="embedded",
                      help="embedded (default): per-operator times of the ONNX model on this CPU; another backend: "
                           "the model's time per inference there (ais-bench: the NPU's own time)")
    prof.add_argument("--sdk-home", type=Path, help="MindX SDK folder (default: $MX_SDK_HOME)")
    prof.add_argument("--dataset", type=Path, help="images to profile with (their stored ROIs)")
    prof.add_argument("--images", type=int, default=4, help="images to run, after one warm-up run (default 4)")
    prof.add_argument("--import", dest="imports", type=Path, action="append", default=[], metavar="FILE",
                      help="msprof op_summary_*.csv / op_statistic_*.csv / timeline .json, ais_bench "
                           "*_summary.json or an ONNX Runtime profile; repeatable")
    prof.add_argument("--top", type=int, help="show only the N slowest operators")
    prof.add_argument("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS, help=argparse.SUPPRESS)
    prof.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    add_cache_options(prof)
    prof.set_defaults(handler=deferred("profile_run", "run_profile"))
