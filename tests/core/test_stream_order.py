"""Real model-zoo streams run element by element in their order, each with the SDK's arithmetic, checked against a
NumPy/OpenCV reference written here from the VisionSDK plugin sources (mxPlugins/src/module/MxpiImageResize,
MxpiImageNormalize, MxpiImageCrop) and docs/zh/api/plugins.md, not from SegScope's code.

The model is an affine stand-in: a 1x1 convolution with weight A·I and bias B over three channels, activation
"none", so each output channel is A·x + B of the tensor the stream fed it: the fed tensor shows in the
result (and in an export's softmax.npy)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from segscope.core import cli
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.roi import Roi

SIZE = 32  # the model input (the zoo's 513 / 112, scaled down; 32 is the smallest scaleValue/padding MindX takes)
A, B = 0.15, 0.4  # output = A * fed + B: a normalised tensor in [-2.2, 2.7] stays inside [0, 1]
#: ImageNet mean/std as the DeepLabV3 stream gives them (R, G, B).
MEAN, STD = (123.675, 116.28, 103.53), (58.395, 57.120, 57.375)


def affine_model(path: Path, a: float = A, b: float = B) -> None:
    weight = (a * np.eye(3, dtype=np.float32)).reshape(3, 3, 1, 1)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "W", "B"], ["scores"], kernel_shape=[1, 1])], "affine",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        initializer=[numpy_helper.from_array(weight, "W"), numpy_helper.from_array(np.full(3, b, np.float32), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def project(root: Path, stream: dict, a: float = A, b: float = B) -> Path:
    """root/{models/affine.{onnx,json,om}, models/deeplabv3.cfg, pipelines/zoo.pipeline}."""
    (root / "models").mkdir(parents=True)
    (root / "pipelines").mkdir()
    affine_model(root / "models" / "affine.onnx", a, b)
    (root / "models" / "affine.om").write_bytes(b"stand-in")
    card = {"onnx": "affine.onnx", "om": "affine.om",
            "input": {"name": "image", "width": SIZE, "height": SIZE, "scale": 1},
            "outputs": [{"name": "scores", "layout": "NCHW", "activation": "none"}], "classes": ["c0", "c1", "c2"]}
    (root / "models" / "affine.json").write_text(json.dumps(card))
    (root / "models" / "deeplabv3.cfg").write_text("CLASS_NUM=3\nMODEL_TYPE=1\n")  # deeplabv3.cfg: NCHW scores
    path = root / "pipelines" / "zoo.pipeline"
    path.write_text(json.dumps({"segmentation": {"stream_config": {"deviceId": "0"}, **stream}}))
    return path


def tail(model_dataSource: str, factory: str = "mxpi_tensorinfer") -> dict:
    return {
        "mxpi_tensorinfer0": {"props": {"dataSource": model_dataSource, "modelPath": "models/affine.om"},
                              "factory": factory, "next": "mxpi_dataserialize0"},
        "mxpi_dataserialize0": {"props": {"outputDataKeys": "mxpi_tensorinfer0"}, "factory": "mxpi_dataserialize",
                                "next": "appsink0"},
        "appsrc0": {"props": {"blocksize": "409600"}, "factory": "appsrc", "next": "mxpi_imagedecoder0"},
        "appsink0": {"props": {"blocksize": "4096000"}, "factory": "appsink"},
    }


#: mindspore-ai/models official/cv/deeplabv3/infer/data/config/deeplabv3.pipeline (commit ea778704): resize Long
#: -> normalize (FLOAT32) -> resize OnlyPadding RightDown with 0 -> mxpi_modelinfer + libdeeplabv3post; no crop.
#: Adapted: scaleValue/padding 513 -> 32, the model and its config paths.
DEEPLAB = {
    "mxpi_imagedecoder0": {"props": {"handleMethod": "opencv"}, "factory": "mxpi_imagedecoder",
                           "next": "mxpi_imageresize0"},
    "mxpi_imageresize0": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_KeepAspectRatio_Long",
                                    "scaleValue": str(SIZE)},
                          "factory": "mxpi_imageresize", "next": "opencv_normalize0"},
    "opencv_normalize0": {"props": {"alpha": "123.675, 116.28, 103.53", "beta": "58.395, 57.120, 57.375",
                                    "dataType": "FLOAT32"},
                          "factory": "mxpi_imagenormalize", "next": "mxpi_imageresize1"},
    "mxpi_imageresize1": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_OnlyPadding",
                                    "scaleValue": str(SIZE), "paddingType": "Padding_RightDown",
                                    "paddingHeight": str(SIZE), "paddingWidth": str(SIZE), "paddingColorB": "0",
                                    "paddingColorG": "0", "paddingColorR": "0"},
                          "factory": "mxpi_imageresize", "next": "mxpi_tensorinfer0"},
    **tail("mxpi_imageresize1", "mxpi_modelinfer"),
}
DEEPLAB["mxpi_tensorinfer0"]["props"].update(postProcessLibPath="libdeeplabv3post.so",
                                              postProcessConfigPath="models/deeplabv3.cfg")
DEEPLAB["mxpi_tensorinfer0"]["next"] = "mxpi_dataserialize0"

#: mindspore-ai/models official/cv/Arcface/infer/data/config/arcface.pipeline (commit e60768e9): normalize
#: (127.5, FLOAT32) before resize Stretch 112x112; no crop. Adapted: 112 -> 32, the model.
ARCFACE = {
    "mxpi_imagedecoder0": {"props": {"handleMethod": "opencv"}, "factory": "mxpi_imagedecoder",
                           "next": "mxpi_imagenormalize0"},
    "mxpi_imagenormalize0": {"props": {"alpha": "127.5,127.5,127.5", "beta": "127.5,127.5,127.5",
                                       "dataType": "FLOAT32"},
                             "factory": "mxpi_imagenormalize", "next": "mxpi_imageresize0"},
    "mxpi_imageresize0": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_Stretch",
                                    "resizeHeight": str(SIZE), "resizeWidth": str(SIZE)},
                          "factory": "mxpi_imageresize", "next": "mxpi_tensorinfer0"},
    **tail("mxpi_imageresize0"),
}


# --- the reference, from the plugin sources ---------------------------------------------------------------

def slide(width: int = 50, height: int = 37, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = cv2.resize(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8), (width, height),
                       interpolation=cv2.INTER_CUBIC)
    image[8:20, 10:30] = (250, 10, 120)
    return image


def png(image: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", image)
    assert ok
    return data.tobytes()


def keep_aspect_long(image: np.ndarray, scale_value: int) -> np.ndarray:
    """OpencvResizeProcess, Resizer_KeepAspectRatio_Long: scale = (float)scaleValue / max(w, h); each side is
    (int)(side * scale) in float32; cv::resize's default INTER_LINEAR."""
    height, width = image.shape[:2]
    scale = np.float32(scale_value) / np.float32(max(width, height))
    size = (int(np.float32(width) * scale), int(np.float32(height) * scale))
    return cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)


def normalize(image_bgr: np.ndarray, mean_rgb, std_rgb) -> np.ndarray:
    """MxpiImageNormalize::Normalize on a BGR image: alpha/beta given R,G,B are swapped (SwitchAlphaAndBeta),
    then per channel convertTo(CV_32F, 1/std, -mean/std)."""
    mean, std = np.asarray(mean_rgb[::-1], np.float64), np.asarray(std_rgb[::-1], np.float64)
    return np.stack([image_bgr[..., c].astype(np.float32) * np.float32(1 / std[c]) + np.float32(-mean[c] / std[c])
                     for c in range(3)], axis=-1)


def pad_right_down(image: np.ndarray, width: int, height: int, value: float = 0.0) -> np.ndarray:
    """OpencvPaddingProcess, Padding_RightDown: copyMakeBorder(0, padH, 0, padW, BORDER_CONSTANT, colour)."""
    out = np.full((height, width, 3), value, image.dtype)
    out[: image.shape[0], : image.shape[1]] = image
    return out


def nchw(hwc: np.ndarray) -> np.ndarray:
    return hwc.astype(np.float32).transpose(2, 0, 1)[None]


# --- the streams -----------------------------------------------------------------------------------------

def test_deeplabv3_pads_the_normalised_image_with_zero(tmp_path):
    """The issue's case 1: MindX pads the normalised image with 0, not raw 0 normalised to -2.1."""
    pipeline = project(tmp_path, DEEPLAB)
    image = slide()
    resized = keep_aspect_long(image, SIZE)  # 50x37 -> 32x23
    fed = pad_right_down(normalize(resized, MEAN, STD), SIZE, SIZE)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        prepared = backend.prepare(png(image))
        result = backend.run(prepared)
    np.testing.assert_allclose(prepared.tensor, nchw(fed), atol=1e-5)
    h, w = resized.shape[:2]
    assert (w, h) == (32, 23) and result.roi == Roi(0, 0, 50, 37)  # no crop: the whole image
    np.testing.assert_allclose(result.probabilities, A * fed[:h, :w] + B, atol=1e-5)  # padding cut off
    # Normalising after the padding (the old order) would feed (0 - mean) / std there: off by ~2.1.
    wrong = normalize(pad_right_down(resized, SIZE, SIZE), MEAN, STD)
    assert np.abs(wrong[h:] - fed[h:]).min() > 1.7
    # The semantic segmentation post-processor: the argmax of the padded output, back on the content.
    np.testing.assert_array_equal(result.argmax[:5, :5], (A * fed[:h, :w] + B).argmax(-1)[:5, :5])


def test_arcface_normalises_before_resizing(tmp_path):
    """The issue's case 1b: normalise uint8 first, then a float32 bilinear resize (no uint8 rounding)."""
    pipeline = project(tmp_path, ARCFACE)
    image = slide(45, 61)
    fed = cv2.resize(normalize(image, (127.5,) * 3, (127.5,) * 3), (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(png(image))
    np.testing.assert_allclose(result.probabilities, A * fed + B, atol=1e-5)
    old = normalize(cv2.resize(image, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR), (127.5,) * 3, (127.5,) * 3)
    assert np.abs(old - fed).max() > 2e-3  # resizing uint8 first rounds: the order shows in the numbers


def test_a_model_reads_what_its_data_source_names(tmp_path):
    """A tensorinfer whose dataSource names the resize gets the resized image, not the normaliser's output
    linked between them (metadata is read by key: MxpiTensorInfer, MxPluginsAutoDataSource)."""
    stream = {**ARCFACE}
    stream["mxpi_imagedecoder0"] = {**ARCFACE["mxpi_imagedecoder0"], "next": "mxpi_imageresize0"}
    stream["mxpi_imageresize0"] = {**ARCFACE["mxpi_imageresize0"], "next": "mxpi_imagenormalize0"}
    stream["mxpi_imagenormalize0"] = {**ARCFACE["mxpi_imagenormalize0"], "next": "mxpi_tensorinfer0"}
    pipeline = project(tmp_path, stream, a=1 / 400, b=0.1)
    image = slide()
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(png(image))
    fed = cv2.resize(image, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR).astype(np.float64)
    np.testing.assert_allclose(result.probabilities, fed / 400 + 0.1, atol=1e-5)


def test_deeplabv3_through_eval_export_shows_the_fed_tensor(tmp_path):
    pipeline = project(tmp_path / "project", DEEPLAB)
    data = tmp_path / "data" / "a"
    data.mkdir(parents=True)
    image = slide(60, 44)
    (data / "image.png").write_bytes(png(image))
    out = io.StringIO()
    code = cli.main(["eval", "--dataset", str(tmp_path / "data"), "--pipeline", str(pipeline), "--export",
                     str(tmp_path / "out"), "--export-kinds", "softmax"], out)
    assert code == 0, out.getvalue()
    resized = keep_aspect_long(image, SIZE)
    fed = normalize(resized, MEAN, STD)
    exported = np.load(tmp_path / "out" / "a_softmax.npy")
    np.testing.assert_allclose(exported, A * fed + B, atol=1e-5)


@pytest.mark.parametrize(("change", "reason"), [
    (lambda s: s["mxpi_imageresize0"].update(next="mxpi_imagecrop0") or s.update(mxpi_imagecrop0={
        "factory": "mxpi_imagecrop", "next": "opencv_normalize0",
        "props": {"cvProcessor": "opencv", "dataSource": "ExternalObjects"}}),
     "crops after a resize"),
    (lambda s: s["mxpi_tensorinfer0"]["props"].update(dataSource="mxpi_imageresize9"),
     "its dataSource 'mxpi_imageresize9' is no element before it"),
])
def test_an_order_the_emulation_cannot_reproduce_is_cannot_run(tmp_path, change, reason):
    stream = json.loads(json.dumps(DEEPLAB))
    change(stream)
    pipeline = project(tmp_path, stream)
    out = io.StringIO()
    assert cli.main(["check", str(pipeline)], out) == 0
    line = out.getvalue()
    assert "valid for MindX; embedded backend: cannot run (" in line and reason in line and ": runs" not in line
