"""Region reads through the MindX double: the region travels as a lossless PNG and gives the file's results."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segscope.core.backends.mindx import MindXBackend
from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.core.slides.requests import region_request

from .conftest import make_image


def test_region_requests_equal_the_whole_file(project: Path, sdk_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "slide.png"
    path.write_bytes(make_image(320, 240, 5))
    rois = [Roi(10, 20, 300, 200), Roi(200, 100, 400, 300), Roi(0, 0, 64, 240)]
    with MindXBackend(project, sdk_home, in_flight=2) as backend, open_slide(path) as slide:
        whole = [backend.infer(path, roi) for roi in rois]
        regions = list(backend.infer_many(region_request(slide, roi) for roi in rois))
        array = backend.infer(slide.read_roi(Roi(10, 20, 300, 200)))
    for got, expected in zip(regions, whole):
        assert (got.roi, got.image_size) == (expected.roi, expected.image_size)
        np.testing.assert_array_equal(got.probabilities, expected.probabilities)
        np.testing.assert_array_equal(got.argmax, expected.argmax)
    assert whole[1].roi == Roi(200, 100, 320, 240)  # clipped by the crop plugin, as the region read was
    assert (array.roi, array.image_size) == (Roi(0, 0, 290, 180), (290, 180))  # an array alone: its own pixels
    np.testing.assert_array_equal(array.probabilities, whole[0].probabilities)
