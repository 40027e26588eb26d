"""The ROI crop sent instead of the whole file gives bit-identical results (real sshd on loopback, real worker)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import SegScopeError
from segscope.core.remote.backend import RemoteBackend
from segscope.core.roi import Roi

from .sshd import Sshd

pytestmark = pytest.mark.ssh


def textured_png(width: int, height: int, seed: int, ext: str = ".png") -> bytes:
    """Noisy slide with a dark blob: every pixel differs, so any shift or re-encoding loss shows."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    cv2.circle(image, (width // 3, height // 2), min(width, height) // 4, (20, 30, 40), -1)
    ok, buf = cv2.imencode(ext, image)
    assert ok
    return buf.tobytes()


@pytest.fixture
def remote_pair(sshd: Sshd, ssh_options, worker_options, monkeypatch: pytest.MonkeyPatch):
    """Two backends, the crop and the whole file sent every time (the host's input cache off: the bytes each
    sends are compared)."""
    monkeypatch.setenv("SEGSCOPE_NO_CACHE", "1")
    opened: list[RemoteBackend] = []

    def open_both(pipeline: Path) -> tuple[RemoteBackend, RemoteBackend]:
        for crop_upload in (True, False):
            opened.append(RemoteBackend(pipeline, sshd.target, ssh_options, probabilities="float32",
                                        crop_upload=crop_upload, **worker_options))
        return opened[-2], opened[-1]

    yield open_both
    for backend in opened:
        backend.close()


def expanding_pipeline(project) -> Path:  # type: ignore[no-untyped-def]
    def expand(data: dict) -> None:
        data["unet_mindspore"]["mxpi_imagecrop0"]["props"].update(
            {"leftExpandRatio": "0.1", "rightExpandRatio": "0.25", "upExpandRatio": "0.05", "downExpandRatio": "0.3"})
    return project.write_pipeline("expand.pipeline", expand)


@pytest.mark.parametrize("expand", [False, True])
def test_the_crop_upload_is_bit_identical_to_the_whole_file(tiny_model_project, remote_pair, expand: bool) -> None:
    pipeline = expanding_pipeline(tiny_model_project) if expand else tiny_model_project.pipeline
    cropping, whole = remote_pair(pipeline)
    assert cropping.crop_upload is not None and whole.crop_upload is None
    image = textured_png(400, 300, seed=4)
    # Boxes inside, at the edges (the plugin clips x1/y1 and the expanded box), and one-pixel-wide.
    rois = [Roi(40, 30, 300, 220), Roi(250, 100, 400, 300), Roi(0, 0, 1, 300), Roi(390, 290, 600, 500)]
    requests = [InferenceRequest(image, roi) for roi in rois]
    with EmbeddedBackend(pipeline) as local:
        expected = [local.infer(image, roi) for roi in rois]
    for results in (list(cropping.infer_many(requests)), [cropping.infer(image, roi) for roi in rois]):
        sent = cropping.last_transfer[0]
        for got, full, here in zip(results, [whole.infer(image, roi) for roi in rois], expected):
            assert got.roi == full.roi == here.roi and got.image_size == full.image_size == (400, 300)
            np.testing.assert_array_equal(got.probabilities, full.probabilities)
            np.testing.assert_array_equal(got.argmax, full.argmax)
            np.testing.assert_array_equal(got.probabilities, here.probabilities)
        assert sent < len(image) < whole.last_transfer[0]  # the last ROI's crop is small; the file went whole
    if expand:  # the expanded box is what the host reports, in slide pixels
        assert expected[0].roi == Roi(14, 20, 365, 277)


def test_files_that_cannot_be_cropped_exactly_travel_whole(tiny_model_project, remote_pair) -> None:
    cropping, _ = remote_pair(tiny_model_project.pipeline)
    jpeg = textured_png(400, 300, seed=5, ext=".jpg")
    assert cropping.crop_upload is not None
    assert cropping.crop_upload.crop(jpeg, Roi(10, 10, 100, 100), "x.jpg") is None  # decoders differ by host
    assert cropping.crop_upload.crop(textured_png(50, 40, seed=6), None, "x.png") is None  # whole image
    deep = cv2.imencode(".png", np.full((30, 40, 3), 4000, np.uint16))[1].tobytes()
    assert cropping.crop_upload.crop(deep, Roi(0, 0, 10, 10), "deep.png") is None  # 16-bit
    result = cropping.infer(jpeg, Roi(10, 10, 100, 100))
    assert cropping.last_transfer[0] > len(jpeg) and result.roi == Roi(10, 10, 100, 100)
    with pytest.raises(SegScopeError, match="outside"):
        cropping.infer(textured_png(50, 40, seed=6), Roi(60, 0, 70, 10))


def test_infer_many_raises_a_bad_image_in_its_place(tiny_model_project, remote_pair) -> None:
    cropping, _ = remote_pair(tiny_model_project.pipeline)
    good, roi = textured_png(120, 90, seed=7), Roi(10, 10, 100, 80)
    truncated = good[:200]  # a PNG header with no pixels: the crop's decode here fails
    results = cropping.infer_many([InferenceRequest(good, roi), InferenceRequest(truncated, roi),
                                   InferenceRequest(good, roi)])
    assert next(results).roi == roi
    with pytest.raises(SegScopeError, match="<image bytes>"):
        next(results)
    assert cropping.infer(good, roi).roi == roi  # the backend serves on
