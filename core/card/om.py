"""`segscope card MODEL.om`: what an Ascend `.om` is, for the card, when SegScope cannot read the file itself.

An `.om` is ATC's compiled network; its inputs and outputs come from the ONNX file it was converted from
(`--from MODEL.onnx`, read as for an ONNX card) or, when that file is gone, from `--input NAME:1x3x960x960` and
`--output NAME:1x960x960x2[:TYPE]` flags (the shapes `atc` printed, or `npu-smi`/msit's model info). Either way
the result is a `GraphInfo`, so the card is proposed and checked as for an ONNX model; the `.om` backends then
check the card against the `.om`'s own metadata when they open it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import SegScopeError
from .onnx_graph import ELEM_TYPES, GraphInfo, TensorInfo, read_graph

#: Flag type names -> ONNX element types.
_TYPES = {name: code for code, name in ELEM_TYPES.items()}


def parse_tensor(text: str) -> TensorInfo:
    """'NAME:1x3x960x960[:TYPE]' (TYPE float32 by default, e.g. int32 for an argmax output)."""
    name, _, rest = text.partition(":")
    shape, _, type_name = rest.partition(":")
    try:
        dims = tuple(int(d) for d in shape.lower().split("x"))
    except ValueError:
        dims = ()
    if not name or len(dims) not in (3, 4) or min(dims) < 1 or (type_name or "float32") not in _TYPES:
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME:NxCxHxW (or NxHxWxC, NxHxW) and optionally :TYPE "
                                         f"({', '.join(_TYPES)}), e.g. image:1x3x960x960 or argmax:1x960x960:int32")
    return TensorInfo(name, _TYPES[type_name or "float32"], dims)


def om_graph(om: Path, from_onnx: Path | None, inputs: tuple[TensorInfo, ...],
             outputs: tuple[TensorInfo, ...]) -> GraphInfo:
    """The `.om`'s inputs and outputs: its source ONNX file's, or the flags' (output ops unknown: "")."""
    if from_onnx is not None:
        if inputs or outputs:
            raise SegScopeError("--from and --input/--output: give one (the ONNX file already has the shapes)")
        return read_graph(from_onnx)
    if not inputs or not outputs:
        raise SegScopeError(f"{om}: SegScope cannot read an .om: give the ONNX file it was converted from (--from "
                            "MODEL.onnx), or its shapes (--input NAME:1x3xHxW and one --output per output, in order)")
    return GraphInfo(om, inputs, outputs, ("",) * len(outputs))
