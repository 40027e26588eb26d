"""What a command runs: `--pipeline FILE` (a MindX stream) or `--model CARD` (a model card without a pipeline:
its `.onnx` on the embedded backend, its `.om` on mindx-model or ais-bench), for `eval` and `profile` alike."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import SegScopeError
from .loader import card_source
from .pipeline import DEFAULT_PIPELINE

MODEL_HELP = ("a model card (or the .om/.onnx beside one) to run without a pipeline: decode, crop, resize to its "
              "input and its preprocessing, as the shipped stream does; its .onnx on the embedded backend, its .om "
              "on mindx-model or ais-bench")


def add_source_options(parser: argparse.ArgumentParser, pipeline_help: str) -> None:
    parser.add_argument("--pipeline", type=Path, default=None, help=pipeline_help)
    parser.add_argument("--model", type=Path, default=None, metavar="CARD", help=MODEL_HELP)


def chosen_source(args: argparse.Namespace) -> Path:
    """The pipeline or model card the command runs (the shipped pipeline when neither is given)."""
    if args.model is None:
        return args.pipeline or DEFAULT_PIPELINE
    if args.pipeline is not None:
        raise SegScopeError("--model and --pipeline: give one (a model card runs without a pipeline)")
    if not args.model.is_file():
        raise SegScopeError(f"--model {args.model}: file not found (give the model card, or the .om/.onnx beside it)")
    if card_source(args.model) is None:
        raise SegScopeError(f"--model {args.model}: not a model card (a JSON object with 'input' and 'outputs', "
                            "docs/model-cards.md); a .pipeline file goes to --pipeline")
    return args.model
