"""The embedded backend end to end on a tiny real ONNX model (see tests/conftest.py)."""

from __future__ import annotations

import json

import cv2
import numpy as np
import onnxruntime as ort
import pytest

from segscope.core.backend_spec import BackendSpec, open_backend
from segscope.core.backends.base import STAGES, Backend, InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import BackendError, SegScopeError
from segscope.core.roi import Roi


@pytest.fixture
def slide(tmp_path, write_png):
    """A 120x90 slide: light texture with a dark rectangle at x 40..79, y 30..59."""
    rng = np.random.default_rng(1)
    image = rng.integers(180, 240, (90, 120, 3), dtype=np.uint8)
    image[30:60, 40:80] = rng.integers(0, 40, (30, 40, 3), dtype=np.uint8)
    return write_png(tmp_path / "slide.png", image), image


def test_result_against_a_hand_run_of_the_stream(tiny_model_project, slide):
    path, image = slide
    roi = Roi(30, 20, 100, 80)
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        assert isinstance(backend, Backend)
        result = backend.infer(path, roi)
    # The stream by hand: crop [y0:y1, x0:x1], cv2.resize INTER_LINEAR to 960x960, AIPP (BGR->RGB, scale).
    resized = cv2.resize(image[20:80, 30:100], (960, 960), interpolation=cv2.INTER_LINEAR)
    tensor = tiny_model_project.network_input(resized)
    expected = tiny_model_project.probabilities(tensor)
    assert result.probabilities.shape == (960, 960, 2) and result.probabilities.dtype == np.float32
    assert result.argmax.shape == (960, 960) and result.argmax.dtype == np.uint8
    np.testing.assert_allclose(result.probabilities, expected, atol=2e-6)
    # ONNX Runtime on the hand-made tensor gives the same tensors.
    session = ort.InferenceSession(str(tiny_model_project.onnx), providers=["CPUExecutionProvider"])
    softmax, argmax = session.run(None, {"input": tensor})
    np.testing.assert_allclose(result.probabilities, softmax[0], atol=1e-6)
    np.testing.assert_array_equal(result.argmax, argmax[0])
    assert result.roi == roi and result.image_size == (120, 90) and result.backend == "embedded"
    assert result.num_classes == 2
    # The dark rectangle (x 40..79 -> model columns (40-30)*960/70 ..) is the defect class, the rest is not.
    assert result.argmax[400:600, 200:600].all() and not result.argmax[:100, :100].any()
    assert set(result.timings) == {"decode", "crop", "resize", "preprocess", "infer", "postprocess"}
    assert set(result.timings) <= set(STAGES) and all(t >= 0 for t in result.timings.values())


def test_roi_none_is_the_whole_image_and_bytes_work(tiny_model_project, slide):
    path, image = slide
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        from_path = backend.infer(path)
        from_bytes = backend.infer(path.read_bytes(), None)
        clipped = backend.infer(path, Roi(0, 0, 500, 500))
    assert from_path.roi == Roi(0, 0, 120, 90) == from_bytes.roi == clipped.roi
    np.testing.assert_array_equal(from_path.probabilities, from_bytes.probabilities)
    np.testing.assert_array_equal(from_path.probabilities, clipped.probabilities)
    tensor = tiny_model_project.network_input(cv2.resize(image, (960, 960), interpolation=cv2.INTER_LINEAR))
    np.testing.assert_allclose(from_path.probabilities, tiny_model_project.probabilities(tensor), atol=2e-6)


def test_capabilities(tiny_model_project):
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        caps = backend.capabilities
    assert caps.name == "embedded"
    assert caps.input_size == (960, 960)
    assert caps.class_names == ("background", "defect")
    assert "1 threads" in caps.device and ort.__version__ in caps.device
    assert caps.details["model"] == str(tiny_model_project.onnx)


def test_one_channel_png_is_decoded_as_three_equal_channels(tiny_model_project, tmp_path, write_png):
    gray = np.random.default_rng(2).integers(0, 256, (50, 70), dtype=np.uint8)
    gray_path = write_png(tmp_path / "gray.png", gray)
    bgr_path = write_png(tmp_path / "bgr.png", cv2.merge([gray, gray, gray]))
    assert cv2.imread(str(gray_path), cv2.IMREAD_UNCHANGED).ndim == 2
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        a, b = backend.infer(gray_path), backend.infer(bgr_path)
    np.testing.assert_array_equal(a.probabilities, b.probabilities)
    assert a.image_size == (70, 50)


def test_non_ascii_paths(tiny_model_project, tmp_path, write_png, slide):
    _, image = slide
    path = write_png(tmp_path / "données_图像" / "образец.png", image)
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        assert backend.infer(path).image_size == (120, 90)


def test_decompression_guard(tiny_model_project, slide):
    path, _ = slide
    with (EmbeddedBackend(tiny_model_project.pipeline, threads=1, max_pixels=120 * 90 - 1) as backend,
          pytest.raises(SegScopeError) as info):
        backend.infer(path)
    message = str(info.value)
    assert message.startswith(f"{path}: image is 120x90 = 10,800 pixels, over the limit of 10,799")
    assert "\n" not in message
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1, max_pixels=120 * 90) as backend:
        assert backend.infer(path).image_size == (120, 90)


def test_corrupt_and_missing_images_give_one_line_errors(tiny_model_project, tmp_path):
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    truncated = tmp_path / "notes.jpg"
    truncated.write_bytes(b"this is not an image")
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        for path, why in ((corrupt, "its PNG header is damaged or truncated); replace it with an intact copy (a "
                                    "copy or download cut short, or a file still being written)"),
                          (truncated, "PNG, JPEG, TIFF, BMP, WebP, GIF or PNM)")):
            with pytest.raises(SegScopeError) as info:
                backend.infer(path)
            assert str(info.value) == f"{path}: not a readable image ({why}"
        with pytest.raises(SegScopeError, match="<image bytes>: not a readable image"):
            backend.infer(b"")
        with pytest.raises(SegScopeError, match="file not found") as info:
            backend.infer(tmp_path / "absent.png")
        assert str(tmp_path / "absent.png") in str(info.value)


def test_closed_backend_refuses_and_close_twice_is_safe(tiny_model_project, slide):
    path, _ = slide
    backend = EmbeddedBackend(tiny_model_project.pipeline, threads=1)
    backend.close()
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.infer(path)


def test_infer_many_keeps_request_order(tiny_model_project, slide, tmp_path, write_png):
    path, image = slide
    small = write_png(tmp_path / "small.png", image[:40, :50])
    requests = [InferenceRequest(path, Roi(0, 0, 60, 45)), InferenceRequest(small), InferenceRequest(path)]
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        results = list(backend.infer_many(requests))
    assert [r.roi for r in results] == [Roi(0, 0, 60, 45), Roi(0, 0, 50, 40), Roi(0, 0, 120, 90)]


def test_keep_aspect_pipeline_maps_outputs_back_to_the_crop(tiny_model_project, slide):
    def keep_aspect(data: dict) -> None:
        data["unet_mindspore"]["mxpi_imageresize0"]["props"].update(
            {"resizeType": "Resizer_KeepAspectRatio_Fit", "paddingType": "Padding_Around"})

    path, image = slide
    pipeline = tiny_model_project.write_pipeline("fit.pipeline", keep_aspect)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(path)  # 120x90 -> 960x720 in the middle of 960x960 (rows 120..839)
    assert result.probabilities.shape == (720, 960, 2) and result.argmax.shape == (720, 960)
    resized = cv2.resize(image, (960, 720), interpolation=cv2.INTER_LINEAR)
    expected = tiny_model_project.probabilities(tiny_model_project.network_input(resized))
    np.testing.assert_allclose(result.probabilities, expected, atol=2e-6)


def test_pipeline_errors_when_opening(tiny_model_project):
    def narrow_resize(data: dict) -> None:
        data["unet_mindspore"]["mxpi_imageresize0"]["props"]["resizeWidth"] = "480"

    pipeline = tiny_model_project.write_pipeline("small.pipeline", narrow_resize)
    with pytest.raises(SegScopeError, match=r"resize output 480x960 does not match the model input 960x960"):
        EmbeddedBackend(pipeline)
    card = json.loads(tiny_model_project.card.read_text())
    tiny_model_project.onnx.unlink()
    with pytest.raises(SegScopeError, match="ONNX model named by unet_hw960_bs1.json not found"):
        EmbeddedBackend(tiny_model_project.pipeline)
    tiny_model_project.onnx.write_bytes(b"not onnx")
    with pytest.raises(SegScopeError, match="not an ONNX model|ONNX Runtime cannot load the model") as info:
        EmbeddedBackend(tiny_model_project.pipeline)
    assert str(tiny_model_project.onnx) in str(info.value)
    card["onnx"] = ""
    tiny_model_project.card.write_text(json.dumps(card))
    with pytest.raises(SegScopeError, match="field 'onnx' is empty"):
        EmbeddedBackend(tiny_model_project.pipeline)


def test_open_backend(tiny_model_project, slide):
    path, _ = slide
    with open_backend(BackendSpec("embedded", tiny_model_project.pipeline, max_pixels=100)) as backend:
        assert isinstance(backend, EmbeddedBackend)
        with pytest.raises(SegScopeError, match="over the limit of 100"):
            backend.infer(path)
    with pytest.raises(SegScopeError, match="--backend: unknown backend 'gpu'"):
        open_backend(BackendSpec("gpu", tiny_model_project.pipeline))
