"""Options more than one subcommand takes: where the stream runs (`eval`, `report`) and how its backend opens
(`eval_driver.open_eval_backend` opens it when the command runs)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TextIO, TypeVar

from ..backends.registry import BACKEND_KINDS
from ..cluster import SSH_SCHEME
from ..dataset.truth import AUTO, CHOICES
from ..errors import SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..remote.protocol import DEFAULT_TIMEOUT, PROBABILITY_DTYPES
from ..stream.source import add_source_options

#: Options that only mean something with --remote (refused without it instead of being ignored).
REMOTE_ONLY = ("set_env", "remote_python", "remote_cache", "remote_timeout", "probabilities", "accept_new_host_key")
#: Of those, what also applies to `--cluster ssh://` (the hosts are reached as `--remote` reaches one).
CLUSTER_SSH_OPTIONS = ("set_env", "remote_python", "accept_new_host_key")
T = TypeVar("T")
#: A subcommand's handler: `handler(args, out) -> exit code`.
Handler = Callable[[argparse.Namespace, TextIO], int]


def deferred(module: str, function: str) -> Handler:
    """The handler that runs `function` of the run module `module` (of this package), imported only when the
    command runs: building the parser, `--help` or a usage error never loads it."""
    def run(args: argparse.Namespace, out: TextIO) -> int:
        handler: Handler = getattr(importlib.import_module(f"{__package__}.{module}"), function)
        return handler(args, out)

    return run


def add_dataset_option(parser: argparse.ArgumentParser) -> None:
    """`--dataset` and the `--truth` its images are scored against (`eval`, `report`, `review`)."""
    parser.add_argument("--dataset", type=Path, required=True, help="DIR/<id>/image.png [+ mask.png], or a flat folder")
    add_truth_option(parser)


def add_truth_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--truth", choices=CHOICES, default=AUTO,
                        help="the ground truth each image is scored against: auto (default: its saved correction "
                             "mask_corrected.png where there is one, else its mask.png; how many use a correction is "
                             "said once), original (mask.png) or corrected (only saved corrections; an image without "
                             "one is scored as an image without a mask)")


def checked(convert: Callable[[str], T], ok: Callable[[T], bool], expected: str) -> Callable[[str], T]:
    """An argparse `type`: `convert` the text, refused in one line unless `ok` ("expected <expected>, got '...'")."""
    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


positive_int = checked(int, lambda v: v > 0, "a positive integer")
positive_seconds = checked(float, lambda v: 0 < v < float("inf"), "a positive number of seconds")


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    add_source_options(parser, "MindX .pipeline file (default: the shipped U-Net stream and demo model)")
    parser.add_argument("--backend", choices=BACKEND_KINDS, default="auto",
                        help="embedded: ONNX Runtime + OpenCV; mindx: a pipeline through the MindX SDK; "
                             "mindx-model / ais-bench: the model's .om through the SDK's Model API / ais_bench, "
                             "SegScope preprocessing on the CPU; auto (default): the first of mindx (pipelines), "
                             "mindx-model and ais-bench found here (or on the --remote host), else embedded")
    parser.add_argument("--sdk-home", type=Path, help="MindX SDK folder (default: $MX_SDK_HOME)")
    parser.add_argument("--remote", metavar="USER@HOST[:PORT]",
                        help="run the stream on an Ascend host over SSH (a ~/.ssh/config alias works too)")
    parser.add_argument("--set-env", metavar="HOST_PATH", default=None,
                        help="with --remote: a script to source on the host first, e.g. $MX_SDK_HOME/set_env.sh")
    parser.add_argument("--remote-python", default=None, metavar="HOST_PATH",
                        help="with --remote: the host's Python 3.9+ with numpy, opencv and the SDK or onnxruntime "
                             "(with --cluster ssh://: one with segscope[cluster] installed)")
    parser.add_argument("--remote-cache", metavar="HOST_DIR", default=None,
                        help="with --remote: the host folder for the uploaded worker and model, relative to the "
                             "login's home unless absolute (default .cache/segscope)")
    parser.add_argument("--remote-timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="with --remote: give up on the host after this many seconds without a word from it "
                             f"(default {DEFAULT_TIMEOUT:g}); its worker says it is alive every few seconds, also "
                             "while it loads a model or infers, so only a host or link that stops answering hits it")
    parser.add_argument("--probabilities", choices=PROBABILITY_DTYPES, default=None,
                        help="with --remote: how probabilities travel back. float32 (default) is exact, metrics "
                             "identical to a local run: 3.3 MB per 960x960 demo result (lossless zlib of 7.4 MB "
                             "raw); float16 0.05 MB (values below its smallest normal, 2^-14, as 0), uint8 0.02 "
                             "MB (demo soft Dice within 5e-9 and 2e-7 of a local run; bench/RESULTS.md). Sizes "
                             "depend on how confident the model is")
    parser.add_argument("--accept-new-host-key", action="store_true", default=None,
                        help="trust the remote host's key on first connection (check the fingerprint the error "
                             "prints against the host's own key first)")
    parser.add_argument("--max-pixels", type=positive_int, default=DEFAULT_MAX_PIXELS,
                        help=f"refuse images larger than this many pixels (default {DEFAULT_MAX_PIXELS:,})")


def refuse_remote_only_options(args: argparse.Namespace) -> None:
    if args.remote is None:
        over_ssh = (args.cluster or "").startswith(SSH_SCHEME)  # starts a cluster over SSH
        given = [name for name in REMOTE_ONLY if getattr(args, name) is not None
                 and not (over_ssh and name in CLUSTER_SSH_OPTIONS)]
        if given:
            where = "--remote USER@HOST" + (" or --cluster ssh://HOST,..." if given[0] in CLUSTER_SSH_OPTIONS else "")
            raise SegScopeError(f"--{given[0].replace('_', '-')}: only applies with {where}; "
                                "add it or drop the option")
