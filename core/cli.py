"""The `segscope` command: the GUI by default, and headless subcommands.

    segscope [DATASET]                 open the viewer (on the demo dataset when none is given)
    segscope eval --dataset DIR        evaluate a dataset like the original script, plus hard metrics
    segscope demo DIR                  write the demo dataset
    segscope compare A.npy B.npy       accuracy comparison of two tensors
    segscope card MODEL.onnx --out DIR a runnable project (card, pipeline, ATC files) from an ONNX model

Exit codes: 0 ok, 2 bad usage or bad input (one line on stderr), 1 internal error (a bug).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

import numpy as np

from .backends import BACKEND_KINDS, DEFAULT_PROBABILITIES, PROBABILITY_ENCODINGS, open_backend
from .card_builder import add_card_command
from .check import add_check_command
from .dataset import Dataset
from .errors import SegScopeError
from .evaluate import DatasetSummary, evaluate_dataset, evaluation_row
from .export import EXPORT_KINDS, export_result, json_safe, write_metrics
from .fileio import DEFAULT_MAX_PIXELS, read_bytes
from .metrics import compare_tensors
from .pipeline import DEFAULT_PIPELINE
from .provenance import source_for
from .roi import Roi

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2


class Progress:
    """A one-line progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self, total: int, stream: TextIO = sys.stderr):
        self.total, self.stream, self.start = total, stream, time.monotonic()
        self.enabled = stream.isatty()

    def update(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / done * (self.total - done) if done else 0.0
        filled = int(30 * done / self.total)
        bar = "#" * filled + "." * (30 - filled)
        self.stream.write(f"\r[{bar}] {done}/{self.total} ETA {eta:4.0f}s {label[:30]:30}")
        self.stream.flush()

    def clear(self) -> None:
        """Blank the bar so a result line printed to the same terminal starts clean."""
        if self.enabled:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()


def _add_backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pipeline", type=Path, default=DEFAULT_PIPELINE,
                        help="MindX .pipeline file (default: the shipped U-Net stream and demo model)")
    parser.add_argument("--backend", choices=BACKEND_KINDS, default="auto",
                        help="embedded: ONNX Runtime + OpenCV; mindx: the MindX SDK on the Ascend host; "
                             "auto (default): embedded here, or with --remote MindX when the host has it, "
                             "else embedded there")
    parser.add_argument("--sdk-home", type=Path, help="MindX SDK folder (default: $MX_SDK_HOME)")
    parser.add_argument("--remote", metavar="USER@HOST[:PORT]",
                        help="run the stream on an Ascend host over SSH (a ~/.ssh/config alias works too)")
    parser.add_argument("--set-env", metavar="HOST_PATH",
                        help="with --remote: a script to source on the host first, e.g. $MX_SDK_HOME/set_env.sh")
    parser.add_argument("--remote-python", default="python3", metavar="HOST_PATH",
                        help="with --remote: the host's Python 3.9+ with numpy, opencv and the SDK or onnxruntime")
    parser.add_argument("--remote-cache", metavar="HOST_DIR",
                        help="with --remote: the host folder for the uploaded worker and model, relative to the "
                             "login's home unless absolute (default .cache/segscope)")
    parser.add_argument("--probabilities", choices=PROBABILITY_ENCODINGS, default=DEFAULT_PROBABILITIES,
                        help="with --remote: how probabilities travel back; float32 (default) keeps the printed "
                             "Dice identical to a local run, uint8 sends ~6x fewer bytes (Dice within ~1e-5)")
    parser.add_argument("--accept-new-host-key", action="store_true",
                        help="trust the remote host's key on first connection (check the fingerprint the error "
                             "prints against the host's own key first)")
    parser.add_argument("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS,
                        help=f"refuse images larger than this many pixels (default {DEFAULT_MAX_PIXELS:,})")


def _format_line(path: Path, evaluation_metrics: object) -> str:
    if evaluation_metrics is None:
        return f"image: {path}, dice: n/a, iou: n/a (no mask)"
    m = evaluation_metrics
    return (f"image: {path}, dice: {m.soft_dice:.6f}, iou: {m.soft_iou:.6f}, "  # type: ignore[attr-defined]
            f"hard dice: {m.foreground_dice:.6f}, hard iou: {m.foreground_iou:.6f}")  # type: ignore[attr-defined]


def run_eval(args: argparse.Namespace, out: TextIO) -> int:
    roi = Roi.parse(args.roi) if args.roi else None
    dataset = Dataset.open(args.dataset, max_pixels=args.max_pixels)
    kinds = [k.strip() for k in args.export_kinds.split(",") if k.strip()]
    summary, rows = DatasetSummary(), []
    progress = Progress(len(dataset))
    with open_backend(args.backend, args.pipeline, max_pixels=args.max_pixels, sdk_home=args.sdk_home,
                      remote=args.remote, accept_new_host_key=args.accept_new_host_key,
                      set_env=args.set_env, probabilities=args.probabilities,
                      python=args.remote_python, remote_cache=args.remote_cache) as backend:
        details = backend.capabilities.details  # which stream of several it drives; how DVPP is approximated
        notes = ([f"SegScope drives {details['stream']}"] if "stream" in details else []) + \
            ([details["note"]] if "note" in details else [])
        for note in notes:
            print(f"segscope: note: {note}", file=sys.stderr)
        for done, evaluation in enumerate(evaluate_dataset(backend, dataset, roi), 1):
            summary.add(evaluation.metrics)
            result, item = evaluation.result, evaluation.item
            rows.append(evaluation_row(item, result.roi, evaluation.metrics, result.timings))
            if args.export:
                export_result(result, args.export, source_for(item, backend.capabilities), kinds,
                              overwrite=args.overwrite)
            if not args.json:
                progress.clear()
                print(_format_line(evaluation.item.image_path, evaluation.metrics), file=out, flush=True)
            progress.update(done, evaluation.item.id)
    progress.clear()
    means = summary.means()
    if args.export:
        write_metrics(rows, means, args.export, args.overwrite)
    if args.json:
        json.dump(json_safe({"images": rows, "summary": means}), out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        def shown(key: str) -> object:
            return means[key] if means["images_with_masks"] else "n/a (no image has a mask)"

        print(f"========== Cross Valid dice coeff is: {shown('soft_dice')}", file=out)
        print(f"========== Cross Valid IOU is: {shown('soft_iou')}", file=out)
        print(f"========== Hard foreground dice is: {shown('foreground_dice')} "
              f"(over {means['images_with_masks']} images with masks)", file=out)
    return EXIT_OK


def run_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo_data import generate_demo_dataset

    paths = generate_demo_dataset(args.dir, count=args.count, seed=args.seed, overwrite=args.overwrite)
    print(f"wrote {len(paths)} demo slides to {args.dir}; try: segscope eval --dataset {args.dir}", file=out)
    return EXIT_OK


def _load_npy(path: Path) -> np.ndarray:
    data = read_bytes(path)
    if not data.startswith(b"\x93NUMPY"):
        raise SegScopeError(f"{path}: not a NumPy .npy file (save tensors with numpy.save, or export them with "
                            "segscope eval --export)")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        raise SegScopeError(f"{path}: unreadable .npy tensor ({exc})") from None


def run_compare(args: argparse.Namespace, out: TextIO) -> int:
    reference, candidate = _load_npy(args.reference), _load_npy(args.candidate)
    if reference.shape != candidate.shape:
        raise SegScopeError(f"{args.candidate}: shape {candidate.shape} differs from "
                            f"{args.reference}'s {reference.shape}")
    result = compare_tensors(reference, candidate)
    if args.json:
        json.dump(result, out, indent=2)
        out.write("\n")
    else:
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {value:.9g}", file=out)
    return EXIT_OK


def run_gui(args: argparse.Namespace, out: TextIO) -> int:
    # Loaded on demand so the headless commands never import Qt.
    app = importlib.import_module("segscope.gui.app")
    return int(app.main([str(args.dataset)] if args.dataset else []))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="segscope", description="Inspect and correct U-Net segmentations "
                                     "from MindX SDK streams (embedded, Ascend host, or remote over SSH).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    gui = commands.add_parser("gui", help="open the viewer (the default)")
    gui.add_argument("dataset", nargs="?", type=Path, help="dataset folder (default: the demo dataset)")
    gui.set_defaults(handler=run_gui)

    ev = commands.add_parser("eval", help="evaluate a dataset headless")
    ev.add_argument("--dataset", type=Path, required=True, help="DIR/<id>/image.png [+ mask.png], or a flat folder")
    ev.add_argument("--roi", help="x0,y0,x1,y1 for every image (default: per-image ROI from DIR/segscope.json, "
                                  "else 2200,1000,4000,2800 when it fits, else the whole image)")
    ev.add_argument("--export", type=Path, metavar="OUT", help="write masks, tensors and metrics to OUT")
    ev.add_argument("--export-kinds", default="mask,canvas,softmax,heatmap",
                    help=f"comma-separated, from {', '.join(EXPORT_KINDS)} (default: all)")
    ev.add_argument("--overwrite", action="store_true", help="replace existing files in OUT")
    ev.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    _add_backend_options(ev)
    ev.set_defaults(handler=run_eval)

    demo = commands.add_parser("demo", help="write the demo dataset (synthetic industrial slides with masks)")
    demo.add_argument("dir", type=Path)
    demo.add_argument("--count", type=int, default=8)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--overwrite", action="store_true")
    demo.set_defaults(handler=run_demo)

    cmp = commands.add_parser("compare", help="compare two tensors (.npy): cosine, errors, KL, std")
    cmp.add_argument("reference", type=Path)
    cmp.add_argument("candidate", type=Path)
    cmp.add_argument("--json", action="store_true")
    cmp.set_defaults(handler=run_compare)
    add_card_command(commands)
    add_check_command(commands)
    return parser


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    known = {"gui", "eval", "demo", "compare", "card", "check", "-h", "--help", "--debug"}
    if not argv or argv[0] not in known:  # `segscope` or `segscope DATASET` opens the viewer
        argv = ["gui", *argv]
    args = parser.parse_args(argv)
    try:
        return args.handler(args, out or sys.stdout)
    except SegScopeError as exc:
        print(f"segscope: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("segscope: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so in one line, details on request
        print(f"segscope: internal error: {type(exc).__name__}: {exc} (a bug; rerun with --debug for details "
              "and report it)", file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
