"""`segscope card MODEL.onnx --out DIR`: a runnable project from a bare ONNX file.

The graph tells the input name, layout, channels and (when static) size, the outputs and what computes
them; the flags tell the rest (size when dynamic, color, normalisation or an AIPP config, activation,
threshold, class names). It writes `DIR/models/<stem>.{onnx,json}`, the AIPP config and ATC command for
the `.om`, and `DIR/pipelines/<stem>.pipeline` (the shipped stream shape at the model's size). The viewer's
File > Open model... dialog uses the same `propose` and `write_project`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SegScopeError
from ..export.files import refuse_existing
from ..files.atomic_folder import StagedFolder, copy_of
from ..files.fileio import read_bytes, sha256_file
from ..stream.aipp import load_aipp
from ..stream.loader import bare_stream
from ..stream.preprocess import Preprocess, aipp_text
from .om import om_graph
from .onnx_graph import INTEGER_TYPES, GraphInfo, TensorInfo, read_graph
from .reader import load_model_card

_FINAL = {"Softmax": "none", "Sigmoid": "none", "HardSigmoid": "none", "LogSoftmax": "softmax"}


@dataclass
class CardOptions:
    """What the graph cannot tell; None = propose from the graph (and say so)."""

    size: tuple[int, int] | None = None  # (width, height)
    layout: str | None = None
    color: str | None = None
    scale: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    aipp: Path | None = None
    activation: str | None = None
    threshold: float | None = None
    threshold_on: str | None = None  # None: "raw" for activation none on a raw graph output, else probability
    classes: tuple[str, ...] | None = None
    #: An .om's shapes: the ONNX file it was converted from, or its input and outputs (`core.card.om`).
    from_onnx: Path | None = None
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()


@dataclass
class Proposal:
    model: Path
    stem: str
    card: dict[str, Any]
    found: list[str] = field(default_factory=list)  # facts read from the graph
    assumed: list[str] = field(default_factory=list)  # defaults chosen for what neither graph nor flags said
    notes: list[str] = field(default_factory=list)
    external_files: tuple[str, ...] = ()  # the ONNX model's external weight files, relative to its folder

    @property
    def om(self) -> bool:
        """Made from an `.om` (which has its AIPP compiled in only when --aipp names it)."""
        return self.model.suffix == ".om"


def _channel_axis(dims: tuple[object, ...]) -> str | None:
    """NCHW or NHWC from the one static axis among symbolic sizes, or from where a 1/3/4 channel count
    sits; None when it cannot tell."""
    first, last = isinstance(dims[1], int), isinstance(dims[3], int)
    if first == last:
        first, last = dims[1] in (1, 3, 4), dims[3] in (1, 3, 4)
    return None if first == last else ("NCHW" if first else "NHWC")


def _input_facts(graph: GraphInfo, options: CardOptions, proposal: Proposal) -> tuple[str, int, tuple[int, int]]:
    where = graph.path
    if len(graph.inputs) != 1:
        raise SegScopeError(f"{where}: the graph takes {len(graph.inputs)} inputs; SegScope feeds one image tensor")
    tensor = graph.inputs[0]
    dims = tensor.dims
    if dims is None or len(dims) != 4:
        raise SegScopeError(f"{where}: input {tensor.name!r} has shape {tensor.shape_text()}; SegScope feeds one "
                            "image as N x C x H x W or N x H x W x C")
    proposal.found.append(f"input {tensor.name!r} {tensor.shape_text()} {tensor.type_name}")
    layout = options.layout or _channel_axis(dims)
    if layout is None:
        layout = "NCHW"
        proposal.assumed.append("input layout NCHW (the shape does not tell; give --layout NHWC otherwise)")
    channel, height, width = (dims[1], dims[2], dims[3]) if layout == "NCHW" else (dims[3], dims[1], dims[2])
    if isinstance(channel, int):
        channels = channel
    else:
        channels = 1 if options.color == "GRAY" else 3
        proposal.assumed.append(f"{channels} input channels (the graph's channel axis is dynamic)")
    if channels not in (1, 3, 4):
        raise SegScopeError(f"{where}: input {tensor.name!r} {tensor.shape_text()} has {channels} channels in "
                            f"{layout}; SegScope feeds 1, 3 or 4 (give --layout if the axes are the other way)")
    static = (width, height) if isinstance(width, int) and isinstance(height, int) else None
    if options.size is None and static is None:
        raise SegScopeError(f"{where}: input {tensor.name!r} {tensor.shape_text()} has a dynamic size: give the input "
                            "size (--size WxH: the size the stream resizes to)")
    if options.size is not None and static is not None and options.size != static:
        raise SegScopeError(f"{where}: --size {options.size[0]}x{options.size[1]} but the graph's input "
                            f"{tensor.name!r} is {static[0]}x{static[1]}")
    return layout, channels, options.size or static  # type: ignore[return-value]


def _output_entry(index: int, tensor: TensorInfo, op: str, size: tuple[int, int], options: CardOptions,
                  proposal: Proposal) -> tuple[dict[str, Any], int | None]:
    """One card output and its channel count (None for argmax or when dynamic)."""
    proposal.found.append(f"output {index} {tensor.name!r} {tensor.shape_text()} {tensor.type_name}, from {op}")
    if tensor.elem_type in INTEGER_TYPES:
        return {"name": tensor.name, "kind": "argmax"}, None
    dims = tensor.dims or ()
    width, height = size
    channels: int | None
    if len(dims) == 3:
        layout, channels = "NCHW", 1
    elif len(dims) == 4:
        if tuple(dims[2:]) == (height, width):
            layout = "NCHW"
        elif tuple(dims[1:3]) == (height, width):
            layout = "NHWC"
        else:
            layout = _channel_axis(tuple(dims)) or "NCHW"
        channel = dims[1] if layout == "NCHW" else dims[3]
        channels = channel if isinstance(channel, int) else None
    else:
        raise SegScopeError(f"{proposal.model}: output {tensor.name!r} has shape {tensor.shape_text()}; SegScope reads "
                            "1 x H x W, 1 x C x H x W or 1 x H x W x C outputs")
    channels = channels or (len(options.classes) if options.classes else None)
    activation = options.activation
    if activation is None and not op:
        raise SegScopeError(f"{proposal.model}: give --activation (softmax, sigmoid or none): without the ONNX file "
                            f"SegScope cannot see whether output {tensor.name!r} already comes from a Softmax/Sigmoid")
    if activation is None:
        activation = _FINAL.get(op) or ("sigmoid" if channels == 1 else "softmax")
        if op in _FINAL:
            proposal.found.append(f"output {tensor.name!r} comes from {op}: activation {activation!r}")
        else:
            proposal.assumed.append(f"output {tensor.name!r} holds raw scores (from {op}): activation "
                                    f"{activation!r} (give --activation otherwise)")
    entry: dict[str, Any] = {"name": tensor.name, "layout": layout, "activation": activation}
    if options.threshold is not None:
        entry["threshold"] = options.threshold
        threshold_on = options.threshold_on
        if threshold_on is None and activation == "none" and op not in _FINAL:
            threshold_on = "raw"
            proposal.assumed.append(f"output {tensor.name!r} holds raw scores (from {op}) and activation 'none': "
                                    f"foreground where the raw output > {options.threshold:g}, as it is "
                                    "(threshold_on raw; give --threshold-on probability otherwise)")
        if threshold_on == "raw":
            entry["threshold_on"] = "raw"
    elif options.threshold_on is not None:
        raise SegScopeError(f"--threshold-on {options.threshold_on}: give the --threshold it qualifies")
    return entry, channels


def propose(model: Path, options: CardOptions) -> Proposal:
    """The card for `model` (an .onnx, or an .om with `options.from_onnx` or its shapes) from its graph and
    `options`, with what was found and what was assumed."""
    model = Path(model)
    om = model.suffix == ".om"
    if not om and (options.from_onnx or options.inputs or options.outputs):
        raise SegScopeError(f"{model}: --from, --input and --output describe an .om; an ONNX file describes itself")
    # read_graph checks the external weights: inside the model's folder, regular files
    graph = om_graph(model, options.from_onnx, options.inputs, options.outputs) if om else read_graph(model)
    onnx = options.from_onnx if om else model
    proposal = Proposal(model, model.stem, {}, external_files=graph.external_files)
    if om:
        proposal.found.append(f"the .om's inputs and outputs from {options.from_onnx or '--input/--output'}")
    if graph.external_files:
        proposal.found.append(f"external weights {', '.join(graph.external_files)} (copied with the model)")
    layout, channels, size = _input_facts(graph, options, proposal)
    if options.aipp is not None and any(v is not None for v in (options.scale, options.mean, options.std)):
        raise SegScopeError(f"{options.aipp}: give either --aipp or --scale/--mean/--std (AIPP does the "
                            "normalisation)")
    color = options.color or ("GRAY" if channels == 1 else None)
    if options.aipp is not None and channels != 1:
        given = "RGB" if load_aipp(options.aipp).rbuv_swap_switch else "BGR"  # from the BGR decoder
        if color not in (None, given):
            raise SegScopeError(f"{options.aipp}: --color {color} but this AIPP config hands the network {given} "
                                "(rbuv_swap_switch): fix one of them")
        if color is None:
            proposal.found.append(f"color {given} (what the AIPP config hands the network from the BGR decoder)")
        color = given
    if color is None:
        color = "RGB"
        proposal.assumed.append("color RGB (most exports are trained on RGB; give --color BGR for OpenCV-read "
                                "training images)")
    for flag, values in (("--mean", options.mean), ("--std", options.std)):
        if values is not None and len(values) not in (1, channels):
            raise SegScopeError(f"{flag}: {len(values)} numbers for a {channels}-channel input; give 1 (for every "
                                f"channel) or {channels}")
    card_input: dict[str, Any] = {"name": graph.inputs[0].name, "layout": layout, "width": size[0],
                                  "height": size[1], "channels": channels, "color": color}
    if options.aipp is None:
        for key in ("scale", "mean", "std"):
            value = getattr(options, key)
            if value is not None:
                card_input[key] = value if key == "scale" else list(value)
        if all(getattr(options, k) is None for k in ("scale", "mean", "std")):
            proposal.assumed.append("no normalisation: the network gets 0..255 (give --scale 1/255 or --mean/--std)")
    outputs, channel_counts = [], []
    for index, (tensor, op) in enumerate(zip(graph.outputs, graph.source_ops)):
        entry, count = _output_entry(index, tensor, op, size, options, proposal)
        outputs.append(entry)
        if count is not None:
            channel_counts.append(count)
    if all(o.get("kind") == "argmax" for o in outputs):
        raise SegScopeError(f"{model}: the graph has no float output to read probabilities from")
    classes = list(options.classes or ())
    if not classes:
        count = channel_counts[0] if channel_counts else 2
        classes = ["background", "foreground"] if count == 1 else ["background"] + [f"class{i}" for i in
                                                                                     range(1, count)]
        proposal.assumed.append(f"classes {', '.join(classes)} (give --classes to name them)")
    proposal.card = {"name": proposal.stem, **({"onnx": f"{proposal.stem}.onnx"} if onnx else {}),
                     "om": f"{proposal.stem}.om",
                     # A 3-channel card names the AIPP config it bakes into the .om (the same math as its
                     # scale/mean/std, checked on load), so MindX and the embedded backend agree by construction;
                     # an existing .om has one compiled in only when --aipp names it.
                     **({"aipp": f"aipp_{proposal.stem}.cfg"} if options.aipp or channels == 3 and not om else {}),
                     "input": card_input, "outputs": outputs, "classes": classes}
    if om:  # the files the card was written for, checked before they run
        proposal.card["sha256"] = {"om": sha256_file(model), **({"onnx": sha256_file(onnx)} if onnx else {})}
        if options.aipp is None:
            proposal.notes.append("no --aipp: the .om takes the normalised tensor, which SegScope makes on the CPU; "
                                  "no pipeline is written (the stream would hand it raw pixels): run it with --model "
                                  "and --backend mindx-model or ais-bench")
    if channels == 4:
        proposal.notes.append("4-channel input: MindX's opencv decoder gives 3 channels, so this model runs on the "
                              "embedded backend (an .om would need a custom decoder)")
    return proposal


def _pipeline_text(stem: str, size: tuple[int, int]) -> str:
    return json.dumps(bare_stream(f"models/{stem}.om", size), indent=4) + "\n"


def _atc_script(stem: str, card: dict[str, Any], aipp: bool) -> str:
    inp = card["input"]
    shape = (f"1,{inp['channels']},{inp['height']},{inp['width']}" if inp["layout"] == "NCHW"
             else f"1,{inp['height']},{inp['width']},{inp['channels']}")
    lines = ["#!/usr/bin/env bash",
             f"# Convert {stem}.onnx to an Ascend 310 offline model{' with its AIPP baked in' if aipp else ''}.",
             "# Run on the Ascend host after sourcing the CANN toolkit:",
             f"#   source /usr/local/Ascend/ascend-toolkit/set_env.sh && bash models/atc_{stem}.sh",
             f"# Expect \"ATC run success\"; the output is models/{stem}.om, which pipelines/{stem}.pipeline names.",
             "set -euo pipefail", 'cd "$(dirname "$0")"', "atc --framework=5 \\", f"    --model={stem}.onnx \\",
             f"    --output={stem} \\", f"    --input_format={inp['layout']} \\",
             f"    --input_shape=\"{inp['name']}:{shape}\" \\", "    --soc_version=Ascend310 \\", "    --log=error" +
             (f" \\\n    --insert_op_conf=aipp_{stem}.cfg" if aipp else "")]
    return "\n".join(lines) + "\n"


def write_project(model: Path, out: Path, proposal: Proposal, options: CardOptions,
                  overwrite: bool = False) -> Path:
    """Write the project under `out` and return the pipeline's path (the card's for an .om without an AIPP
    config compiled in, which the stream cannot feed).

    `out` is replaced as a unit (`core.files.atomic_folder`): locked while it is written (a second `card`
    into it is refused), its new version is made beside it and the card is loaded there against the copied
    graph first, so a card that would not run is refused before anything changes; existing files are
    replaced only with `overwrite`.
    """
    stem, card = proposal.stem, proposal.card
    inp = card["input"]
    result = f"models/{stem}.json" if proposal.om and options.aipp is None else f"pipelines/{stem}.pipeline"
    files = {f"models/{stem}.json": (json.dumps(card, indent=2) + "\n").encode()}
    if result.endswith(".pipeline"):
        files[result] = _pipeline_text(stem, (inp["width"], inp["height"])).encode()
    aipp = None
    if options.aipp is not None:
        load_aipp(options.aipp)  # a bad config is named now
        aipp = read_bytes(options.aipp)
    elif inp["channels"] != 4 and not proposal.om:
        aipp = aipp_text(Preprocess(channels=inp["channels"], color=inp["color"], scale=inp.get("scale", 1.0),
                                    mean=tuple(inp.get("mean", (0.0,))), std=tuple(inp.get("std", (1.0,))))).encode()
    if aipp is not None:
        files[f"models/aipp_{stem}.cfg"] = aipp
    if not proposal.om:  # the conversion still to run on the Ascend host
        files[f"models/atc_{stem}.sh"] = _atc_script(stem, card, aipp is not None).encode()
    onnx = options.from_onnx if proposal.om else model
    copies = {**({f"models/{stem}.onnx": onnx} if onnx else {}),
              **({f"models/{stem}.om": model} if proposal.om else {}),
              **{f"models/{name}": Path(onnx).parent / name for name in proposal.external_files if onnx}}
    names = [*copies, *files]
    names.append(names.pop(names.index(f"models/{stem}.json")))  # the card last: it makes the project usable
    with StagedFolder(out, "segscope card") as staged:
        refuse_existing([out / n for n in names if staged.exists(n)], overwrite)
        for name, source in copies.items():  # the model files, external weights included
            staged.create(name, copy_of(source), overwrite)
        for name, data in files.items():
            staged.create(name, data, overwrite)
        try:
            load_model_card(staged.path / f"models/{stem}.json", warn=False)  # the proposal says what it assumed
        except SegScopeError as exc:  # name the files where they will be
            raise SegScopeError(str(exc).replace(str(staged.path), str(out))) from None
    return out / result
