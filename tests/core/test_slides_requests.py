"""Streams on region reads: a slide region sent as decoded pixels gives the whole file's results, bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.core.slides.requests import region_request
from segscope.core.stream.emulation import expand_ratios
from segscope.core.stream.loader import load_pipeline

EXPAND = {"leftExpandRatio": "0.1", "rightExpandRatio": "0.25", "upExpandRatio": "0.05", "downExpandRatio": "0.3"}
#: Inside, at the right/bottom edges (clipped by the plugin), at the origin, one pixel wide.
ROIS = [Roi(40, 30, 300, 220), Roi(250, 100, 400, 300), Roi(0, 0, 90, 70), Roi(390, 5, 391, 300)]


def textured_slide(tmp_path: Path, width: int = 400, height: int = 300) -> tuple[Path, np.ndarray]:
    """Noise with a dark blob: every pixel differs, so any shift or loss in the region shows."""
    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    cv2.circle(image, (width // 3, height // 2), min(width, height) // 4, (20, 30, 40), -1)
    path = tmp_path / "slide.png"
    assert cv2.imwrite(str(path), image)
    return path, image


def _edit(props: dict[str, str]):  # type: ignore[no-untyped-def]
    def edit(data: dict) -> None:
        stream = data["unet_mindspore"]
        for name, values in props.items():
            stream[name]["props"].update(values)
    return edit


@pytest.mark.parametrize("variant", ["shipped", "expand", "rgb-float32"])
def test_region_reads_give_the_whole_files_results(tiny_model_project, tmp_path: Path, variant: str) -> None:
    edits = {"shipped": {}, "expand": {"mxpi_imagecrop0": EXPAND},
             "rgb-float32": {"mxpi_imagecrop0": EXPAND,
                             "mxpi_imagedecoder0": {"outputDataFormat": "RGB", "dataType": "float32"},
                             "mxpi_tensorinfer0": {"modelPath": tiny_model_project.plain_card()}}}[variant]
    pipeline = tiny_model_project.write_pipeline(f"{variant}.pipeline", _edit(edits))
    expand = expand_ratios(load_pipeline(pipeline))
    assert any(expand) == (variant != "shipped")
    path, _ = textured_slide(tmp_path)
    with EmbeddedBackend(pipeline) as backend, open_slide(path) as slide:
        full = [backend.infer(path, roi) for roi in ROIS]
        requests = [region_request(slide, roi, expand) for roi in ROIS]
        regions = list(backend.infer_many(requests))
    for whole, region, request in zip(full, regions, requests):
        assert request.roi is None and isinstance(request.image, np.ndarray)
        assert request.image.shape[:2] == (whole.roi.height, whole.roi.width)  # only the crop was read
        assert (region.roi, region.image_size) == (whole.roi, whole.image_size) and whole.image_size == (400, 300)
        np.testing.assert_array_equal(region.probabilities, whole.probabilities)
        np.testing.assert_array_equal(region.argmax, whole.argmax)
    if variant == "expand":  # by hand: x0 = 40 - 260*0.1, y0 = 30 - 190*0.05, x1 = 300 + 65, y1 = 220 + 57
        assert full[0].roi == Roi(14, 20, 365, 277)
        assert full[1].roi == Roi(235, 90, 400, 300)  # widened, then clipped to the slide


def test_an_array_is_the_decoders_output_and_its_roi_defaults_to_all_of_it(tiny_model_project, tmp_path) -> None:
    path, image = textured_slide(tmp_path)
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        from_array = backend.infer(image[30:220, 40:300].copy())
        from_file = backend.infer(path, Roi(40, 30, 300, 220))
        placed = next(backend.infer_many([InferenceRequest(image, Roi(40, 30, 300, 220))]))  # no placement
    assert (from_array.roi, from_array.image_size) == (Roi(0, 0, 260, 190), (260, 190))
    np.testing.assert_array_equal(from_array.probabilities, from_file.probabilities)
    assert (placed.roi, placed.image_size) == (Roi(40, 30, 300, 220), (400, 300))
    # The network by hand on the region resized to the model input (the shipped stream: INTER_LINEAR).
    resized = cv2.resize(image[30:220, 40:300], (960, 960), interpolation=cv2.INTER_LINEAR)
    expected = tiny_model_project.probabilities(tiny_model_project.network_input(resized))
    np.testing.assert_allclose(from_array.probabilities, expected, atol=1e-5)


def test_arrays_the_decoder_could_not_give_are_refused(tiny_model_project) -> None:
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        for bad in (np.zeros((10, 10, 3), np.uint16), np.zeros((10, 10), np.uint8), np.zeros((10, 10, 4), np.uint8)):
            with pytest.raises(SegScopeError, match="H x W x 3 BGR uint8") as info:
                backend.infer(bad)
            assert "\n" not in str(info.value)


DVPP_AIPP = """aipp_op {
    aipp_mode : static
    input_format : YUV420SP_U8
    csc_switch : true
    matrix_r0c0 : 256
    matrix_r0c1 : 0
    matrix_r0c2 : 359
    matrix_r1c0 : 256
    matrix_r1c1 : -88
    matrix_r1c2 : -183
    matrix_r2c0 : 256
    matrix_r2c1 : 454
    matrix_r2c2 : 0
    input_bias_0 : 0
    input_bias_1 : 128
    input_bias_2 : 128
}
"""


def test_a_dvpp_stream_refuses_region_pixels_but_runs_files(tiny_model_project, tmp_path: Path) -> None:
    card = json.loads(tiny_model_project.card.read_text())
    card["aipp"] = "yuv.cfg"
    (tiny_model_project.root / "models" / "yuv.json").write_text(json.dumps(card))
    (tiny_model_project.root / "models" / "yuv.cfg").write_text(DVPP_AIPP)

    def all_dvpp(data: dict) -> None:
        stream = data["unet_mindspore"]
        stream["mxpi_imagedecoder0"]["props"] = {}  # cvProcessor ascend, the SDK default
        stream["mxpi_imagecrop0"]["props"] = {"dataSource": "ExternalObjects"}
        stream["mxpi_imageresize0"]["props"] = {"resizeHeight": "960", "resizeWidth": "960"}
        stream["mxpi_tensorinfer0"]["props"]["modelPath"] = "models/yuv.om"

    pipeline = tiny_model_project.write_pipeline("dvpp.pipeline", all_dvpp)
    path, image = textured_slide(tmp_path)
    with EmbeddedBackend(pipeline) as backend:
        assert backend.infer(path, Roi(40, 30, 300, 220)).roi == Roi(40, 30, 300, 220)
        with pytest.raises(SegScopeError, match="DVPP") as info:
            backend.infer(image)
    assert "\n" not in str(info.value) and "cvProcessor opencv" in str(info.value)


def test_a_region_outside_the_slide_is_one_line(tmp_path: Path) -> None:
    path, _ = textured_slide(tmp_path)
    with open_slide(path) as slide:
        for roi in (Roi(400, 0, 450, 10), Roi(-5, 0, 10, 10)):
            with pytest.raises(SegScopeError, match="slide.png") as info:
                region_request(slide, roi)
            assert "\n" not in str(info.value)
