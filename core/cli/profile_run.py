"""`segscope profile`'s run (its options: `profile.py`): profile the model here and/or read imported profiles,
then print them (a table, or one JSON document)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TextIO

from ..errors import SegScopeError
from ..profiling.insight import matched_ops, where_to_look
from ..profiling.model import Profile
from ..profiling.roofline import classify
from ..stream.source import chosen_source
from .cache import apply_cache_options
from .output import cell


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


def print_profile(profile: Profile, out: TextIO, top: int | None = None) -> None:
    print(f"{profile.kind}: {profile.source}", file=out)
    print(f"device: {profile.device}", file=out)
    if profile.peak:
        p = profile.peak
        print(f"roofs (measured here): {p.peak_gflops:.1f} GFLOP/s, {p.bandwidth_gbs:.1f} GB/s "
              f"(ridge {p.ridge:.2f} FLOP/byte); 'roof' is each operator's share of its roof", file=out)
    flops = f", {profile.total_flops / 1e9:.3f} GFLOP" if profile.total_flops else ""
    runs = f" over {profile.runs} run(s)" if profile.runs else ""  # ais_bench may not say how many
    print(f"model: {cell(profile.model_ms, '.3f')} ms mean{runs}{flops}", file=out)
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
        print(f"{cell(op.mean_ms, '10.3f'):>10} {cell(op.p95_ms, '10.3f'):>10} {cell(op.share * 100, '5.1f'):>5}%"
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
    from ..profiling.ascend import import_profile

    if args.dataset is None and not args.imports:
        raise SegScopeError("segscope profile: give --dataset DIR to profile the model here, or --import FILE "
                            "to read an msprof / ais_bench profile")
    profiles = []
    apply_cache_options(args)
    if args.dataset is not None:
        from ..profiling.run import profile_backend, profile_pipeline

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
