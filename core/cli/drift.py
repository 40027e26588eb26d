"""`segscope drift result_*.csv [--cosine 0.99] [--json]`: rank an msit/ait debug compare result, find the first
operator that drifts; its thresholds are `compare`'s too, and so is its exit code: a drift found exits with
`EXIT_FAIL` (3), as compare's FAIL does, so a script or CI can stop on it."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TextIO

from ..profiling.drift import DriftReport, DriftRow, Thresholds, load_drift_csv
from .options import checked
from .output import EXIT_FAIL, cell

#: The thresholds' ranges: a cosine outside [-1, 1] or a negative distance or KL would make every verdict FAIL
#: (or every one PASS) whatever the tensors hold, a gate that gates nothing.
_cosine = checked(float, lambda v: -1 <= v <= 1, "a cosine similarity in [-1, 1]")
_at_least_zero = checked(float, lambda v: 0 <= v < math.inf, "a finite number >= 0")


def add_threshold_options(parser: argparse.ArgumentParser) -> None:
    """The drift thresholds, shared by `segscope drift` and `segscope compare`."""
    default = Thresholds()
    parser.add_argument("--cosine", type=_cosine, default=default.cosine, metavar="MIN",
                        help=f"fail below this cosine similarity (default {default.cosine})")
    parser.add_argument("--rel-euclidean", type=_at_least_zero, default=default.relative_euclidean, metavar="MAX",
                        help=f"fail above this relative Euclidean distance (default {default.relative_euclidean})")
    parser.add_argument("--kl", type=_at_least_zero, default=default.kl, metavar="MAX",
                        help=f"fail above this KL divergence (default {default.kl})")


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    return Thresholds(args.cosine, args.rel_euclidean, args.kl)


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
    first = report.first_failure
    code = 0 if first is None else EXIT_FAIL
    if args.json:
        json.dump(drift_document(report), out, indent=2, allow_nan=False)
        out.write("\n")
        return code
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
        print(f"{cell(m['cosine'], '10.6f'):>10} {cell(m['relative_euclidean'], '10.4g'):>10} "
              f"{cell(m['kl'], '10.4g'):>10} {cell(m['max_abs'], '10.4g'):>10}  {flag:4} "
              f"{r.op_type} / {r.npu} / {r.truth}{f' ({r.reason})' if r.reason else ''}", file=out)
    return code


def register(commands: argparse._SubParsersAction) -> None:
    drift = commands.add_parser(
        "drift", help="rank a msit/ait debug compare result CSV, find the first drift; exit 3 on drift",
        description="Rank the tensors of a msit/ait debug compare result (result_*.csv), worst first, and name the "
                    "first operator past the thresholds (the operators after it inherit its error).",
        epilog=f"Exit codes: 0 no drift (PASS), {EXIT_FAIL} drift found (a tensor past a threshold), 2 bad usage or "
               "bad input, 1 internal error.")
    drift.add_argument("csv", type=Path, help="result_*.csv written by msit/ait debug compare")
    add_threshold_options(drift)
    drift.add_argument("--top", type=int, default=20, help="rows to show, worst first (default 20)")
    drift.add_argument("--json", action="store_true")
    drift.set_defaults(handler=run_drift)
