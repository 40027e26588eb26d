"""Model cards: the JSON beside a model that tells every backend how to feed it and read its outputs.

A pipeline names an Ascend `.om` (`modelPath`); its card is the `.json` with the same stem beside it and
names the ONNX export the embedded backend runs instead, the AIPP config baked into the `.om`, the input
size and layout, the role of each output and the class names. So one `.pipeline` runs on both backends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from .aipp import AippConfig, load_aipp
from .errors import SegScopeError

#: Output kinds a card may declare, and what they hold.
OUTPUT_KINDS = {
    "softmax": "class probabilities (layout NHWC or NCHW)",
    "logits": "raw class scores, softmax applied here (layout NHWC or NCHW)",
    "sigmoid": "one-channel foreground probability; background = 1 - p",
    "argmax": "class index per pixel (N x H x W, any integer type)",
}

_T = TypeVar("_T")


@dataclass(frozen=True)
class OutputSpec:
    name: str
    kind: str
    layout: str = "NHWC"


@dataclass(frozen=True)
class ModelCard:
    path: Path
    name: str
    onnx: Path | None
    om: Path | None
    aipp: AippConfig | None
    input_name: str
    input_layout: str
    input_size: tuple[int, int]  # (width, height)
    outputs: tuple[OutputSpec, ...]
    class_names: tuple[str, ...]
    training: dict[str, object]

    def output_index(self, kind: str) -> int | None:
        """Position of the first output of `kind` in the model's output list."""
        return next((i for i, o in enumerate(self.outputs) if o.kind == kind), None)

    def probability_index(self) -> int:
        index = next((i for i, o in enumerate(self.outputs) if o.kind != "argmax"), None)
        if index is None:
            raise SegScopeError(f"{self.path}: outputs: needs a softmax, logits or sigmoid output")
        return index


def card_path_for(model_path: Path) -> Path:
    """The card of `models/x.om` (or `.onnx`) is `models/x.json`."""
    return model_path if model_path.suffix == ".json" else model_path.with_suffix(".json")


def load_model_card(path: Path) -> ModelCard:
    """Load a card; `path` may be the card or the model it describes. Errors name the card and field."""
    path = card_path_for(Path(path))
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SegScopeError(
            f"{path}: model card not found (needed for {path.with_suffix('.om').name}: it names the ONNX "
            f"export, AIPP config and outputs; see models/unet_hw960_bs1.json)"
        ) from None
    except json.JSONDecodeError as exc:
        raise SegScopeError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise SegScopeError(f"{path}: a model card must be a JSON object")

    def field(key: str, kind: type[_T], default: object = None) -> _T:
        value = raw.get(key, default)
        if value is None or not isinstance(value, kind):
            raise SegScopeError(f"{path}: field {key!r} must be a {kind.__name__}, got {value!r}")
        return value

    def sibling(key: str) -> Path | None:
        value = raw.get(key)
        return (path.parent / value) if isinstance(value, str) and value else None

    inp = field("input", dict)
    try:
        size = (int(inp["width"]), int(inp["height"]))
    except (KeyError, TypeError, ValueError):
        raise SegScopeError(f"{path}: field 'input' needs integer 'width' and 'height'") from None
    outputs = []
    for i, out in enumerate(field("outputs", list)):
        kind = out.get("kind") if isinstance(out, dict) else None
        if kind not in OUTPUT_KINDS:
            raise SegScopeError(f"{path}: outputs[{i}].kind must be one of {sorted(OUTPUT_KINDS)}, got {kind!r}")
        layout = out.get("layout", "NHWC")
        if layout not in ("NHWC", "NCHW"):
            raise SegScopeError(f"{path}: outputs[{i}].layout must be NHWC or NCHW, got {layout!r}")
        outputs.append(OutputSpec(str(out.get("name", f"output{i}")), kind, layout))
    aipp_path = sibling("aipp")
    card = ModelCard(
        path=path,
        name=str(raw.get("name", path.stem)),
        onnx=sibling("onnx"),
        om=sibling("om"),
        aipp=load_aipp(aipp_path) if aipp_path else None,
        input_name=str(inp.get("name", "input")),
        input_layout=str(inp.get("layout", "NCHW")),
        input_size=size,
        outputs=tuple(outputs),
        class_names=tuple(str(c) for c in field("classes", list)),
        training=dict(raw.get("training", {})),
    )
    card.probability_index()
    return card


def _to_nhwc(tensor: np.ndarray, layout: str) -> np.ndarray:
    """Drop the batch axis and return H x W x C."""
    if tensor.ndim == 3:  # N x H x W single channel
        tensor = tensor[..., None] if layout == "NHWC" else tensor[:, None]
    if tensor.ndim != 4:
        raise SegScopeError(f"model output has shape {tensor.shape}; expected N x H x W x C or N x C x H x W")
    image = tensor[0]
    return image if layout == "NHWC" else np.moveaxis(image, 0, -1)


def postprocess(outputs: list[np.ndarray], card: ModelCard) -> tuple[np.ndarray, np.ndarray]:
    """Model outputs -> (H x W x C float32 probabilities, H x W uint8 argmax), per the card's roles."""
    spec = card.outputs[card.probability_index()]
    scores = _to_nhwc(np.asarray(outputs[card.probability_index()]), spec.layout).astype(np.float32, copy=False)
    if spec.kind == "logits":
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
    elif spec.kind == "sigmoid":
        scores = np.concatenate([1.0 - scores, scores], axis=-1)
    probabilities = np.ascontiguousarray(scores)
    index = card.output_index("argmax")
    if index is not None:
        argmax = np.asarray(outputs[index]).reshape(probabilities.shape[:2]).astype(np.uint8)
    else:
        argmax = probabilities.argmax(axis=-1).astype(np.uint8)
    return probabilities, argmax
