"""Model cards: the JSON beside a model that tells every backend how to feed it and read its outputs.

A pipeline names an Ascend `.om` (`modelPath`); its card is the `.json` with the same stem beside it and
names the ONNX export the embedded backend runs instead, the preprocessing (an AIPP config, or color,
channels, scale, mean, std and layout), the outputs with their activation, and the class names. So one
`.pipeline` runs on every backend. The schema is documented in docs/model-cards.md; cards written before
v2 (output `kind` softmax/logits/sigmoid/argmax) read unchanged. When the ONNX file is there, a card is
checked against its graph on load (`core.card.check`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset.masks import TRUTH_VALUES_KEY
from ..errors import SegScopeError
from ..files.fileio import read_json
from ..result import decide
from ..stream.aipp import load_aipp
from ..stream.preprocess import CHANNELS, COLORS, LAYOUTS, Preprocess, aipp_mismatch
from .card import ModelCard, OutputSpec
from .check import check_against_graph, warn_once

#: What SegScope applies to a score output's raw values.
ACTIVATIONS = {
    "softmax": "softmax across channels (the output holds raw class scores)",
    "sigmoid": "sigmoid per channel (raw logits; one channel = foreground, else one map per class)",
    "none": "none (the output already holds probabilities in [0, 1])",
}

#: What a 1-channel output's `threshold` compares: the probability (after the activation), or the raw output as
#: the model gives it (an app that thresholds the model's output as it is).
THRESHOLD_ON = ("probability", "raw")
#: Output kinds: "scores" (v2, with an activation), "argmax", and the v1 kinds with their activation.
OUTPUT_KINDS = {"scores": None, "argmax": None, "softmax": "none", "logits": "softmax", "sigmoid": "none"}

#: A card is a few hundred bytes; anything near this is not one.
MAX_CARD_BYTES = 1 << 20
#: The largest model input side SegScope runs (MindX's opencv crop and resize stop at 8192 px per side).
MAX_INPUT_SIDE = 8192

_INPUT_KEYS = {"name", "layout", "width", "height", "channels", "color", "scale", "mean", "std"}
_OUTPUT_KEYS = {"name", "kind", "layout", "activation", "threshold", "threshold_on"}
#: The card's model files whose SHA-256 it may record (`sha256`), checked before the model runs.
_HASHED = ("onnx", "om")


def card_path_for(model_path: Path) -> Path:
    """The card of `models/x.om` (or `.onnx`) is `models/x.json`."""
    return model_path if model_path.suffix == ".json" else model_path.with_suffix(".json")


def _read_json(path: Path, given: Path) -> dict[str, Any]:
    """The card `path` read for `given` (the card itself, or the model file named)."""
    if not path.exists() and not path.is_symlink():
        if given != path and not given.exists():
            raise SegScopeError(f"{given}: file not found (nor its model card {path.name}); give an existing "
                                ".onnx, .om or model card (.json)")
        model = given.name if given != path else path.with_suffix(".om").name
        raise SegScopeError(
            f"{path}: model card not found (needed for {model}: it names the ONNX export, preprocessing and "
            "outputs; write one with `segscope card MODEL.onnx`)")
    raw = read_json(path, "model card", MAX_CARD_BYTES)
    if not isinstance(raw, dict):
        raise SegScopeError(f"{path}: a model card must be a JSON object, got a {type(raw).__name__}")
    return raw


class _Fields:
    """Typed access to one JSON object of a card; every error names the card and the field."""

    def __init__(self, path: Path, raw: dict[str, Any], where: str, allowed: set[str] | None = None):
        self.path, self.raw, self.where = path, raw, where
        unknown = sorted(set(raw) - allowed) if allowed is not None else []
        if unknown:
            raise self.error(unknown[0], f"is not a card field here (known: {', '.join(sorted(allowed or ()))})")

    def error(self, key: str, problem: str) -> SegScopeError:
        return SegScopeError(f"{self.path}: {self.where}{key}: {problem}")

    def text(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str | None:
        value = self.raw.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(key, f"must be a non-empty string, got {value!r}")
        if choices and value.upper() not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return value.upper() if choices else value

    def number(self, key: str, default: float | None = None, positive: bool = False) -> float | None:
        value = self.raw.get(key, default)
        return None if value is None else self.numbers(key, value, 1, positive)[0]

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        return value

    def numbers(self, key: str, default: object, count: int, positive: bool = False) -> tuple[float, ...]:
        value = self.raw.get(key, default)
        values = value if isinstance(value, list) else [value]
        if len(values) not in (1, count):
            raise self.error(key, f"needs 1 or {count} numbers (one per channel), got {len(values)}")
        numbers = []
        for item in values:
            number = float(item) if isinstance(item, (int, float)) and not isinstance(item, bool) else math.nan
            if not math.isfinite(number):
                kind = "a number" if count == 1 else "a number or one per channel"
                raise self.error(key, f"must be {kind}, got {value!r}")
            if positive and number <= 0:
                raise self.error(key, f"must be > 0, got {value!r}")
            numbers.append(number)
        return tuple(numbers)


def _parse_input(path: Path, raw: object) -> tuple[str, tuple[int, int], Preprocess, bool]:
    if not isinstance(raw, dict):
        raise SegScopeError(f"{path}: input: must be a JSON object with name, width and height, got {raw!r}")
    f = _Fields(path, raw, "input.", _INPUT_KEYS)
    size = (f.integer("width"), f.integer("height"))
    for key, side in zip(("width", "height"), size):
        if not 1 <= side <= MAX_INPUT_SIDE:
            raise f.error(key, f"{side} is outside 1..{MAX_INPUT_SIDE} (the input sizes SegScope runs)")
    channels = f.integer("channels", 3)
    if channels not in CHANNELS:
        raise f.error("channels", f"must be 1, 3 or 4, got {channels}")
    color = f.text("color", "GRAY" if channels == 1 else None, COLORS)
    if (color == "GRAY") != (channels == 1):
        raise f.error("color", f"{color} does not fit channels {channels} (GRAY is for 1-channel models, "
                               "BGR/RGB for 3 or 4 channels)")
    normalising = sorted({"scale", "mean", "std"} & set(raw))
    preprocess = Preprocess(
        channels=channels, color=color, layout=f.text("layout", "NCHW", LAYOUTS) or "NCHW",
        scale=f.number("scale", 1.0, positive=True) or 1.0,
        mean=f.numbers("mean", 0.0, channels), std=f.numbers("std", 1.0, channels, positive=True))
    return f.text("name", "input") or "input", size, preprocess, bool(normalising)


def _parse_output(path: Path, index: int, raw: object) -> OutputSpec:
    if not isinstance(raw, dict):
        raise SegScopeError(f"{path}: outputs[{index}]: must be a JSON object, got {raw!r}")
    f = _Fields(path, raw, f"outputs[{index}].", _OUTPUT_KEYS)
    kind = raw.get("kind", "scores" if "activation" in raw else None)
    if kind not in OUTPUT_KINDS:
        raise f.error("kind", f"must be one of {', '.join(OUTPUT_KINDS)} (or give an 'activation'), got {kind!r}")
    implied = OUTPUT_KINDS[kind]
    if implied is not None and "activation" in raw:
        raise f.error("activation", f"kind {kind!r} already implies activation {implied!r}: give kind "
                                    "'scores' with an activation, or the kind alone")
    activation = implied or ("none" if kind == "argmax" else f.text("activation", "none"))
    if activation not in ACTIVATIONS:
        raise f.error("activation", f"must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    threshold = f.number("threshold")
    threshold_on = f.text("threshold_on", "probability")
    if threshold_on not in THRESHOLD_ON:
        raise f.error("threshold_on", f"must be one of {', '.join(THRESHOLD_ON)}, got {threshold_on!r}")
    if threshold_on == "raw" and (threshold is None or kind == "argmax" or activation == "softmax"):
        raise f.error("threshold_on", "'raw' needs a threshold on a 1-channel sigmoid or none output (foreground "
                                      "where the model's raw output > threshold)")
    if threshold is not None and threshold_on == "probability" and (
            kind == "argmax" or activation == "softmax" or not 0.0 < threshold < 1.0):
        raise f.error("threshold", f"{threshold:g}: a threshold is a probability in (0, 1) for a 1-channel "
                                   "sigmoid or none output (or, with \"threshold_on\": \"raw\", any value of its raw "
                                   "output)")
    name = f.text("name")
    return OutputSpec(name or f"output{index}", str(kind), f.text("layout", "NHWC", LAYOUTS) or "NHWC",
                      activation, threshold, name is not None, str(threshold_on))


def _truth_values(top: _Fields, raw: object, classes: int) -> tuple[tuple[int, int], ...]:
    """The optional `truth_values` {"<mask file value>": class index}: the values the model's ground-truth masks
    hold (`core.dataset.masks.MaskRule`)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw or not all(
            re.fullmatch("[0-9]{1,3}", key) and int(key) <= 255 and type(index) is int and 0 <= index < classes
            for key, index in raw.items()):
        raise top.error(TRUTH_VALUES_KEY, f"must map mask file values \"0\"..\"255\" to class indices 0..{classes - 1} "
                                          f"(e.g. {{\"0\": 0, \"128\": 1}}), got {raw!r}")
    return tuple(sorted((int(key), index) for key, index in raw.items()))


def load_model_card(path: Path, check_graph: bool = True, warn: bool = True) -> ModelCard:
    """Load a card; `path` may be the card or the model it describes. Errors name the card and field.

    With `check_graph`, a card whose ONNX file exists is checked against the graph (`core.card.check`);
    `warn` prints the heuristic warnings (once each) on stderr.
    """
    given = Path(path)
    path = card_path_for(given)
    raw = _read_json(path, given)
    top = _Fields(path, raw, "")

    def sibling(key: str) -> Path | None:
        value = top.text(key) if raw.get(key) != "" else None  # "" = none, as in v1 cards
        return path.parent / value if value else None

    aipp_path = sibling("aipp")
    if "input" not in raw:
        raise top.error("input", "missing: the model input's name, width and height")
    input_name, size, preprocess, normalising = _parse_input(path, raw["input"])
    outputs_raw = raw.get("outputs")
    if not isinstance(outputs_raw, list) or not outputs_raw:
        raise top.error("outputs", f"must be a non-empty list of outputs, got {outputs_raw!r}")
    classes = raw.get("classes")
    if not isinstance(classes, list) or not classes or not all(isinstance(c, str) and c for c in classes):
        raise top.error("classes", f"must be a list of class names, got {classes!r}")
    training = raw.get("training", {})
    if not isinstance(training, dict):
        raise top.error("training", f"must be a JSON object, got {training!r}")
    digests = raw.get("sha256", {})
    if not isinstance(digests, dict) or not all(
            key in _HASHED and isinstance(value, str) and re.fullmatch("[0-9a-f]{64}", value)
            for key, value in digests.items()):
        raise top.error("sha256", f"must map {' or '.join(map(repr, _HASHED))} to that file's hex SHA-256 (as "
                                  f"`segscope card` writes it), got {digests!r}")
    class_names = ("background", *classes) if len(classes) == 1 else tuple(classes)
    card = ModelCard(
        path=path, name=top.text("name", path.stem) or path.stem, onnx=sibling("onnx"), om=sibling("om"),
        aipp=load_aipp(aipp_path) if aipp_path else None, input_name=input_name, input_size=size,
        preprocess=preprocess, outputs=tuple(_parse_output(path, i, o) for i, o in enumerate(outputs_raw)),
        class_names=class_names, training=training, sha256=dict(digests),
        truth_values=_truth_values(top, raw.get(TRUTH_VALUES_KEY), len(class_names)))
    card.probability_index()
    if card.aipp is not None and normalising:
        problem = aipp_mismatch(preprocess, card.aipp)
        if problem:
            raise top.error("input", f"scale/mean/std and the AIPP config {aipp_path.name if aipp_path else ''} "
                                     f"describe different math ({problem}): the AIPP config is what the .om has "
                                     "baked in, so make them agree or drop one")
    identity = card.aipp is None or (card.aipp.offset == (0.0,) * 3 and card.aipp.var_reci_chn == (1.0,) * 3)
    if warn and identity and not normalising:
        warn_once(f"{path}: no preprocessing (no input scale/mean/std, no normalising AIPP): the network gets raw "
                  "0..255 pixels; if that is what it expects, write \"scale\": 1 in 'input' to say so")
    if check_graph and card.onnx is not None and card.onnx.exists():
        card.check_recorded("onnx", card.onnx)
        card = check_against_graph(card, warn)
    return card


def _to_nhwc(tensor: np.ndarray, card: ModelCard, index: int) -> np.ndarray:
    """Drop the batch axis and return H x W x C."""
    layout = card.outputs[index].layout
    if tensor.ndim == 3:  # N x H x W single channel
        tensor = tensor[..., None] if layout == "NHWC" else tensor[:, None]
    if tensor.ndim != 4 or tensor.shape[0] != 1:
        raise card.output_error(index, f"has shape {tensor.shape}; expected 1 x H x W, 1 x H x W x C or "
                                       "1 x C x H x W")
    image = tensor[0]
    return image if layout == "NHWC" else np.moveaxis(image, 0, -1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _activate(scores: np.ndarray, spec: OutputSpec) -> np.ndarray:
    """The probabilities of an output's raw scores (float64 for a 1-channel output, which is decided on them)."""
    if spec.activation == "softmax":
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return scores / scores.sum(axis=-1, keepdims=True)
    if spec.activation == "sigmoid":
        return _sigmoid(scores)
    if spec.threshold_on == "raw":  # no probability of its own: σ of the score's distance to the threshold
        return _sigmoid(scores - float(spec.threshold))  # type: ignore[arg-type]
    return scores


def postprocess(outputs: list[np.ndarray], card: ModelCard) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Model outputs -> (H x W x C float32 probabilities, H x W uint8 classes, the threshold that decides
    them), per the card's outputs.

    A 1-channel output p becomes the classes [1 - p, p], decided by p > the output's decision threshold
    (`core.result.decide`, computed on float64 p so a raw threshold holds exactly); other outputs by the
    argmax (threshold None). Outputs that are not finite, or not in [0, 1] where the card says they hold
    probabilities, are an error naming the card.
    """
    index = card.probability_index()
    spec = card.outputs[index]
    scores = _to_nhwc(np.asarray(outputs[index]), card, index).astype(np.float32, copy=False)
    low, high = float(scores.min()), float(scores.max())  # NaN and inf show here: no pass of its own
    if not (math.isfinite(low) and math.isfinite(high)):
        raise card.output_error(index, f"holds {int((~np.isfinite(scores)).sum())} NaN or infinite values: "
                                       "the model (or its conversion) is broken for this input")
    channels = scores.shape[-1]
    if channels > 1 and channels != len(card.class_names) or channels == 1 and len(card.class_names) != 2:
        raise card.output_error(index, f"has {channels} channel(s) but the card's classes list "
                                       f"{len(card.class_names)}: fix 'classes' or the output's layout")
    if channels == 1 and spec.activation == "softmax":  # the graph check says so at load when there is a graph
        raise card.output_error(index, "softmax over a single channel is always 1: raw logits need activation "
                                       "'sigmoid', probabilities 'none'")
    probabilities = _activate(scores.astype(np.float64) if channels == 1 else scores, spec)
    if spec.activation == "none" and spec.threshold_on == "probability" and (low < 0.0 or high > 1.0):
        if low < -1e-3 or high > 1 + 1e-3:
            raise card.output_error(index, f"values span {low:.4g}..{high:.4g}, not probabilities in [0, 1] as "
                                           "activation 'none' says: raw scores need activation 'sigmoid' "
                                           "(one map per channel) or 'softmax' (across channels); a 1-channel "
                                           "output thresholded as it is needs \"threshold_on\": \"raw\"")
        probabilities = np.clip(probabilities, 0.0, 1.0)  # fp16 rounding
    given = card.output_index("argmax")
    threshold = spec.decision_threshold() if channels == 1 else None
    if channels == 1:
        foreground = probabilities[..., 0]
        probabilities = np.stack([1.0 - foreground, foreground], axis=-1)
    argmax = decide(probabilities, threshold)
    if given is not None:
        labels = np.asarray(outputs[given])
        if labels.size != probabilities.shape[0] * probabilities.shape[1]:
            raise card.output_error(given, f"has shape {labels.shape}, not the {probabilities.shape[:2]} of the "
                                           "scores")
        if labels.size and (labels.min() < 0 or labels.max() >= probabilities.shape[-1]):
            raise card.output_error(given, f"holds class {labels.max()} but the model has "
                                           f"{probabilities.shape[-1]} classes")
        argmax = labels.reshape(probabilities.shape[:2]).astype(np.uint8)
    probabilities = np.ascontiguousarray(probabilities, dtype=np.float32)
    return probabilities, argmax, threshold
