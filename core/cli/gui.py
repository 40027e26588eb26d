"""`segscope [gui] [DATASET]`: open the viewer (on the demo dataset when none is given); what `segscope`
runs when no subcommand is named."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import TextIO

from ..errors import SegScopeError
from .cache import add_cache_options, apply_cache_options
from .output import LINES


def _check_display() -> None:
    """Qt aborts the process without a display; say how to run instead."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                                                 or os.environ.get("QT_QPA_PLATFORM")):
        raise SegScopeError("no display found (DISPLAY and WAYLAND_DISPLAY are unset): run the viewer in a desktop "
                            "session or under Xvfb (xvfb-run segscope ...), or use the command line "
                            "(segscope eval --dataset DIR; segscope --help)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.dataset is not None and not args.dataset.is_dir():  # a mistyped subcommand lands here too
        raise SegScopeError(f"{args.dataset}: neither a dataset folder nor a segscope command (segscope --help "
                            "lists the commands)")
    _check_display()
    apply_cache_options(args)  # the viewer's runs in this process use it
    LINES.show()  # the viewer runs until closed: its warnings go out as they come
    # Loaded on demand so the headless commands never import Qt.
    app = importlib.import_module("segscope.gui.app")
    return int(app.main([str(args.dataset)] if args.dataset else []))


def register(commands: argparse._SubParsersAction) -> None:
    gui = commands.add_parser("gui", help="open the viewer (the default)")
    gui.add_argument("dataset", nargs="?", type=Path, help="dataset folder (default: the demo dataset)")
    add_cache_options(gui)
    gui.set_defaults(handler=run)
