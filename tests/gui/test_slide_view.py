"""The slide view's pyramid: no texture above the base size, and exact pixels where the user zooms in."""

from __future__ import annotations

import numpy as np
import pytest

from segscope.core.pyramid import BASE_MAX_SIDE, Pyramid
from segscope.core.roi import Roi
from segscope.gui.slide_view import SlideView

pytestmark = pytest.mark.gui


def gradient_slide(width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.dstack([(x * 7) % 256, (y * 5) % 256, (x + y) % 256]).astype(np.uint8)


def test_pyramid_levels_halve_down_to_the_base_size():
    pyramid = Pyramid.build(np.zeros((300, 5000, 3), np.uint8))
    assert [level.shape[:2] for level in pyramid.levels] == [(300, 5000), (150, 2500), (75, 1250)]
    assert pyramid.size == (5000, 300)
    assert [pyramid.level_for(z) for z in (0.5, 1.0, 1.9, 2.0, 3.9, 4.0, 100.0)] == [0, 0, 0, 1, 1, 2, 2]
    small = Pyramid.build(np.zeros((900, 1200, 3), np.uint8))
    assert len(small.levels) == 1


def test_crop_is_rgb_and_aligned_to_the_level():
    image = gradient_slide(5000, 300)
    pyramid = Pyramid.build(image)
    pixels, covered = pyramid.crop(0, (101, 7, 203, 50))
    assert covered == (101, 7, 203, 50)
    np.testing.assert_array_equal(pixels, image[7:50, 101:203, ::-1])
    pixels, covered = pyramid.crop(1, (101, 7, 203, 50))
    assert covered == (100, 6, 204, 50)  # whole level-1 pixels around the request
    assert pixels.shape == (22, 52, 3)


def test_big_slide_shows_the_base_level_then_exact_pixels_at_one_to_one(qtbot):
    image = gradient_slide(6000, 2500)
    view = SlideView()
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    view.set_pyramid(Pyramid.build(image), Roi(100, 100, 1000, 1000))
    view._update_detail()
    assert max(view.base.image.shape[:2]) <= BASE_MAX_SIDE
    assert not view.detail.isVisible()
    view.vb.setRange(xRange=(3000, 3400), yRange=(1200, 1500), padding=0)
    view.one_to_one()
    view._update_detail()
    assert view.detail.isVisible()
    rect = view.detail.mapRectToParent(view.detail.boundingRect())
    x0, y0, x1, y1 = int(rect.left()), int(rect.top()), int(rect.right()), int(rect.bottom())
    visible = view.vb.viewRect()
    assert x0 <= visible.left() and y0 <= visible.top() and x1 >= visible.right() and y1 >= visible.bottom()
    np.testing.assert_array_equal(view.detail.image, image[y0:y1, x0:x1, ::-1])
    assert view.detail.image.size < image.size / 4  # about a screen's worth, not the slide
