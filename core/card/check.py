"""A model card checked against its ONNX graph on load, so a wrong card never fails mid-run.

Input name, rank, channels and size, output count, names, shapes (layout, channels, size) and types are
compared; each mismatch is one line naming the card, the field and both values. Activations that repeat
the graph's own final Softmax/Sigmoid are refused; an output claimed as probabilities that comes from
another op gets a warning (the run-time range check in `postprocess` then catches raw scores).
"""

from __future__ import annotations

import dataclasses
import logging

from ..errors import SegScopeError
from .card import ModelCard, OutputSpec
from .onnx_graph import INTEGER_TYPES, Dim, GraphInfo, TensorInfo, read_graph

LOG = logging.getLogger("segscope.model_card")
_warned: set[str] = set()


def warn_once(message: str) -> None:
    """A one-line warning on stderr (through logging), at most once per process."""
    if message not in _warned:
        _warned.add(message)
        LOG.warning("%s", message)

#: Ops whose output already is a probability, per activation that would repeat them.
_FINAL_ACTIVATIONS = {"Softmax": "softmax", "Sigmoid": "sigmoid", "HardSigmoid": "sigmoid"}


def _axes(dims: tuple[Dim, ...], layout: str) -> tuple[Dim, Dim, Dim]:
    """(channels, height, width) of a rank-4 shape in `layout`."""
    return (dims[1], dims[2], dims[3]) if layout == "NCHW" else (dims[3], dims[1], dims[2])


def _other(layout: str) -> str:
    return "NHWC" if layout == "NCHW" else "NCHW"


def _fits(dim: Dim, value: int) -> bool:
    return not isinstance(dim, int) or dim == value


class _Checker:
    def __init__(self, card: ModelCard, warn: bool, graph: GraphInfo | None = None):
        self.card, self.warn = card, warn
        self.graph = graph or (read_graph(card.onnx) if card.onnx else None)

    def error(self, field: str, problem: str) -> SegScopeError:
        assert self.graph is not None
        return SegScopeError(f"{self.card.path}: {field}: {problem} in {self.graph.path.name}")

    def check_input(self) -> tuple[int, int]:
        """Checks the input; returns the (height, width) the outputs must have."""
        assert self.graph is not None
        card, prep = self.card, self.card.preprocess
        if len(self.graph.inputs) != 1:
            names = ", ".join(repr(i.name) for i in self.graph.inputs)
            raise self.error("input", f"SegScope feeds one image tensor but the graph takes {len(self.graph.inputs)} "
                                      f"inputs ({names})")
        tensor = self.graph.inputs[0]
        if tensor.name != card.input_name:
            raise self.error("input.name", f"{card.input_name!r} is not the graph's input {tensor.name!r}")
        if tensor.elem_type not in (0, 1):
            raise self.error("input", f"the graph's input {tensor.name!r} is {tensor.type_name}; SegScope feeds "
                                      "float32 (re-export the model with a float input)")
        dims = tensor.dims
        width, height = card.input_size
        if dims is None:
            return height, width
        if len(dims) != 4:
            raise self.error("input", f"the graph's input {tensor.name!r} has shape {tensor.shape_text()}; "
                                      "SegScope feeds one image as N x C x H x W or N x H x W x C")
        if not _fits(dims[0], 1):
            raise self.error("input", f"the graph's input {tensor.name!r} has batch {dims[0]}; SegScope feeds one "
                                      "image at a time (export with batch size 1)")
        channels, graph_h, graph_w = _axes(dims, prep.layout)
        if not _fits(channels, prep.channels):
            swapped = _axes(dims, _other(prep.layout))[0]
            hint = f"; the shape reads as {_other(prep.layout)}: set input.layout" if _fits(swapped, prep.channels) \
                else ": set input.channels"
            raise self.error("input.channels", f"{prep.channels} but the graph's input {tensor.name!r} "
                                               f"{tensor.shape_text()} ({prep.layout}) has {channels}{hint}")
        for key, dim, value in (("width", graph_w, width), ("height", graph_h, height)):
            if not _fits(dim, value):
                raise self.error(f"input.{key}", f"{value} but the graph's input {tensor.name!r} "
                                                 f"{tensor.shape_text()} ({prep.layout}) has {dim}")
        return height, width

    def check_output(self, index: int, spec: OutputSpec, tensor: TensorInfo, size: tuple[int, int]) -> None:
        where = f"outputs[{index}]"
        if spec.kind == "argmax" and tensor.elem_type not in INTEGER_TYPES | {0}:
            raise self.error(f"{where}.kind", f"argmax but the graph's output {tensor.name!r} is {tensor.type_name} "
                                              "(class indices are integers): give it an activation instead")
        if spec.kind != "argmax" and tensor.elem_type in INTEGER_TYPES:
            raise self.error(f"{where}.kind", f"the graph's output {tensor.name!r} is {tensor.type_name}: integer "
                                              "outputs are class indices, declare it as kind 'argmax'")
        dims = tensor.dims
        if dims is None:
            return
        shape = tensor.shape_text()
        if len(dims) == 3:
            dims = (dims[0], 1, dims[1], dims[2]) if spec.layout == "NCHW" else (*dims, 1)
        if len(dims) != 4 or not _fits(dims[0], 1):
            raise self.error(where, f"the graph's output {tensor.name!r} has shape {shape}; expected 1 x H x W, "
                                    "1 x H x W x C or 1 x C x H x W")
        channels, out_h, out_w = _axes(dims, spec.layout)
        if not (_fits(out_h, size[0]) and _fits(out_w, size[1])):
            other = _axes(dims, _other(spec.layout))
            hint = f" (it reads as {_other(spec.layout)}: set {where}.layout)" \
                if _fits(other[1], size[0]) and _fits(other[2], size[1]) else ""
            raise self.error(f"{where}.layout", f"{spec.layout} reads the graph's output {tensor.name!r} {shape} as "
                                                f"{out_h}x{out_w}, not the input's {size[0]}x{size[1]}{hint}")
        if spec.kind == "argmax":
            if not _fits(channels, 1):
                raise self.error(where, f"argmax output {tensor.name!r} {shape} has {channels} channels, not 1")
            return
        classes = len(self.card.class_names)
        if isinstance(channels, int):
            if channels == 1 and spec.activation == "softmax":
                raise self.error(f"{where}.activation", "softmax over the single channel of "
                                                        f"{tensor.name!r} is always 1: use 'sigmoid' for raw logits "
                                                        "or 'none' for probabilities")
            if (channels == 1 and classes != 2) or (channels > 1 and channels != classes):
                raise self.error("classes", f"{classes} names but the graph's output {tensor.name!r} {shape} "
                                            f"({spec.layout}) has {channels} channel(s)"
                                            + (" (a 1-channel output has 2 classes: background and one more)"
                                               if channels == 1 else ""))
            if channels > 1 and spec.threshold is not None:
                raise self.error(f"{where}.threshold", f"applies to 1-channel outputs; {tensor.name!r} has "
                                                       f"{channels} channels (the class is the largest map)")

    def check_final_op(self, index: int, spec: OutputSpec, op: str) -> None:
        repeated = _FINAL_ACTIVATIONS.get(op)
        if spec.activation != "none" and repeated is not None:
            raise self.error(f"outputs[{index}].activation", f"{spec.activation!r} but the graph's output "
                                                             f"{spec.name!r} already comes from a {op} node: "
                                                             "use activation 'none'")
        if self.warn and spec.activation == "none" and spec.threshold_on == "probability" and repeated is None \
                and op != "LogSoftmax":
            warn_once(f"{self.card.path}: outputs[{index}] {spec.name!r}: activation 'none' but the graph computes "
                      f"it with a {op} node, not a Softmax/Sigmoid: if it holds raw scores set the activation")

    def check_output_count(self) -> None:
        assert self.graph is not None
        graph_outputs = self.graph.outputs
        if len(graph_outputs) != len(self.card.outputs):
            names = ", ".join(repr(o.name) for o in graph_outputs)
            raise self.error("outputs", f"the card lists {len(self.card.outputs)} but the graph has "
                                        f"{len(graph_outputs)} ({names}), in this order")

    def run(self) -> ModelCard:
        assert self.graph is not None
        size = self.check_input()
        self.check_output_count()
        graph_outputs = self.graph.outputs
        graph_names = [o.name for o in graph_outputs]
        for index, (spec, tensor) in enumerate(zip(self.card.outputs, graph_outputs)):
            if spec.named and spec.name != tensor.name:
                where = f" (it is output {graph_names.index(spec.name)}: list outputs in the graph's order)" \
                    if spec.name in graph_names else ""
                raise self.error(f"outputs[{index}].name", f"{spec.name!r} but the graph's output {index} is "
                                                           f"{tensor.name!r}{where}")
            self.check_output(index, spec, tensor, size)
            if spec.kind != "argmax":
                self.check_final_op(index, spec, self.graph.final_op(index))
        return dataclasses.replace(self.card, graph=self.graph)


def check_against_graph(card: ModelCard, warn: bool = True) -> ModelCard:
    """The card with its graph attached, or a one-line SegScopeError naming the card, field and both values."""
    return _Checker(card, warn).run()


def check_model_outputs(card: ModelCard, model: GraphInfo) -> None:
    """The card's outputs against another form of its model (an `.om` as an Ascend API describes it): count,
    shapes in the declared layouts, channels against the classes, integer argmax; names and final ops are not
    compared (ATC renames outputs and keeps no graph). Each mismatch is one line naming card, field and file."""
    checker = _Checker(card, warn=False, graph=model)
    checker.check_output_count()
    width, height = card.input_size
    for index, (spec, tensor) in enumerate(zip(card.outputs, model.outputs)):
        checker.check_output(index, spec, tensor, (height, width))
