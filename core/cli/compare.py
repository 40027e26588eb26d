"""`segscope compare REF.npy CAND.npy`: the accuracy comparison of two tensors, with a PASS/FAIL line.

The reference comes first (an ONNX or CPU output), the candidate second (the Ascend output). A tensor with
NaN or infinite values is never a PASS: the verdict names how many each holds, and the metrics are computed
without NumPy's RuntimeWarnings. A FAIL exits with `EXIT_FAIL` (3), apart from bad input (2) and bugs (1), so a
script or CI can stop on it.
"""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path
from typing import TextIO

import numpy as np

from ..errors import SegScopeError
from ..files.fileio import read_bytes
from ..metrics.numbers import json_safe
from ..metrics.scores import compare_tensors
from .drift import add_threshold_options, thresholds_from
from .output import EXIT_FAIL


def load_npy(path: Path) -> np.ndarray:
    """A numeric .npy tensor; its header (shape, type) is checked against the file's size before loading."""
    data = read_bytes(path)
    if not data.startswith(b"\x93NUMPY"):
        raise SegScopeError(f"{path}: not a NumPy .npy file (save tensors with numpy.save, or export them with "
                            "segscope eval --export)")
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(stream)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise SegScopeError(f"{path}: unreadable .npy header ({exc}); the file is truncated or damaged: save the "
                            "tensor again with numpy.save") from None
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise SegScopeError(f"{path}: holds {dtype} values; compare needs a numeric tensor (float or integer)")
    claimed = math.prod(shape) * dtype.itemsize
    if claimed > len(data) - stream.tell():
        raise SegScopeError(f"{path}: the header claims shape {shape} of {dtype} ({claimed:,} bytes) but the file "
                            f"holds {len(data) - stream.tell():,}; the file is truncated or damaged")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        raise SegScopeError(f"{path}: unreadable .npy tensor ({exc})") from None


def nonfinite(name: str, tensor: np.ndarray) -> str | None:
    """"the candidate holds 3 NaN and 1 infinite values", or None when every value is finite."""
    if tensor.dtype.kind != "f":
        return None
    nans, infinite = int(np.isnan(tensor).sum()), int(np.isinf(tensor).sum())
    return f"the {name} holds {nans:,} NaN and {infinite:,} infinite values" if nans or infinite else None


def run(args: argparse.Namespace, out: TextIO) -> int:
    reference, candidate = load_npy(args.reference), load_npy(args.candidate)
    if reference.shape != candidate.shape:
        raise SegScopeError(f"{args.candidate}: shape {candidate.shape} differs from "
                            f"{args.reference}'s {reference.shape}; compare the same output of the same input "
                            "(e.g. both softmax tensors of one image)")
    result = compare_tensors(reference, candidate)
    problems = tuple(p for p in (nonfinite("reference", reference), nonfinite("candidate", candidate)) if p)
    verdict = thresholds_from(args).verdict(result["cosine_similarity"], result["relative_euclidean_distance"],
                                            result["kl_divergence"], problems)
    if args.json:  # strict JSON: a non-finite value (e.g. an infinite relative error) is null
        json.dump(json_safe({**result, "verdict": verdict}), out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {value:.9g}", file=out)
        print(verdict, file=out)
    return EXIT_FAIL if verdict.startswith("FAIL") else 0


def register(commands: argparse._SubParsersAction) -> None:
    cmp = commands.add_parser(
        "compare", help="compare two tensors (.npy): cosine, errors, KL, std; exit 3 on FAIL",
        description="Compare a candidate tensor (e.g. the Ascend output) with a reference (e.g. ONNX on the CPU): "
                    "cosine similarity, errors, KL divergence, std, then a PASS or FAIL line.",
        epilog=f"Exit codes: 0 PASS, {EXIT_FAIL} FAIL (past a threshold, or NaN/infinite values in a tensor), 2 bad "
               "usage or bad input, 1 internal error.")
    cmp.add_argument("reference", type=Path)
    cmp.add_argument("candidate", type=Path)
    cmp.add_argument("--json", action="store_true")
    add_threshold_options(cmp)
    cmp.set_defaults(handler=run)
