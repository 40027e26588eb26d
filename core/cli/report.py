"""`segscope report --dataset D [--pipeline P] [--metrics ...] --out report.html`: evaluate a dataset as `eval`
does and write one self-contained HTML page a reviewer can mail (see `core/report`): the run's aggregates with
bootstrap intervals, the definitions, provenance (file names, no absolute local paths unless asked), the worst
images with their errors drawn, per class, defects, calibration and a sortable table of the worst images (every
image's row in the CSV beside the page). The run itself is `report_run`, imported when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..metrics import catalogue
from ..quality.options import add_metric_options
from .cache import add_cache_options
from .options import add_backend_options, add_dataset_option, checked, deferred

_worst = checked(int, lambda v: 0 <= v <= 100, "0 to 100 images")
_rows = checked(int, lambda v: v >= 0, "a number of images, 0 or more")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "report", help="evaluate a dataset into one self-contained HTML report",
        description="Evaluate a dataset as eval does (same backend options) and write one HTML file with everything "
                    "embedded (no external resource): the run's means with bootstrap intervals, medians, n/a and "
                    "inf counts, each metric's definition, unit and reference, provenance, distributions, the worst "
                    "images with their false alarms and misses drawn, per class, defects, calibration, and a sortable "
                    "table of the worst images (--rows), with every image's row in REPORT.csv beside the page. Needs "
                    "matplotlib (pip install \"segscope[report]\").")
    add_dataset_option(parser)
    parser.add_argument("--out", type=Path, required=True, metavar="REPORT.html",
                        help="the HTML file to write (and REPORT.csv beside it)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out and its CSV if they exist")
    parser.add_argument("--roi", help="x0,y0,x1,y1 for every image (default: as eval)")
    add_metric_options(parser, default="all")
    parser.add_argument("--rank", default=catalogue.DEFAULT_RANKING, metavar="METRIC",
                        help="the metric the worst images are picked by: any of the catalogue's (soft_dice, "
                             f"dice_1, hd95, defect_recall, ...; default {catalogue.DEFAULT_RANKING})")
    parser.add_argument("--worst", type=_worst, default=8, metavar="N",
                        help="show the N worst images as image | heatmap | prediction | truth | errors (default 8)")
    parser.add_argument("--rows", type=_rows, default=200, metavar="N",
                        help="the page's table of images lists the N worst by --rank (default 200; images where it "
                             "is n/a after every other); every image's row is in the CSV written beside the page "
                             "(REPORT.csv, as eval --export writes metrics.csv)")
    parser.add_argument("--absolute-paths", action="store_true",
                        help="name the dataset, pipeline and model by their absolute local paths in the provenance "
                             "(default: file names only, so the page can be mailed)")
    # What `eval` has and a report does not: one stream, no cluster.
    parser.set_defaults(devices=None, cluster=None, ship_images=False, task_resources=None)
    add_backend_options(parser)
    add_cache_options(parser)
    parser.set_defaults(handler=deferred("report_run", "write_report"))
