"""`segscope profile` (operator profile, Ascend imports) and `segscope drift` (msit compare triage).

    segscope profile --pipeline P --dataset D [--images N] [--json]   this CPU, ONNX Runtime's profiler
    segscope profile --model CARD --backend ais-bench --dataset D     the .om's NPU time per inference
    segscope profile --import op_summary_0_1.csv [--import ...]       msprof / ais_bench / trace files
    segscope drift result_20240101.csv [--cosine 0.99] [--json]        the first operator that drifts
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TextIO

from ..backends.registry import BACKEND_KINDS
from ..errors import SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS
from ..run_source import add_source_options, chosen_source
from .drift import DriftReport, DriftRow, Thresholds, load_drift_csv
from .insight import matched_ops, where_to_look
from .model import Profile
from .roofline import classify


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_threshold_options(parser: argparse.ArgumentParser) -> None:
    """The drift thresholds, shared by `segscope drift` and `segscope compare`."""
    default = Thresholds()
    parser.add_argument("--cosine", type=_finite, default=default.cosine, metavar="MIN",
                        help=f"fail below this cosine similarity (default {default.cosine})")
    parser.add_argument("--rel-euclidean", type=_finite, default=default.relative_euclidean, metavar="MAX",
                        help=f"fail above this relative Euclidean distance (default {default.relative_euclidean})")
    parser.add_argument("--kl", type=_finite, default=default.kl, metavar="MAX",
                        help=f"fail above this KL divergence (default {default.kl})")


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    return Thresholds(args.cosine, args.rel_euclidean, args.kl)


def profile_document(profile: Profile) -> dict[str, object]:
    """The `--json` document: model, total_flops, peak_gflops, model_ms and one entry per operator."""
    def number(value: float) -> float | None:
        return None if math.isnan(value) else value

    return {
        "model": profile.source,
        "total_flops": int(profile.total_flops),
        "peak_gflops": profile.peak.peak_gflops if profile.peak else None,
        "model_ms": number(profile.model_ms),
        "ops": [{"name": o.name, "type": o.type, "flops": int(o.flops), "bytes": int(o.bytes),
                 "mean_ms": number(o.mean_ms), "p95_ms": number(o.p95_ms), "share": number(o.share)}
                for o in profile.ops],
    }


def _cell(value: float, fmt: str) -> str:
    return "n/a" if math.isnan(value) else format(value, fmt)


def print_profile(profile: Profile, out: TextIO, top: int | None = None) -> None:
    print(f"{profile.kind}: {profile.source}", file=out)
    print(f"device: {profile.device}", file=out)
    if profile.peak:
        p = profile.peak
        print(f"roofs (measured here): {p.peak_gflops:.1f} GFLOP/s, {p.bandwidth_gbs:.1f} GB/s "
              f"(ridge {p.ridge:.2f} FLOP/byte); 'roof' is each operator's share of its roof", file=out)
    flops = f", {profile.total_flops / 1e9:.3f} GFLOP" if profile.total_flops else ""
    runs = f" over {profile.runs} run(s)" if profile.runs else ""  # ais_bench may not say how many
    print(f"model: {_cell(profile.model_ms, '.3f')} ms mean{runs}{flops}", file=out)
    for key, value in profile.summary.items():
        print(f"  {key}: {value:.6g}", file=out)
    if profile.ops:
        print(f"{'mean ms':>10} {'p95 ms':>10} {'share':>6} {'GFLOP':>8} {'GFLOP/s':>8} {'GB/s':>7} {'FLOP/B':>7} "
              f"{'roof':>5} {'bound':<20} {'type':<16} name", file=out)
    for op in profile.ops[:top]:
        point = classify(op, profile.peak) if profile.peak else None
        gflop = f"{op.flops / 1e9:8.3f}" if op.flops else f"{'':8}"
        roof = (f"{point.gflops:8.2f} {point.gbs:7.2f} {point.intensity:7.2f} {point.efficiency:5.0%} "
                f"{point.bound:<20}") if point else f"{'':8} {'':7} {'':7} {'':5} {'':20}"
        print(f"{_cell(op.mean_ms, '10.3f'):>10} {_cell(op.p95_ms, '10.3f'):>10} {_cell(op.share * 100, '5.1f'):>5}%"
              f" {gflop} {roof} {op.type:<16} {op.name}", file=out)
    if top is not None and len(profile.ops) > top:
        print(f"... {len(profile.ops) - top} more operators (--top to show more)", file=out)
    lines = where_to_look(profile)
    if lines:
        print("where to look:", file=out)
        for line in lines:
            print(f"- {line}", file=out)


def print_matches(cpu: Profile, chip: Profile, out: TextIO, top: int = 10) -> None:
    matches = matched_ops(cpu, chip)
    print(f"operator by operator ({len(matches)} names match between {Path(cpu.source).name} and "
          f"{Path(chip.source).name}):", file=out)
    for name, a, b in matches[:top]:
        print(f"  {a.mean_ms:10.3f} ms here  {b.mean_ms:10.3f} ms there  {name}", file=out)


def run_profile(args: argparse.Namespace, out: TextIO) -> int:
    from .ascend import import_profile

    if args.dataset is None and not args.imports:
        raise SegScopeError("segscope profile: give --dataset DIR to profile the model here, or --import FILE "
                            "to read an msprof / ais_bench profile")
    profiles = []
    if args.dataset is not None:
        from .run import profile_backend, profile_pipeline

        source = chosen_source(args)
        profiles.append(profile_pipeline(source, args.dataset, args.images, max_pixels=args.max_pixels)
                        if args.backend == "embedded" else
                        profile_backend(args.backend, source, args.dataset, args.images, args.sdk_home,
                                        max_pixels=args.max_pixels))
    profiles.extend(import_profile(path) for path in args.imports)
    if args.json:
        if len(profiles) > 1:
            raise SegScopeError("--json prints one profile: give either --dataset or one --import")
        json.dump(profile_document(profiles[0]), out, indent=2, allow_nan=False)
        out.write("\n")
        return 0
    for i, profile in enumerate(profiles):
        if i:
            print(file=out)
        print_profile(profile, out, args.top)
    if args.dataset is not None:
        for chip in profiles[1:]:
            print(file=out)
            print_matches(profiles[0], chip, out)
    return 0


def _drift_row(r: DriftRow) -> dict[str, object]:
    return {"line": r.line, "index": r.index, "op_type": r.op_type, "npu": r.npu, "ground_truth": r.truth,
            "tensor": r.tensor, "failures": list(r.failures),
            **{k: (v if math.isfinite(v) else None) for k, v in r.metrics.items()}}


def drift_document(report: DriftReport) -> dict[str, object]:
    """`segscope drift --json`: thresholds, the first failing row (or null) and every row, worst first."""
    first = report.first_failure
    return {"file": report.source, "thresholds": vars(report.thresholds),
            "first_failure": _drift_row(first) if first else None, "not_judged": report.unjudged,
            "ranked": [_drift_row(r) for r in report.ranked()]}


def run_drift(args: argparse.Namespace, out: TextIO) -> int:
    report = load_drift_csv(args.csv, thresholds_from(args))
    if args.json:
        json.dump(drift_document(report), out, indent=2, allow_nan=False)
        out.write("\n")
        return 0
    first = report.first_failure
    if first is None:
        judged = len(report.rows) - report.unjudged
        print(f"PASS: none of {judged} compared tensors is past the thresholds" +
              (f"; {report.unjudged} rows had nothing to judge (empty or NaN cells)" if report.unjudged else ""),
              file=out)
    else:
        print(f"first drift (line {first.line}): {first.op_type} {first.npu} vs {first.truth}: "
              f"{'; '.join(first.failures)}", file=out)
    print(f"{'cosine':>10} {'rel.eucl':>10} {'KL':>10} {'max abs':>10}  {'':4} op type / NPU op / ground truth",
          file=out)
    for r in report.ranked()[:args.top]:
        m = r.metrics
        flag = "FAIL" if r.failures else ""
        print(f"{_cell(m['cosine'], '10.6f'):>10} {_cell(m['relative_euclidean'], '10.4g'):>10} "
              f"{_cell(m['kl'], '10.4g'):>10} {_cell(m['max_abs'], '10.4g'):>10}  {flag:4} "
              f"{r.op_type} / {r.npu} / {r.truth}{f' ({r.reason})' if r.reason else ''}", file=out)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `profile` and `drift` to the `segscope` command."""
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
    prof.set_defaults(handler=run_profile)

    drift = commands.add_parser("drift", help="rank a msit/ait debug compare result CSV, find the first drift")
    drift.add_argument("csv", type=Path, help="result_*.csv written by msit/ait debug compare")
    add_threshold_options(drift)
    drift.add_argument("--top", type=int, default=20, help="rows to show, worst first (default 20)")
    drift.add_argument("--json", action="store_true")
    drift.set_defaults(handler=run_drift)
