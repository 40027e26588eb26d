"""Bring-your-own-model test kit: small ONNX nets of every input/output kind, projects, a NumPy reference.

Test modules import it by name (`import byo_helpers as byo`: pyproject puts tests/support/ on sys.path).
The reference stream is written here from the issue's formulas with NumPy in float64 (OpenCV only for
decode, the stretch resize and the gray conversion, which the card defines as OpenCV's), independently of
`segscope.core`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
SHIPPED_PIPELINE = REPO / "pipelines" / "unet_simple_opencv.pipeline"
BOX = (10, 5, 80, 62)  # the ROI the card-kind tests crop from slide_png()


@dataclass
class Net:
    """A 1x1 convolution from `in_channels` to `out_channels`, optionally ending in an activation node."""

    in_channels: int = 3
    out_channels: int = 1
    size: int = 32
    in_layout: str = "NCHW"
    out_layout: str = "NCHW"
    final: str | None = None  # None, "Sigmoid" or "Softmax" (over channels)
    argmax: bool = False  # a second output: the class index, int64 N x H x W
    squeeze: bool = False  # a 1-channel output as N x H x W
    dynamic: bool = False  # symbolic height and width
    seed: int = 1
    weights: np.ndarray = field(init=False)
    bias: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.weights = rng.uniform(-3, 3, (self.out_channels, self.in_channels)).astype(np.float32)
        self.bias = rng.uniform(-1, 1, self.out_channels).astype(np.float32)

    def save(self, path: Path) -> Path:
        s: object = "side" if self.dynamic else self.size
        in_shape = [1, self.in_channels, s, s] if self.in_layout == "NCHW" else [1, s, s, self.in_channels]
        nodes, name = [], "image"
        if self.in_layout == "NHWC":
            nodes.append(helper.make_node("Transpose", [name], ["nchw"], perm=[0, 3, 1, 2]))
            name = "nchw"
        nodes.append(helper.make_node("Conv", [name, "W", "B"], ["conv"], kernel_shape=[1, 1]))
        name = "conv"
        if self.final:
            nodes.append(helper.make_node(self.final, [name], ["act"], **({"axis": 1} if self.final == "Softmax"
                                                                          else {})))
            name = "act"
        if self.argmax:
            nodes.append(helper.make_node("ArgMax", [name], ["labels"], axis=1, keepdims=0))
        if self.squeeze:
            nodes.append(helper.make_node("Squeeze", [name, "axis1"], ["scores"]))
            out_shape = [1, s, s]
        elif self.out_layout == "NHWC":
            nodes.append(helper.make_node("Transpose", [name], ["scores"], perm=[0, 2, 3, 1]))
            out_shape = [1, s, s, self.out_channels]
        else:
            nodes.append(helper.make_node("Identity", [name], ["scores"]))
            out_shape = [1, self.out_channels, s, s]
        outputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, out_shape)]
        if self.argmax:
            outputs.append(helper.make_tensor_value_info("labels", TensorProto.INT64, [1, s, s]))
        graph = helper.make_graph(
            nodes, "byo_net", [helper.make_tensor_value_info("image", TensorProto.FLOAT, in_shape)], outputs,
            initializer=[numpy_helper.from_array(self.weights.reshape(self.out_channels, self.in_channels, 1, 1), "W"),
                         numpy_helper.from_array(self.bias, "B")]
            + ([numpy_helper.from_array(np.array([1], np.int64), "axis1")] if self.squeeze else []))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return path

    def reference(self, tensor_nchw: np.ndarray) -> np.ndarray:
        """The net on a 1 x C x H x W float64 input: H x W x K raw outputs (after `final`), float64."""
        out = np.einsum("kc,chw->hwk", self.weights.astype(np.float64), tensor_nchw[0]) + self.bias
        if self.final == "Sigmoid":
            out = 1 / (1 + np.exp(-out))
        elif self.final == "Softmax":
            e = np.exp(out - out.max(axis=-1, keepdims=True))
            out = e / e.sum(axis=-1, keepdims=True)
        return out


def write_project(root: Path, net: Net, card_input: dict, card_outputs: list[dict], classes: list[str],
                  stem: str = "byo", **card_extra: object) -> Path:
    """root/{models/<stem>.onnx + .json + .om, pipelines/<stem>.pipeline}; returns the pipeline."""
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "pipelines").mkdir(exist_ok=True)
    net.save(root / "models" / f"{stem}.onnx")
    (root / "models" / f"{stem}.om").write_bytes(b"stand-in .om: the MindX double runs the card's ONNX export")
    card = {"name": stem, "onnx": f"{stem}.onnx", "om": f"{stem}.om",
            "input": {"name": "image", "width": net.size, "height": net.size, **card_input},
            "outputs": card_outputs, "classes": classes, **card_extra}
    (root / "models" / f"{stem}.json").write_text(json.dumps(card, indent=2), encoding="utf-8")
    data = json.loads(SHIPPED_PIPELINE.read_text(encoding="utf-8"))
    stream = data["unet_mindspore"]
    stream["mxpi_imageresize0"]["props"].update(resizeWidth=str(net.size), resizeHeight=str(net.size))
    stream["mxpi_tensorinfer0"]["props"]["modelPath"] = f"models/{stem}.om"
    pipeline = root / "pipelines" / f"{stem}.pipeline"
    pipeline.write_text(json.dumps(data, indent=4), encoding="utf-8")
    return pipeline


def reference_stream(png: bytes, box: tuple[int, int, int, int], net: Net, *, channels: int = 3,
                     color: str = "BGR", scale: float = 1.0, mean=0.0, std=1.0) -> np.ndarray:
    """Decode, crop, stretch-resize, convert, normalise and run `net`: H x W x K float64 raw outputs."""
    flag = cv2.IMREAD_UNCHANGED if channels == 4 else cv2.IMREAD_COLOR
    image = cv2.imdecode(np.frombuffer(png, np.uint8), flag)
    x0, y0, x1, y1 = box
    crop = image[y0:y1, x0:x1]
    resized = cv2.resize(crop, (net.size, net.size), interpolation=cv2.INTER_LINEAR)
    if channels == 1:
        pixels = cv2.cvtColor(resized, cv2.COLOR_BGR2GRAY)[..., None].astype(np.float64)
    else:
        pixels = resized.astype(np.float64)
        if color == "RGB":
            pixels[..., :3] = pixels[..., 2::-1].copy()
    x = (pixels * scale - np.asarray(mean, np.float64)) / np.asarray(std, np.float64)
    return net.reference(x.transpose(2, 0, 1)[None])


def two_class(foreground: np.ndarray, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """A 1-channel probability map as SegScope's two classes: ([1 - p, p], p > threshold)."""
    return np.stack([1 - foreground, foreground], axis=-1), (foreground > threshold).astype(np.uint8)


def assert_matches(result, probabilities: np.ndarray, argmax: np.ndarray, outputs: list[dict],
                   atol: float = 2e-5) -> None:
    """A backend's result against the reference: probabilities, and the argmax wherever it is decided."""
    assert result.probabilities.shape == probabilities.shape and result.probabilities.dtype == np.float32
    np.testing.assert_allclose(result.probabilities, probabilities, atol=atol)
    top = np.sort(probabilities, -1)
    decided = top[..., -1] - top[..., -2] > 1e-4  # no near-ties
    threshold = outputs[0].get("threshold")
    if threshold is not None:
        decided = np.abs(probabilities[..., 1] - threshold) > 1e-4
    assert decided.mean() > 0.9 and len(np.unique(argmax)) > 1
    np.testing.assert_array_equal(result.argmax[decided], argmax[decided])


def slide_png(width: int = 90, height: int = 70, channels: int = 3, seed: int = 0) -> bytes:
    """A smooth random slide with a bright disc (both classes appear), PNG-encoded (4 channels: with alpha)."""
    rng = np.random.default_rng(seed)
    image = cv2.resize(rng.integers(0, 256, (5, 6, channels), dtype=np.uint8), (width, height),
                       interpolation=cv2.INTER_CUBIC)
    cv2.circle(image, (width // 2, height // 2), min(width, height) // 4, (250, 30, 200, 90)[:channels], -1)
    ok, png = cv2.imencode(".png", image)
    assert ok
    return png.tobytes()


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


#: The card combinations every backend runs:
#: (id, Net kwargs, card input, card outputs, classes, reference preprocessing, raw -> (probabilities, argmax))
CASES = [
    ("rgb-255-sigmoid-logits", dict(in_channels=3, out_channels=1),
     {"color": "RGB", "scale": 1 / 255}, [{"name": "scores", "layout": "NCHW", "activation": "sigmoid"}],
     ["crack"], dict(color="RGB", scale=1 / 255), lambda raw: two_class(sigmoid(raw[..., 0]))),
    ("bgr-meanstd-graph-sigmoid-threshold", dict(in_channels=3, out_channels=1, final="Sigmoid"),
     {"color": "BGR", "mean": [100, 110, 120], "std": [50, 60, 70]},
     [{"name": "scores", "layout": "NCHW", "activation": "none", "threshold": 0.3}], ["background", "crack"],
     dict(mean=[100, 110, 120], std=[50, 60, 70]), lambda raw: two_class(raw[..., 0], 0.3)),
    ("gray-meanstd-softmax-logits", dict(in_channels=1, out_channels=2),
     {"channels": 1, "color": "GRAY", "scale": 1 / 255, "mean": 0.5, "std": 0.25},
     [{"name": "scores", "layout": "NCHW", "activation": "softmax"}], ["background", "tile defect"],
     dict(channels=1, scale=1 / 255, mean=0.5, std=0.25),
     lambda raw: (softmax(raw), softmax(raw).argmax(-1))),
    ("bgra-nhwc-graph-softmax-argmax", dict(in_channels=4, out_channels=3, in_layout="NHWC", out_layout="NHWC",
                                            final="Softmax", argmax=True),
     {"channels": 4, "color": "BGR", "layout": "NHWC", "scale": 1 / 127.5, "mean": 1.0},
     [{"name": "scores", "layout": "NHWC", "activation": "none"}, {"name": "labels", "kind": "argmax"}],
     ["background", "a", "b"], dict(channels=4, scale=1 / 127.5, mean=1.0), lambda raw: (raw, raw.argmax(-1))),
    ("rgba-per-class-sigmoid", dict(in_channels=4, out_channels=2),
     {"channels": 4, "color": "RGB", "scale": 1 / 255},
     [{"name": "scores", "layout": "NCHW", "activation": "sigmoid"}], ["scratch", "crack"],
     dict(channels=4, color="RGB", scale=1 / 255), lambda raw: (sigmoid(raw), sigmoid(raw).argmax(-1))),
    ("nhw-sigmoid-logits", dict(in_channels=3, out_channels=1, squeeze=True),
     {"color": "RGB", "scale": 1 / 255}, [{"name": "scores", "activation": "sigmoid", "threshold": 0.7}],
     ["crack"], dict(color="RGB", scale=1 / 255), lambda raw: two_class(sigmoid(raw[..., 0]), 0.7)),
]
