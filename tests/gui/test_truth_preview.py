"""Issue 43: before the first run, the result panels show the image on screen's ROI image and its ground truth under
the ROI at once (read on a worker), with what to do next over the empty middle panel; a run replaces them. The
expected crops are read here with OpenCV from the dataset's files."""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest
from PySide6.QtCore import QRect

from segscope.core.roi import Roi

from .test_session_views import run_current, select

pytestmark = pytest.mark.gui


def expected_crops(dataset, item_id: str, roi: Roi) -> tuple[np.ndarray, np.ndarray]:
    """The ROI of the image (BGR) and of its 0/255 mask as class ids (0 background, 1 defect), from the files."""
    image = cv2.imread(str(dataset / item_id / "image.png"), cv2.IMREAD_COLOR)
    mask = cv2.imread(str(dataset / item_id / "mask.png"), cv2.IMREAD_GRAYSCALE)
    window = (slice(roi.y0, roi.y1), slice(roi.x0, roi.x1))
    return image[window], (mask[window] > 127).astype(np.uint8)


def test_an_image_never_run_shows_its_truth_and_image_at_once(qtbot, window, demo_dataset, monkeypatch):
    reader_threads: list[str] = []
    select(qtbot, window, "002")
    reader = window.open_slide.reader
    read_region = reader.read_region

    def recorded(*box):
        reader_threads.append(threading.current_thread().name)
        return read_region(*box)

    monkeypatch.setattr(reader, "read_region", recorded)
    mask = cv2.imread(str(demo_dataset / "002" / "mask.png"), cv2.IMREAD_GRAYSCALE)
    ys, xs = np.nonzero(mask > 127)  # another ROI than the default, around the image's defects and past them
    moved = Roi(max(int(xs.min()) - 30, 0), max(int(ys.min()) - 20, 0), min(int(xs.max()) + 50, mask.shape[1]),
                min(int(ys.max()) + 40, mask.shape[0]))
    assert moved != window.session.roi_for("002")
    window.slide.set_roi(moved)
    window.slide.roiChanged.emit(moved)
    panels = window.panels
    qtbot.waitUntil(lambda: panels.preview is not None and panels.preview.roi == moved, timeout=10000)
    image, truth = expected_crops(demo_dataset, "002", moved)
    assert 0 < truth.sum() < truth.size  # (a crop with both classes in it)
    np.testing.assert_array_equal(panels.preview.roi_image, image)
    np.testing.assert_array_equal(panels.preview.truth, truth)
    np.testing.assert_array_equal(panels.truth.image.image, truth)  # drawn in the ground-truth panel
    assert panels.heat.base.isVisible() and not panels.heat.base.pixmap().isNull()  # the image in the first
    assert panels.result is None and panels.argmax.image.image is None  # nothing predicted is drawn
    assert reader_threads and threading.main_thread().name not in reader_threads  # read on a worker
    assert "Not run yet" in panels.notice.text() and panels.notice.isVisible()
    # the notice lies over the empty middle panel, not over the image or the truth
    middle = panels.graphics.mapFromScene(panels.argmax.view.sceneBoundingRect()).boundingRect()
    notice = QRect(panels.notice.pos(), panels.notice.size())
    assert middle.contains(QRect(notice.center(), notice.center()))
    for side in (panels.heat, panels.truth):
        drawn = panels.graphics.mapFromScene(side.view.sceneBoundingRect()).boundingRect()
        assert not drawn.intersects(notice), (side.title.text, drawn, notice)

    run_current(qtbot, window)  # a run replaces the preview
    assert panels.preview is None and panels.result is not None and panels.result.roi == moved
    assert not panels.notice.isVisible()


def test_an_image_without_a_mask_previews_its_image_and_says_so(qtbot, window, demo_dataset):
    (demo_dataset / "003" / "mask.png").unlink()
    from .conftest import open_and_wait

    open_and_wait(qtbot, window, demo_dataset)
    select(qtbot, window, "003")
    panels = window.panels
    qtbot.waitUntil(lambda: panels.preview is not None, timeout=10000)
    assert panels.preview.truth is None and panels.no_mask_text.isVisible()
    assert panels.preview.roi_image is not None and panels.truth.image.image is None
    assert "Not run yet" in panels.notice.text()
