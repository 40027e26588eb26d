"""The `segscope` command: the GUI by default, and headless subcommands.

    segscope [DATASET]                 open the viewer (on the demo dataset when none is given)
    segscope eval --dataset DIR        evaluate a dataset like the original script, plus hard metrics
    segscope demo DIR                  write the demo dataset
    segscope compare REF.npy CAND.npy  accuracy comparison of two tensors, with a pass/fail line
    segscope check PIPELINE...         valid for MindX? runs on the embedded backend?
    segscope card MODEL.onnx --out DIR a runnable project (card, pipeline, ATC files) from an ONNX model
    segscope profile / drift           operator profile and roofline; msit compare triage (core/profiling)
    segscope report --dataset DIR --out R.html  one self-contained HTML report (core/report)

Exit codes: 0 ok, 2 bad usage or bad input (one line on stderr), 1 internal error (a bug).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

from . import cli_lines
from . import metric_catalogue as catalogue
from .backend_spec import open_backend, spec_from_args
from .backends.base import Backend
from .backends.pool import UsageLog
from .backends.registry import BACKEND_KINDS
from .card_builder import add_card_command
from .check import add_check_command
from .cluster import SSH_SCHEME
from .compare_cli import add_compare_command
from .dataset import Dataset
from .errors import SegScopeError
from .evaluate import DatasetSummary, ImageEvaluation, evaluate_dataset, evaluation_row
from .export import EXPORT_KINDS, METRICS_FILES, ExportFolder, json_safe, planned_files, refuse_existing, run_files
from .export_names import DEFAULT_KINDS, RUN_KINDS
from .export_writer import ExportWriter
from .fileio import DEFAULT_MAX_PIXELS
from .metric_catalogue import catalogue_document
from .metrics import ImageMetrics
from .precision_check import AccuracyCheck, add_precision_options, refuse_bad_precision_options, with_precision
from .profiling import cli as profiling_cli
from .provenance import source_for
from .quality.options import add_metric_options, line_text, metric_spec, summary_lines
from .quality.scoring import QualitySummary
from .remote.protocol import PROBABILITY_DTYPES
from .report.command import add_report_options, run_report
from .roi import Roi
from .run_source import add_source_options, chosen_source
from .stream_input import StreamInput
from .terminal import Progress
from .tiling_cli import add_tiling_options, refuse_without_tile, run_tiled_eval

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
#: Options that only mean something with --remote (refused without it instead of being ignored).
REMOTE_ONLY = ("set_env", "remote_python", "remote_cache", "probabilities", "accept_new_host_key")
#: Of those, what also applies to `--cluster ssh://` (the hosts are reached as `--remote` reaches one).
CLUSTER_SSH_OPTIONS = ("set_env", "remote_python", "accept_new_host_key")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (the full usage is one `--help` away)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_INPUT, f"segscope: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    value = _positive_int(text)
    if value > 10_000:
        raise argparse.ArgumentTypeError(f"expected at most 10000, got {text!r}")
    return value


def _add_backend_options(parser: argparse.ArgumentParser) -> None:
    add_source_options(parser, "MindX .pipeline file (default: the shipped U-Net stream and demo model)")
    parser.add_argument("--backend", choices=BACKEND_KINDS, default="auto",
                        help="embedded: ONNX Runtime + OpenCV; mindx: a pipeline through the MindX SDK; "
                             "mindx-model / ais-bench: the model's .om through the SDK's Model API / ais_bench, "
                             "SegScope preprocessing on the CPU; auto (default): the first of mindx (pipelines), "
                             "mindx-model and ais-bench found here (or on the --remote host), else embedded")
    parser.add_argument("--sdk-home", type=Path, help="MindX SDK folder (default: $MX_SDK_HOME)")
    parser.add_argument("--remote", metavar="USER@HOST[:PORT]",
                        help="run the stream on an Ascend host over SSH (a ~/.ssh/config alias works too)")
    parser.add_argument("--set-env", metavar="HOST_PATH", default=None,
                        help="with --remote: a script to source on the host first, e.g. $MX_SDK_HOME/set_env.sh")
    parser.add_argument("--remote-python", default=None, metavar="HOST_PATH",
                        help="with --remote: the host's Python 3.9+ with numpy, opencv and the SDK or onnxruntime "
                             "(with --cluster ssh://: one with segscope[cluster] installed)")
    parser.add_argument("--remote-cache", metavar="HOST_DIR", default=None,
                        help="with --remote: the host folder for the uploaded worker and model, relative to the "
                             "login's home unless absolute (default .cache/segscope)")
    parser.add_argument("--probabilities", choices=PROBABILITY_DTYPES, default=None,
                        help="with --remote: how probabilities travel back. float32 (default) is exact, metrics "
                             "identical to a local run: 3.3 MB per 960x960 demo result (lossless zlib of 7.4 MB "
                             "raw); float16 0.18 MB, uint8 0.02 MB (demo soft Dice within 5e-9 and 6e-8). "
                             "Sizes depend on how confident the model is")
    parser.add_argument("--accept-new-host-key", action="store_true", default=None,
                        help="trust the remote host's key on first connection (check the fingerprint the error "
                             "prints against the host's own key first)")
    parser.add_argument("--max-pixels", type=_positive_int, default=DEFAULT_MAX_PIXELS,
                        help=f"refuse images larger than this many pixels (default {DEFAULT_MAX_PIXELS:,})")


def _six(value: object) -> str:
    """A metric in the original script's format; None (n/a) says so."""
    return "n/a" if value is None else f"{value:.6f}"


def _format_line(path: Path, evaluation_metrics: ImageMetrics | None, roi_note: str = "") -> str:
    """The original script's line for one image, then the hard foreground Dice/IoU ("n/a" without any
    foreground in either mask), and how the ROI reached the stream when not by its own crop."""
    note = f" [{roi_note}]" if roi_note else ""
    if evaluation_metrics is None:
        return f"image: {path}, dice: n/a, iou: n/a (no mask){note}"
    values = catalogue.row_values(evaluation_metrics)
    return (f"image: {path}, dice: {_six(values['soft_dice'])}, iou: {_six(values['soft_iou'])}, "
            f"hard dice: {_six(values['foreground_dice'])}, hard iou: {_six(values['foreground_iou'])}{note}")


def _refuse_remote_only_options(args: argparse.Namespace) -> None:
    if args.remote is None:
        over_ssh = (args.cluster or "").startswith(SSH_SCHEME)  # starts a cluster over SSH
        given = [name for name in REMOTE_ONLY if getattr(args, name) is not None
                 and not (over_ssh and name in CLUSTER_SSH_OPTIONS)]
        if given:
            where = "--remote USER@HOST" + (" or --cluster ssh://HOST,..." if given[0] in CLUSTER_SSH_OPTIONS else "")
            raise SegScopeError(f"--{given[0].replace('_', '-')}: only applies with {where}; "
                                "add it or drop the option")


@contextlib.contextmanager
def _open_eval_backend(args: argparse.Namespace) -> Iterator[Backend]:
    """The backend `eval` asked for, its notes (which stream of several it drives; how DVPP is approximated)
    printed on stderr."""
    with open_backend(spec_from_args(args)) as backend:
        details = backend.capabilities.details
        notes = ([f"SegScope drives {details['stream']}"] if "stream" in details else []) + \
            ([details["note"]] if "note" in details else []) + \
            ([f"--backend auto {details['auto']}"] if "auto" in details else [])
        for note in notes:
            cli_lines.note(note)
        yield backend


def run_eval(args: argparse.Namespace, out: TextIO) -> int:
    _refuse_remote_only_options(args)
    refuse_bad_precision_options(args)
    spec = metric_spec(args)
    for given, flag in ((args.ship_images, "--ship-images"), (args.task_resources, "--task-resources")):
        if given and not args.cluster:
            raise SegScopeError(f"{flag}: only applies with --cluster tcp://HOST:PORT; add --cluster or drop it")
    if args.tile is not None:
        rows, tiled_means = run_tiled_eval(args, out, lambda: _open_eval_backend(args), Progress, _format_line)
        return _print_results(args, rows, tiled_means, out)
    refuse_without_tile(args)
    roi = Roi.parse(args.roi) if args.roi is not None else None
    dataset = Dataset.open(args.dataset, max_pixels=args.max_pixels)
    kinds = [k.strip() for k in args.export_kinds.split(",") if k.strip()]
    summary, rows, quality = DatasetSummary(), [], QualitySummary(spec)
    progress = Progress(len(dataset))
    export = ExportFolder(args.export, args.overwrite, dataset.root) if args.export else None
    with contextlib.ExitStack() as stack:
        if export is not None:
            stack.enter_context(export)  # locked for the whole run; every target checked before the first write
            names = [n for item in dataset.items for n in planned_files(item.id, kinds)] + list(METRICS_FILES) \
                + run_files(kinds)
            refuse_existing([args.export / name for name in names], args.overwrite)
        backend = stack.enter_context(_open_eval_backend(args))
        stream = StreamInput.of(chosen_source(args))  # the shipped pipeline when none is given
        backend, notes = with_precision(backend, args, dataset, roi, stream)  # fp32: the backend itself
        check = AccuracyCheck(backend, dataset)
        for note in notes:
            cli_lines.note(note)
        writer = stack.enter_context(ExportWriter(export, background=args.overlap))  # files beside inference

        def print_line(done: int, evaluation: ImageEvaluation) -> None:  # once the image's files are in place
            if not args.json:
                progress.clear()
                chosen = line_text(spec, evaluation.metrics.quality, backend.capabilities.class_names) \
                    if evaluation.metrics is not None and evaluation.metrics.quality else ""
                print(_format_line(evaluation.item.image_path, evaluation.metrics, evaluation.result.roi_note)
                      + chosen, file=out, flush=True)
            progress.update(done, evaluation.item.id)

        evaluations = evaluate_dataset(backend, dataset, roi, overlap=args.overlap, stream=stream, quality=spec)
        for done, evaluation in enumerate(evaluations, 1):
            summary.add(evaluation.metrics)
            quality.add(evaluation.metrics)
            check.add(evaluation)
            result, item = evaluation.result, evaluation.item
            rows.append(evaluation_row(item, result.roi, evaluation.metrics, result.timings, result.roi_note))
            writer.submit(result, source_for(item, backend.capabilities), kinds,
                          functools.partial(print_line, done, evaluation))
        writer.finish()
        progress.clear()
        means: dict[str, object] = {**summary.means(), **quality.summary()}
        if export is not None:
            export.write_metrics(rows, means)
            export.write_coco()
        usage = getattr(backend, "usage", None)  # per device (or cluster worker): images, throughput, busy time
    return _print_results(args, rows, means, out, usage if isinstance(usage, UsageLog) else None, check)


def _print_results(args: argparse.Namespace, rows: list[dict[str, object]], means: Mapping[str, object],
                   out: TextIO, usage: UsageLog | None = None, check: AccuracyCheck | None = None) -> int:
    """The JSON document (with the metrics' definitions, the ranking, per-device usage and the precision
    check), or the original script's summary lines (usage on stderr)."""
    if usage is not None and not args.json:
        for line in usage.lines():
            print(f"segscope: {line}", file=sys.stderr)
    precision = check.summary() if check is not None else None
    if args.json:
        document = {"images": rows, "summary": means, **catalogue_document(),
                    **({"devices": usage.as_dicts()} if usage else {}),
                    **({"precision": precision} if precision else {})}
        json.dump(json_safe(document), out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        def shown(key: str) -> object:
            if not means["images_with_masks"]:
                return "n/a (no image has a mask)"
            return "n/a (no image has a foreground in its mask or prediction)" if means[key] is None else means[key]

        print(f"========== Cross Valid dice coeff is: {shown('soft_dice')}", file=out)
        print(f"========== Cross Valid IOU is: {shown('soft_iou')}", file=out)
        scored = sum(row.get("foreground_dice") is not None for row in rows)
        without = int(means["images_with_masks"]) - scored  # type: ignore[call-overload]
        counted = f" (over {scored} images with masks" + (
            f"; {without} without any foreground in mask or prediction: n/a" if without else "") + ")"
        print(f"========== Hard foreground dice is: {shown('foreground_dice')}"
              f"{counted if means['images_with_masks'] else ''}", file=out)
        for line in summary_lines(means):
            print(line, file=out)
    if check is not None and precision:
        line, warning = check.lines()
        if not args.json:
            print(line, file=out)
        if warning:
            print(f"segscope: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _run_report(args: argparse.Namespace, out: TextIO) -> int:
    _refuse_remote_only_options(args)
    return run_report(args, out, lambda: _open_eval_backend(args))


def run_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo_data import generate_demo_dataset

    paths = generate_demo_dataset(args.dir, count=args.count, seed=args.seed, overwrite=args.overwrite)
    print(f"wrote {len(paths)} demo slides to {args.dir}; try: segscope eval --dataset {args.dir}", file=out)
    return EXIT_OK


def _check_display() -> None:
    """Qt aborts the process without a display; say how to run instead."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                                                 or os.environ.get("QT_QPA_PLATFORM")):
        raise SegScopeError("no display found (DISPLAY and WAYLAND_DISPLAY are unset): run the viewer in a desktop "
                            "session or under Xvfb (xvfb-run segscope ...), or use the command line "
                            "(segscope eval --dataset DIR; segscope --help)")


def run_gui(args: argparse.Namespace, out: TextIO) -> int:
    _check_display()
    cli_lines.LINES.show()  # the viewer runs until closed: its warnings go out as they come
    # Loaded on demand so the headless commands never import Qt.
    app = importlib.import_module("segscope.gui.app")
    return int(app.main([str(args.dataset)] if args.dataset else []))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="segscope", description="Inspect and correct U-Net segmentations "
                                     "from MindX SDK streams (embedded, Ascend host, or remote over SSH).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors (anywhere on "
                                                             "the command line)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    gui = commands.add_parser("gui", help="open the viewer (the default)")
    gui.add_argument("dataset", nargs="?", type=Path, help="dataset folder (default: the demo dataset)")
    gui.set_defaults(handler=run_gui)

    ev = commands.add_parser("eval", help="evaluate a dataset headless")
    ev.add_argument("--dataset", type=Path, required=True, help="DIR/<id>/image.png [+ mask.png], or a flat folder")
    ev.add_argument("--roi", help="x0,y0,x1,y1 for every image (default: per-image ROI from DIR/segscope.json, "
                                  "else 2200,1000,4000,2800 when it fits, else the whole image)")
    ev.add_argument("--export", type=Path, metavar="OUT", help="write masks, tensors and metrics to OUT")
    ev.add_argument("--export-kinds", default=",".join(DEFAULT_KINDS),
                    help=f"comma-separated, from {', '.join([*EXPORT_KINDS, *RUN_KINDS])}: geojson is each mask as "
                         "QuPath annotations, coco one annotations.coco.json (RLE) for the run "
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
    _add_backend_options(ev)
    add_precision_options(ev)
    ev.set_defaults(handler=run_eval)

    report = commands.add_parser("report", help="evaluate a dataset into one self-contained HTML report")
    add_report_options(report)
    _add_backend_options(report)
    report.set_defaults(handler=_run_report)

    demo = commands.add_parser("demo", help="write the demo dataset (synthetic industrial slides with masks)")
    demo.add_argument("dir", type=Path)
    demo.add_argument("--count", type=_count, default=8)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--overwrite", action="store_true")
    demo.set_defaults(handler=run_demo)

    add_compare_command(commands)
    add_card_command(commands)
    add_check_command(commands)
    profiling_cli.register(commands)
    return parser


def _normalise_argv(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], bool]:
    """`--debug` taken out wherever it is, and `--opt -1,...` joined as `--opt=-1,...`: argparse would read a
    value starting with "-" as an option (only bare negative numbers are exempt)."""
    debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
    argv = [a for a in argv if a != "--debug"] if debug else list(argv)
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = [parser, *(p for action in subparsers for p in action.choices.values())]
    takes_value = {option for p in parsers for a in p._actions if a.nargs is None and a.option_strings
                   for option in a.option_strings}
    known = {option for p in parsers for option in p._option_string_actions}
    joined: list[str] = []
    for arg in argv:
        if joined and joined[-1] in takes_value and arg.startswith("-") and arg not in known and arg != "--":
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined, debug


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    argv, debug = _normalise_argv(parser, argv)
    known = {"gui", "eval", "report", "demo", "compare", "card", "check", "profile", "drift", "-h", "--help"}
    if not argv or argv[0] not in known:  # `segscope` or `segscope DATASET` opens the viewer
        argv = ["gui", *argv]
    args = parser.parse_args(argv)
    cli_lines.install()  # notes and warnings wait for the first output: an error line comes alone
    try:
        code = args.handler(args, cli_lines.ReleasingOutput(out or sys.stdout, cli_lines.LINES))
        cli_lines.LINES.show()
        return code
    except SegScopeError as exc:
        cli_lines.LINES.drop()
        print(f"segscope: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        cli_lines.LINES.show()
        print("segscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head -1`: the reader left; the files exported so far are complete
        cli_lines.LINES.drop()
        with contextlib.suppress(OSError, ValueError):  # no second error when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("segscope: error: the standard output was closed by its reader (a pipe such as | head): stopped "
              "there; every image exported so far is complete", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # a bug: say so in one line, details on request
        cli_lines.LINES.drop()
        print(f"segscope: internal error: {type(exc).__name__}: {exc} (a bug; rerun with --debug for details "
              "and report it)", file=sys.stderr)
        if debug:
            traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
