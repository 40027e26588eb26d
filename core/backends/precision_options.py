"""`--precision` and its options on the command line: what the parser needs, without the variants themselves
(core.backends.precision, precision_check), so building `segscope`'s parser imports no model runtime."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import SegScopeError

PRECISIONS = ("fp32", "int8", "bf16")
DEFAULT_PRECISION = "fp32"
#: Images of a run also run in fp32 for the check (`--precision-check`).
DEFAULT_CHECKS = 4


def add_precision_options(parser: argparse.ArgumentParser) -> None:
    def count(text: str) -> int:
        if not (text.isascii() and text.isdigit()):
            raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
        return int(text)

    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="embedded backend only. fp32 (default): the ONNX model as is. int8: static QDQ "
                             "quantization calibrated on 4 of the run's own ROIs, run by OpenVINO when installed "
                             "(pip install \"segscope[fast]\"; 1.75-1.98x fp32 on a 2-core AVX-512 VNNI Xeon), else "
                             "ONNX Runtime (1.2-1.3x). bf16: OpenVINO bfloat16, for CPUs with AMX (0.7x, slower, "
                             "on that Xeon). The run ends with the variant's foreground Dice vs fp32")
    parser.add_argument("--precision-cache", type=Path, metavar="DIR", default=None,
                        help="keep the int8 model in DIR and reuse it for the same model and calibration inputs "
                             "(default: the cache folder's int8/, see --cache-dir; with --no-cache made anew in a "
                             "temporary folder each run, a few seconds)")
    parser.add_argument("--precision-check", type=count, metavar="N", default=None,
                        help=f"also run the first N images in fp32 for the Dice comparison (default "
                             f"{DEFAULT_CHECKS}; 0 skips it)")


def refuse_bad_precision_options(args: argparse.Namespace) -> None:
    """Before anything is opened: options that cannot apply, in one line."""
    if args.precision == DEFAULT_PRECISION:
        given = [o for o in ("precision_cache", "precision_check") if getattr(args, o) is not None]
        if given:
            raise SegScopeError(f"--{given[0].replace('_', '-')}: only applies with --precision int8 or bf16")
        return
    if args.tile is not None:
        raise SegScopeError(f"--precision {args.precision}: not available with --tile (whole-slide runs use the fp32 "
                            "model); drop --tile or --precision")
    if args.precision == "bf16" and args.precision_cache is not None:
        raise SegScopeError("--precision-cache: only applies with --precision int8 (bf16 makes no model file)")
    if args.remote is not None or args.backend == "mindx":
        where = "--remote" if args.remote is not None else "--backend mindx"
        raise SegScopeError(f"--precision {args.precision}: only the embedded backend on this machine has faster "
                            f"variants; drop {where} or run with --precision fp32")
