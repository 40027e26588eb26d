"""Helpers test modules import by name (`from helpers import run_cli`): pyproject puts tests/support/ on sys.path
(`pythonpath`; not tests/, whose mindx/ folder would pass for the MindX SDK), since tests are imported with
`--import-mode=importlib`, not as a package."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import numpy as np

from segscope.core import cli

T = TypeVar("T")


def run_cli(*argv: object) -> tuple[int, str]:
    """`segscope ARGV...`'s exit code (argparse's usage refusals included) and its standard output."""
    out = io.StringIO()
    try:
        code = cli.main([str(a) for a in argv], out)
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    return code, out.getvalue()


def without_cache_note(err: str) -> str:
    """Standard error without the line every eval ends with: how many inputs came from the decoded-input cache."""
    return "".join(line for line in err.splitlines(keepends=True)
                   if not (line.startswith("segscope: note: ") and "came from the decoded-input cache" in line))


#: The tiny network: a 1x1 convolution over the network's channels (R, G, B after the AIPP swap), so the
#: defect class wins on dark pixels and the weights differ per channel (a wrong channel order shows).
TINY_WEIGHT = np.array([[0.0, 0.0, 0.0], [-2.0, -1.0, -0.5]], np.float32)
TINY_BIAS = np.array([0.0, -0.3], np.float32)


def make_tiny_onnx(path: Path, size: int = 960) -> None:
    """input [1,3,S,S] -> Conv 1x1 (2 ch) -> Transpose NHWC -> Softmax "softmax"; ArgMax -> int32 "argmax"."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Conv", ["input", "W", "B"], ["logits_nchw"], kernel_shape=[1, 1]),
        helper.make_node("Transpose", ["logits_nchw"], ["logits"], perm=[0, 2, 3, 1]),
        helper.make_node("Softmax", ["logits"], ["softmax"], axis=-1),
        helper.make_node("ArgMax", ["softmax"], ["argmax64"], axis=-1, keepdims=0),
        helper.make_node("Cast", ["argmax64"], ["argmax"], to=TensorProto.INT32),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_unet_stand_in",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("softmax", TensorProto.FLOAT, [1, size, size, 2]),
         helper.make_tensor_value_info("argmax", TensorProto.INT32, [1, size, size])],
        initializer=[numpy_helper.from_array(TINY_WEIGHT.reshape(2, 3, 1, 1), "W"),
                     numpy_helper.from_array(TINY_BIAS, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9  # readable by every ONNX Runtime the project supports
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def tiny_card(size: int = 960) -> dict:
    return {
        "name": "tiny test model",
        "onnx": "tiny.onnx",
        "om": "unet_hw960_bs1.om",
        "aipp": "aipp_unet_simple_opencv.cfg",
        "input": {"name": "input", "layout": "NCHW", "width": size, "height": size},
        "outputs": [{"name": "softmax", "kind": "softmax", "layout": "NHWC"},
                    {"name": "argmax", "kind": "argmax"}],
        "classes": ["background", "defect"],
    }


def without_medians(summary: dict[str, object]) -> dict[str, object]:
    """`catalogue.means` less what a running summary (`core.metrics.running`) leaves out: medians and the
    worst-case aggregate."""
    aggregates = {name: {key: (None if key == "median" else value) for key, value in entry.items()
                         if key != "worst_case"}
                  for name, entry in summary["aggregates"].items()}  # type: ignore[union-attr]
    return {**summary, "aggregates": aggregates}


def same_numbers(a: object, b: object) -> bool:
    """Equal bit for bit (no tolerance), NaN equal to NaN, through nested dicts."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_numbers(a[k], b[k]) for k in a)
    return a == b


def found_and_problems(entries: Iterable[T | str]) -> tuple[list[T], list[str]]:
    """What a store's reader yields (`SessionStore.results`, `.slides`), split into the entries and the lines
    about those that could not be read."""
    found: list[T] = []
    problems: list[str] = []
    for entry in entries:
        (problems if isinstance(entry, str) else found).append(entry)  # type: ignore[arg-type]
    return found, problems
