"""`segscope check PIPELINE...`: one line per file (valid for MindX? runs on the embedded backend?); exit 2
when any file is invalid (the lines: `core.stream.check`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

EXIT_OK, EXIT_INVALID = 0, 2


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ..stream.check import check_line

    valid = True
    for path in args.pipelines:
        ok, line = check_line(path)
        valid = valid and ok
        print(line, file=out, flush=True)
    return EXIT_OK if valid else EXIT_INVALID


def register(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser("check", help="check .pipeline files: valid for MindX? runs embedded?")
    check.add_argument("pipelines", nargs="+", type=Path, metavar="PIPELINE",
                       help="a .pipeline file; one line each, exit 2 when any is invalid for MindX")
    check.set_defaults(handler=run)
