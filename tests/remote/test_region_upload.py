"""Region reads over SSH (real sshd on loopback, real worker): the region's PNG gives the file's results."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.remote.backend import RemoteBackend
from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.core.slides.requests import region_request

pytestmark = pytest.mark.ssh


def test_region_requests_equal_the_whole_file(tiny_model_project, sshd, ssh_options, worker_options,
                                              tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    path = tmp_path / "slide.png"
    assert cv2.imwrite(str(path), rng.integers(0, 256, (300, 400, 3), dtype=np.uint8))
    rois = [Roi(40, 30, 300, 220), Roi(250, 100, 400, 300)]
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, probabilities="float32",
                       crop_upload=False, **worker_options) as backend, open_slide(path) as slide:
        whole = [backend.infer(path, roi) for roi in rois]
        sent_whole = backend.last_transfer[0]
        regions = list(backend.infer_many([region_request(slide, roi) for roi in rois]))
        sent_region = backend.last_transfer[0]
    for got, expected in zip(regions, whole):
        assert (got.roi, got.image_size) == (expected.roi, expected.image_size) and got.image_size == (400, 300)
        np.testing.assert_array_equal(got.probabilities, expected.probabilities)
        np.testing.assert_array_equal(got.argmax, expected.argmax)
    assert sent_region < sent_whole  # only the last region's pixels travelled
