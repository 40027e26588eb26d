"""The viewer reads truth masks by the same rule as `eval` (core/dataset/masks.py): a mask in no convention for the
model is that image's error, named with its file and values, and the viewer goes on with the other images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

pytestmark = pytest.mark.gui


@pytest.fixture
def misread(demo_dataset):
    """Image 002's truth rewritten as 0/1/2 (two foreground values) for the binary model."""
    path = demo_dataset / "002" / "mask.png"
    mask = (cv2.imread(str(path), cv2.IMREAD_GRAYSCALE) > 0).astype(np.uint8)
    mask[:4, :4] = 2
    cv2.imwrite(str(path), mask)
    return path


def test_a_refused_truth_is_the_images_error_and_the_viewer_goes_on(qtbot, misread, window):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
    errors = [m.text for m in window.messages.errors()]
    assert any("values 0, 1, 2 are not a mask convention for this 2-class model" in e and "002" in e
               for e in errors), errors
    assert window.session.has_metrics("001") and window.session.has_metrics("003")
    assert not window.session.has_metrics("002") and window.isVisible()

