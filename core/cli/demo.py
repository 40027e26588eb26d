"""`segscope demo DIR`: write the demo dataset (synthetic industrial slides with masks)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from .options import positive_int


def _count(text: str) -> int:
    value = positive_int(text)
    if value > 10_000:
        raise argparse.ArgumentTypeError(f"expected at most 10000, got {text!r}")
    return value


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ..dataset.demo import generate_demo_dataset

    paths = generate_demo_dataset(args.dir, count=args.count, seed=args.seed, overwrite=args.overwrite)
    print(f"wrote {len(paths)} demo slides to {args.dir}; try: segscope eval --dataset {args.dir}", file=out)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo", help="write the demo dataset (synthetic industrial slides with masks)",
        description="Write DIR/<id>/image.png and mask.png (255 = defect) for ids 001, 002, ...: synthetic "
                    "4000x3000 industrial slides; one in six (003, 009, ...) has no defect. The same seed always "
                    "gives byte-identical files, and a longer dataset starts with the slides of a shorter one.")
    demo.add_argument("dir", type=Path, help="the folder to write (created if needed)")
    demo.add_argument("--count", type=_count, default=8, help="how many slides, 1 to 10000 (default 8)")
    demo.add_argument("--seed", type=int, default=0, help="the random seed of the slides (default 0)")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace existing files (refused by default, before anything is written)")
    demo.set_defaults(handler=run)
