"""`segscope review --dataset D [--model M] [--json | --csv] [--out FILE]`: the disagreement queue of a dataset
(`core.review.queue`), best first, one record per entry; `--against B`: the parity of two runs of the dataset
(`core.review.parity`), its gate deciding the exit code. The run itself is `review_run`, imported when the command
runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..backends.registry import BACKEND_KINDS
from ..quality.defects import MATCH_IOU
from ..review import AREA_HALF, DEFAULT_LIMIT, MIN_BOUNDARY_AREA, MIN_DICE
from .cache import add_cache_options
from .options import add_backend_options, add_dataset_option, checked, deferred
from .output import EXIT_FAIL

_top = checked(int, lambda v: v >= 0, "0 (every entry) or a positive number of entries")
_pixels = checked(int, lambda v: v >= 1, "a whole number of pixels, at least 1")
_iou = checked(float, lambda v: 0 < v <= 1, "an IoU in (0, 1]")
_dice = checked(float, lambda v: 0 <= v <= 1, "a Dice in [0, 1]")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "review", help="the dataset's disagreements between prediction and truth, likely label errors first",
        description="Run a dataset as eval does and list every connected component where the prediction and the "
                    "truth disagree (missed, false_alarm, shifted, split, merged, boundary), per class, ranked by "
                    "score = the model's mean margin against the truth over the disagreeing pixels x area / "
                    f"(area + {AREA_HALF}): confident disagreements (likely label errors) and large ones (costly "
                    "misses) first. Boxes are [x0, y0, x1, y1) in slide pixels. With --against: two runs of the "
                    "dataset compared per image (foreground Dice, defects gained, lost or changed in class), the most "
                    f"different first, and a gate: exit 0 when it passes, {EXIT_FAIL} when it fails, 2 on "
                    "bad input.")
    add_dataset_option(parser)
    parser.add_argument("--roi", help="x0,y0,x1,y1 for every image (default: as eval)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="one JSON document: the entries best first (image, "
                                                           "kind, class, bbox, area, score, ...) and a summary")
    shown.add_argument("--csv", action="store_true", help="CSV, one row per entry (per image with --against)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="write the JSON (default) or CSV (--csv) to FILE, whole or not at all, and say so in "
                             "one line")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    parser.add_argument("--top", type=_top, default=DEFAULT_LIMIT, metavar="N",
                        help="keep the N best entries (images with --against); every one is counted (default "
                             f"{DEFAULT_LIMIT}, 0: all)")
    parser.add_argument("--min-defect-area", type=_pixels, default=1, metavar="PX",
                        help="components smaller than PX pixels are not defects, as eval's (default 1)")
    parser.add_argument("--defect-iou", type=_iou, default=MATCH_IOU, metavar="T",
                        help=f"a true and a predicted defect match at IoU >= T, as eval's (default {MATCH_IOU:g})")
    parser.add_argument("--min-boundary-area", type=_pixels, default=MIN_BOUNDARY_AREA, metavar="PX",
                        help="matched defects whose outlines differ by fewer pixels are no entry (default "
                             f"{MIN_BOUNDARY_AREA})")
    parity = parser.add_argument_group("two runs (--against)")
    parity.add_argument("--against", type=Path, metavar="PIPELINE_OR_CARD",
                        help="compare the run of --pipeline/--model (A) with this one's (B): a .pipeline file or a "
                             "model card. A defect is a place where either run has a component of at least "
                             "--min-defect-area px (overlapping components are one place): one only A has is lost, "
                             "one only B has gained, one whose majority class differs changed")
    parity.add_argument("--against-backend", choices=BACKEND_KINDS, default=None,
                        help="B's backend (default: --backend); alone, B is A's model on this backend (e.g. "
                             "embedded against mindx-model)")
    parity.add_argument("--min-dice", type=_dice, default=None, metavar="D",
                        help="the gate: no defect gained, lost or changed in class, and every image's foreground "
                             "Dice between the runs >= D (default "
                             f"{MIN_DICE:g})")
    # What `eval` has and a review does not: one stream per run, no cluster.
    parser.set_defaults(devices=None, cluster=None, ship_images=False, task_resources=None)
    add_backend_options(parser)
    add_cache_options(parser)
    parser.set_defaults(handler=deferred("review_run", "review"))
