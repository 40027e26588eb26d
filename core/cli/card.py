"""`segscope card MODEL --out DIR`: a runnable project (card, pipeline, ATC files) from an ONNX model or an
Ascend .om (`core.card.builder`), then what was found, assumed and written, and how to run it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..card.om import parse_tensor
from ..card.reader import ACTIVATIONS, THRESHOLD_ON
from ..card.values import parse_classes, parse_number, parse_numbers, parse_positive, parse_positives, parse_size
from ..stream.preprocess import COLORS, LAYOUTS


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ..card.builder import CardOptions, propose, write_project

    options = CardOptions(size=args.size, layout=args.layout, color=args.color, scale=args.scale, mean=args.mean,
                          std=args.std, aipp=args.aipp, activation=args.activation, threshold=args.threshold,
                          threshold_on=args.threshold_on, classes=args.classes, from_onnx=args.from_onnx,
                          inputs=tuple(args.inputs), outputs=tuple(args.outputs))
    proposal = propose(args.model, options)
    written = write_project(args.model, args.out, proposal, options, args.overwrite)
    for kind, lines in (("found", proposal.found), ("assumed", proposal.assumed), ("note", proposal.notes)):
        for line in lines:
            print(f"{kind}: {line}", file=out)
    card = args.out / "models" / f"{proposal.stem}.json"
    if proposal.om:
        run = f"--model {card} --backend mindx-model (or ais-bench)"
        if written.suffix == ".pipeline":
            run += f", or --pipeline {written} --backend mindx"
        print(f"wrote {card} beside the .om; run: segscope eval --dataset DIR {run}", file=out)
    else:
        print(f"wrote {card} and the ATC files beside it; run: segscope eval --dataset DIR --pipeline {written}",
              file=out)
    print(written, file=out)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    card = commands.add_parser("card", help="make a runnable project (card, pipeline, ATC files) from an ONNX model "
                                            "or an Ascend .om")
    card.add_argument("model", type=Path, help="the .onnx file, or an .om with --from or --input/--output")
    card.add_argument("--from", dest="from_onnx", type=Path, metavar="MODEL.onnx",
                      help="with an .om: the ONNX file it was converted from (its names and shapes)")
    card.add_argument("--input", dest="inputs", type=parse_tensor, action="append", default=[],
                      metavar="NAME:NxCxHxW", help="with an .om and no ONNX file: its input's name and shape")
    card.add_argument("--output", dest="outputs", type=parse_tensor, action="append", default=[],
                      metavar="NAME:SHAPE[:TYPE]", help="with an .om and no ONNX file: each output in order, e.g. "
                                                        "probs:1x960x960x2 or argmax:1x960x960:int32")
    card.add_argument("--out", type=Path, required=True, help="project folder to write (models/, pipelines/)")
    card.add_argument("--size", type=parse_size, metavar="WxH", help="the model input size (needed for dynamic sizes)")
    card.add_argument("--layout", choices=LAYOUTS, help="input layout, when the shape does not tell")
    card.add_argument("--color", type=str.upper, choices=COLORS, help="channel order the network expects")
    card.add_argument("--scale", type=parse_positive, help="the net sees (pixel * scale - mean) / std; e.g. 1/255")
    card.add_argument("--mean", type=parse_numbers, metavar="A[,B,C]", help="per-channel mean (after scale)")
    card.add_argument("--std", type=parse_positives, metavar="A[,B,C]", help="per-channel std (after scale)")
    card.add_argument("--aipp", type=Path, metavar="CFG", help="an ATC AIPP config instead of scale/mean/std")
    card.add_argument("--activation", choices=tuple(ACTIVATIONS), help="applied to the score output")
    card.add_argument("--threshold", type=parse_number, help="foreground where p > T (1-channel outputs; default 0.5)")
    card.add_argument("--threshold-on", choices=THRESHOLD_ON,
                      help="what --threshold compares: the probability (after --activation), or the raw output as "
                           "the model gives it (default: raw for --activation none on an output that is not a "
                           "Softmax/Sigmoid, else probability)")
    card.add_argument("--classes", type=parse_classes, metavar="NAME,NAME,...", help="class names")
    card.add_argument("--overwrite", action="store_true", help="replace the project's files if they exist")
    card.set_defaults(handler=run)
