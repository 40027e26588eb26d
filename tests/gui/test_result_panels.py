import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import cv2
import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from segscope.core.errors import SegScopeError
from segscope.core.metrics.scores import argmax_at_roi, image_metrics, mask_to_labels
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.gui.canvas.result_panel import contour
from segscope.gui.canvas.result_panels import ResultPanels
from segscope.gui.widgets import colormaps

pytestmark = pytest.mark.gui

SLIDE = (200, 150)  # width, height
ROI = Roi(30, 20, 130, 100)  # 100 x 80: not square, so x and y scale differently
MODEL = 64


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def make_result(num_classes: int = 2, seed: int = 0) -> InferenceResult:
    """Smooth random class fields at model resolution (regions, not salt-and-pepper)."""
    rng = np.random.default_rng(seed)
    logits = cv2.resize(rng.normal(0, 3, (8, 8, num_classes)).astype(np.float32), (MODEL, MODEL),
                        interpolation=cv2.INTER_CUBIC).reshape(MODEL, MODEL, num_classes)
    probabilities = softmax(logits)
    return InferenceResult(probabilities, probabilities.argmax(-1).astype(np.uint8), ROI, SLIDE)


def make_truth(result: InferenceResult, seed: int = 1) -> np.ndarray:
    """A ground-truth crop at ROI resolution that mostly agrees with the prediction, as 0/255 when binary."""
    rng = np.random.default_rng(seed)
    labels = argmax_at_roi(result).copy()
    labels[rng.random(labels.shape) < 0.1] = rng.integers(0, result.num_classes)
    labels[10:30, 5:25] = 1  # a block the model partly misses
    return labels * 255 if result.num_classes == 2 else labels


def roi_image(seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (ROI.height, ROI.width, 3), dtype=np.uint8)


@pytest.fixture
def panels(qtbot):
    widget = ResultPanels()
    qtbot.addWidget(widget)
    widget.resize(1200, 500)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def rendered(item: pg.ImageItem) -> np.ndarray:
    """The RGBA pixels pyqtgraph paints for `item` (rendered at image resolution)."""
    item.render()
    image = item.qimage.convertToFormat(item.qimage.Format.Format_RGBA8888)
    return pg.functions.ndarray_from_qimage(image).copy()


def test_panels_draw_exactly_the_result_arrays_placed_on_the_roi(panels):
    result = make_result()
    gt = make_truth(result)
    panels.show_result(result, roi_image(), gt)
    arrays = panels.panel_arrays()
    assert set(arrays) == {"heatmap", "argmax", "truth"}
    assert np.array_equal(arrays["heatmap"], result.probabilities[..., 1])
    assert np.shares_memory(arrays["heatmap"], result.probabilities)  # a view: no copy, no resampling
    assert np.array_equal(arrays["argmax"], result.argmax)
    assert np.array_equal(arrays["truth"], mask_to_labels(gt, 2))
    assert arrays["truth"].shape == (ROI.height, ROI.width)
    for panel in (panels.heat, panels.argmax, panels.truth):
        assert panel.image.mapRectToView(panel.image.boundingRect()) == QRectF(ROI.x0, ROI.y0, ROI.width, ROI.height)
    assert panels.heat.title.text == "Softmax: class 1"


def test_class_combo_chooses_the_heatmap_channel(panels):
    result = make_result(num_classes=3)
    panels.set_class_names(["background", "scratch", "spot"])
    panels.show_result(result, roi_image(), None)
    assert [panels.class_combo.itemText(i) for i in range(3)] == ["background", "scratch", "spot"]
    assert np.array_equal(panels.panel_arrays()["heatmap"], result.probabilities[..., 1])
    panels.class_combo.setCurrentIndex(2)
    assert np.array_equal(panels.panel_arrays()["heatmap"], result.probabilities[..., 2])
    assert panels.heat.title.text == "Softmax: spot"
    panels.show_result(make_result(num_classes=3, seed=5), roi_image(), None)
    assert panels.current_class() == 2  # the choice survives the next image


def test_heatmap_levels_map_probabilities_to_the_colour_bar_ends(panels):
    result = make_result()
    panels.show_result(result, roi_image(), None)
    panels.set_levels(0.25, 0.75)
    assert tuple(panels.heat.image.levels) == (0.25, 0.75)
    pixels = rendered(panels.heat.image)
    lut = colormaps.heatmap_colormap().getLookupTable(nPts=256)
    p = result.probabilities[..., 1]
    low, high = p <= 0.25, p >= 0.75
    assert low.any() and high.any()
    assert np.all(pixels[low][:, :3] == lut[0][:3])
    assert np.all(pixels[high][:, :3] == lut[-1][:3])


def view_state(view: pg.ViewBox) -> tuple[float, float, float]:
    """Centre x, centre y and slide pixels per screen pixel: what one camera shares."""
    (x0, x1), (y0, y1) = view.viewRange()
    return (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / view.width()


def test_one_camera_for_the_three_panels(panels, qtbot):
    panels.show_result(make_result(), roi_image(), make_truth(make_result()))
    views = panels.views()
    assert len({round(v.width(), 3) for v in views}) == 1  # one size, whatever the titles say
    for i, view in enumerate(views):
        view.setRange(QRectF(40 + 5 * i, 30, 20, 20), padding=0)
        qtbot.wait(1)
        states = [view_state(v) for v in views]
        assert states[1] == pytest.approx(states[0]) and states[2] == pytest.approx(states[0])
        assert states[0][:2] == pytest.approx((50 + 5 * i, 40), abs=1e-6)
        view.translateBy(x=3, y=-2)
        states = [view_state(v) for v in views]
        assert states[1] == pytest.approx(states[0]) and states[2] == pytest.approx(states[0])
        assert states[0][:2] == pytest.approx((53 + 5 * i, 38), abs=1e-6)


def test_hover_readout_in_slide_coordinates(panels):
    result = make_result()
    gt = make_truth(result)
    panels.show_result(result, roi_image(), gt)
    predicted_roi = argmax_at_roi(result)
    truth = mask_to_labels(gt, 2)
    for sx, sy in [(30, 20), (77, 53), (129, 99), (31, 35)]:
        text = panels.readout_at(sx + 0.5, sy + 0.5)
        mx = int((sx + 0.5 - ROI.x0) * MODEL / ROI.width)
        my = int((sy + 0.5 - ROI.y0) * MODEL / ROI.height)
        p0, p1 = result.probabilities[my, mx]
        rx, ry = sx - ROI.x0, sy - ROI.y0
        scored, true = int(predicted_roi[ry, rx]), int(truth[ry, rx])
        kind = {(1, 1): "TP", (1, 0): "FP", (0, 1): "FN", (0, 0): "TN"}[scored, true]
        assert text.startswith(f"slide ({sx}, {sy}) | model ({mx}, {my}) | P class 0 {p0:.3f}, class 1 {p1:.3f}")
        assert f"predicted class {result.argmax[my, mx]}" in text
        assert text.endswith(f"true class {true} | {kind}")
        assert panels.readout.text() == text
        assert panels.heat.vline.value() == sx + 0.5 and panels.truth.hline.value() == sy + 0.5
    assert panels.readout_at(10, 10) == "slide (10, 10): outside the ROI"
    # the readout's text starts in from the window's left edge, in line with the panels' controls
    assert panels.readout.contentsRect().left() >= 8


def test_the_readout_follows_an_edit_under_a_resting_mouse(panels):
    """Pixels filled under the mouse are read out as they are now, without moving it (issue 34)."""
    result = make_result()
    panels.show_result(result, roi_image(), np.zeros((ROI.height, ROI.width), np.uint8))
    spot = (ROI.x0 + 40.5, ROI.y0 + 30.5)
    assert panels.readout_at(*spot).endswith("true class 0 | " + ("FP" if argmax_at_roi(result)[30, 40] else "TN"))
    panels.update_truth(Roi(ROI.x0 + 35, ROI.y0 + 25, ROI.x0 + 45, ROI.y0 + 35), np.ones((10, 10), np.uint8))
    assert panels.readout.text().endswith("true class 1 | " + ("TP" if argmax_at_roi(result)[30, 40] else "FN"))
    QApplication.sendEvent(panels.graphics.viewport(), QEvent(QEvent.Type.Leave))  # the mouse left: no readout
    panels.update_truth(Roi(ROI.x0 + 35, ROI.y0 + 25, ROI.x0 + 45, ROI.y0 + 35), np.zeros((10, 10), np.uint8))
    assert panels.readout.text() == " "


def test_mouse_hover_emits_the_readout(panels, qtbot):
    panels.show_result(make_result(), roi_image(), None)
    view = panels.argmax.view
    scene_point = view.mapViewToScene(pg.Point(80.5, 60.5))
    widget_point = panels.graphics.mapFromScene(scene_point)
    with qtbot.waitSignal(panels.hovered, timeout=2000) as signal:
        QTest.mouseMove(panels.graphics.viewport(), QPoint(int(widget_point.x()), int(widget_point.y())))
    text = signal.args[0]
    assert text.startswith("slide (80, 60) | model")
    assert "true" not in text  # no mask: no truth, no error type
    assert panels.heat.vline.isVisible() and panels.truth.vline.isVisible()


def test_error_map_colours_count_tp_fp_fn(panels):
    result = make_result()
    gt = make_truth(result)
    panels.show_result(result, roi_image(), gt)
    panels.error_map_action.setChecked(True)
    arrays = panels.panel_arrays()
    assert "truth" not in arrays and arrays["error"].shape == (ROI.height, ROI.width)
    predicted, truth = argmax_at_roi(result) == 1, mask_to_labels(gt, 2) == 1
    expected = {"TP": predicted & truth, "FP": predicted & ~truth, "FN": ~predicted & truth}
    assert all(v.sum() > 0 for v in expected.values())
    pixels = rendered(panels.truth.image)
    for code, rgb in colormaps.ERROR_COLORS.items():
        shown = np.all(pixels[..., :3] == rgb, axis=-1)
        assert shown.sum() == expected[colormaps.ERROR_NAMES[code]].sum()
        assert np.array_equal(shown, expected[colormaps.ERROR_NAMES[code]])
    # The counts behind the map are the counts behind the core's hard Dice.
    tp, fp, fn = (expected[k].sum() for k in ("TP", "FP", "FN"))
    full_mask = np.zeros(SLIDE[::-1], np.uint8)
    full_mask[ROI.y0 : ROI.y1, ROI.x0 : ROI.x1] = gt
    assert image_metrics(result, full_mask).foreground_dice == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert "Error map" in panels.truth.title.text
    panels.error_map_action.setChecked(False)
    assert np.array_equal(panels.panel_arrays()["truth"], mask_to_labels(gt, 2))


def test_the_error_map_and_argmax_follow_the_cards_threshold(panels):
    """A 1-channel card with threshold 0.8: the panels show class 1 where p1 > 0.8, at model resolution and,
    after resizing p1 bilinearly to the ROI (docs/model-cards.md), in the error map; never p1 > 0.5."""
    result = make_result()
    p1 = result.probabilities[..., 1]
    result.threshold, result.argmax = 0.8, (p1 > 0.8).astype(np.uint8)
    gt = make_truth(result)
    panels.show_result(result, roi_image(), gt)
    np.testing.assert_array_equal(panels.panel_arrays()["argmax"], p1 > 0.8)
    panels.error_map_action.setChecked(True)
    resized = cv2.resize(p1, (ROI.width, ROI.height), interpolation=cv2.INTER_LINEAR)
    expected = resized > 0.8
    assert (expected != (resized > 0.5)).mean() > 0.05  # the threshold matters here
    codes = panels.panel_arrays()["error"]
    np.testing.assert_array_equal(codes & 1 == 1, expected)  # bit 0: predicted (core.metrics.review's codes)


def test_error_map_scores_the_chosen_class(panels):
    result = make_result(num_classes=3)
    gt = make_truth(result)
    panels.show_result(result, roi_image(), gt)
    panels.error_map_action.setChecked(True)
    panels.class_combo.setCurrentIndex(2)
    predicted, truth = argmax_at_roi(result) == 2, gt == 2
    codes = panels.panel_arrays()["error"]
    assert np.array_equal(codes == colormaps.TP, predicted & truth)
    assert np.array_equal(codes == colormaps.FN, ~predicted & truth)


def test_overlay_draws_the_masks_over_the_roi_image(panels):
    result = make_result()
    gt = make_truth(result)
    bgr = roi_image()
    panels.show_result(result, bgr, gt)
    assert not panels.argmax.base.isVisible() and panels.argmax.image.opacity() == 1.0
    panels.overlay_action.setChecked(True)
    panels.opacity_slider.setValue(30)
    arrays = panels.panel_arrays()
    assert np.array_equal(arrays["image"], bgr[..., ::-1])
    for panel in (panels.heat, panels.argmax, panels.truth):
        assert panel.base.isVisible() and panel.base.pos() == QPointF(ROI.x0, ROI.y0)
        assert panel.base.pixmap().cacheKey() == panels.heat.base.pixmap().cacheKey()  # one shared pixmap
        assert panel.image.opacity() == pytest.approx(0.3)
    shown = panels.heat.base.pixmap().toImage().convertToFormat(QImage.Format.Format_RGB888)
    assert np.array_equal(pg.functions.ndarray_from_qimage(shown), bgr[..., ::-1])
    assert np.array_equal(arrays["argmax"], result.argmax)
    background = rendered(panels.argmax.image)[result.argmax == 0]
    assert np.all(background[:, 3] == 0)  # see-through where nothing was found

    panels.contour_action.setChecked(True)
    arrays = panels.panel_arrays()
    assert np.array_equal(arrays["argmax"], contour(result.argmax))
    border = arrays["argmax"] > 0
    assert 0 < border.sum() < (result.argmax > 0).sum()
    assert np.all(result.argmax[border] == arrays["argmax"][border])
    assert np.array_equal(arrays["truth"], contour(mask_to_labels(gt, 2)))

    panels.overlay_action.setChecked(False)
    arrays = panels.panel_arrays()
    assert "image" not in arrays and np.array_equal(arrays["argmax"], result.argmax)
    assert not panels.argmax.base.isVisible() and panels.argmax.image.opacity() == 1.0


def test_contour_keeps_labels_on_region_borders_only():
    labels = np.zeros((9, 9), np.uint8)
    labels[2:7, 2:7] = 1
    ring = contour(labels)
    assert ring[4, 4] == 0 and ring[2, 4] == 1 and ring[0, 0] == 0
    assert ring.sum() == 16  # the block's outer ring of 5x5 - 3x3 pixels


def test_no_mask_state_and_clear(panels):
    panels.show_result(make_result(), roi_image(), None)
    assert set(panels.panel_arrays()) == {"heatmap", "argmax"}
    assert panels.no_mask_text.isVisible()
    assert not panels.error_map_action.isEnabled()
    panels.show_result(make_result(), roi_image(), make_truth(make_result()))
    assert not panels.no_mask_text.isVisible() and panels.error_map_action.isEnabled()
    panels.clear()
    assert panels.panel_arrays() == {}
    assert panels.heat.image.image is None and panels.class_combo.count() == 0


def test_a_bad_mask_is_refused_and_the_panels_keep_what_they_showed(panels):
    first = make_result()
    panels.show_result(first, roi_image(), None)
    with pytest.raises(SegScopeError, match="must have the image's size"):
        panels.show_result(make_result(seed=7), roi_image(), np.zeros((10, 10), np.uint8))
    bad_labels = np.full((ROI.height, ROI.width), 9, np.uint8)  # not a class of a 3-class model
    with pytest.raises(SegScopeError, match="values 9 are not a mask convention for this 3-class model"):
        panels.show_result(make_result(num_classes=3), roi_image(), bad_labels)
    assert np.array_equal(panels.panel_arrays()["argmax"], first.argmax)
    p0, p1 = first.probabilities[32, 32]
    assert panels.readout_at(80.5, 60.5).startswith(f"slide (80, 60) | model (32, 32) | P class 0 {p0:.3f}, "
                                                    f"class 1 {p1:.3f} | predicted")
    assert panels.class_combo.count() == 2


def test_camera_is_kept_for_the_same_roi_and_fitted_for_a_new_one(panels):
    result = make_result()
    panels.show_result(result, roi_image(), None)
    panels.heat.view.setRange(QRectF(50, 40, 10, 10), padding=0)
    before = view_state(panels.heat.view)
    panels.show_result(make_result(seed=3), roi_image(), None)
    assert view_state(panels.heat.view) == pytest.approx(before)
    moved = InferenceResult(result.probabilities, result.argmax, Roi(0, 0, 100, 80), SLIDE)
    panels.show_result(moved, roi_image(), None)
    (x0, x1), (y0, y1) = panels.heat.view.viewRange()
    assert x0 <= 0 and x1 >= 100 and y0 <= 0 and y1 >= 80


def test_error_map_toggle_works_from_its_checkbox(panels, qtbot):
    panels.show_result(make_result(), roi_image(), make_truth(make_result()))
    from PySide6.QtWidgets import QCheckBox

    box = next(b for b in panels.findChildren(QCheckBox) if b.text() == "Error map")
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert panels.error_map_action.isChecked() and "error" in panels.panel_arrays()


def test_a_registered_view_is_a_linked_panel_of_its_own(panels):
    from segscope.core.views import RESULT_VIEWS
    from segscope.core.views.uncertainty import uncertainty

    assert "uncertainty" in RESULT_VIEWS and set(panels.extra.actions) == set(RESULT_VIEWS)
    result = make_result()
    panels.show_result(result, roi_image(), make_truth(result))
    assert panels.extra.image("uncertainty") is None  # hidden until asked for
    panels.extra.actions["uncertainty"].setChecked(True)
    p = result.probabilities
    top, second = np.maximum(p[..., 0], p[..., 1]), np.minimum(p[..., 0], p[..., 1])
    np.testing.assert_allclose(panels.extra.image("uncertainty"), 1 - (top - second), atol=1e-6)
    np.testing.assert_allclose(uncertainty(result), 1 - np.abs(p[..., 1] - p[..., 0]), atol=1e-6)
    box = panels.extra.shown["uncertainty"][1]
    panels.heat.view.setRange(QRectF(0, 0, 50, 50), padding=0)
    QApplication.processEvents()
    assert view_state(box) == pytest.approx(view_state(panels.heat.view), rel=1e-3)  # one camera
    panels.extra.actions["uncertainty"].setChecked(False)
    assert panels.extra.image("uncertainty") is None and box.scene() is None
