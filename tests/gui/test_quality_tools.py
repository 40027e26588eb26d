"""The viewer's QA metrics: computed on the run's worker, listed as defects (click or N zooms to a miss),
the reliability diagrams, a metric chosen later computed in the background, and the boundary-error panel."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from segscope.core.metrics.scores import argmax_at_roi, mask_to_labels, truth_at_roi
from segscope.core.quality.defects import match_defects
from segscope.core.quality.scoring import image_quality
from segscope.core.quality.spec import MetricSpec
from segscope.core.views.boundary import boundary_error_image

from .conftest import DEFAULT_ROI

pytestmark = pytest.mark.gui


def run_and_wait(qtbot, window) -> None:
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()


@pytest.fixture
def missed(qtbot, window, demo_dataset):
    """Image 002 with a light 40x30 patch added to its truth (a defect the model cannot find), current."""
    image = cv2.imread(str(demo_dataset / "002" / "image.png"))
    mask = cv2.imread(str(demo_dataset / "002" / "mask.png"), cv2.IMREAD_GRAYSCALE)
    roi = DEFAULT_ROI
    patch = (slice(roi.y0 + 5, roi.y0 + 35), slice(roi.x0 + 5, roi.x0 + 45))
    assert image[patch].mean() > 150 and not mask[patch].any()  # light and no defect there
    mask[patch] = 255
    cv2.imwrite(str(demo_dataset / "002" / "mask.png"), mask)
    window.dataset_panel.select_item("002")
    qtbot.waitUntil(lambda: window.current.id == "002" and window.slide_ready(), timeout=30000)
    return mask


def test_defects_reliability_and_misses(qtbot, window, missed):
    tools = window.quality_tools
    tools.defects_dock.raise_()  # (a dock behind another tab is filled when it is shown)
    tools.reliability_dock.raise_()
    tools.set_spec("hd95,defect_f1,ece", remember=False)
    run_and_wait(qtbot, window)
    metrics = window.session.metrics("002")
    assert metrics.quality is not None and metrics.quality.spec == MetricSpec.parse("hd95,defect_f1,ece")
    qtbot.waitUntil(lambda: bool(tools.defects.model.rows), timeout=5000)
    # The list is core's matching of the prediction on screen against the truth, misses first.
    result = window.session.result("002")
    truth = mask_to_labels(truth_at_roi(result, missed), 2) == 1
    expected = match_defects(truth, argmax_at_roi(result) == 1)
    rows = tools.defects.model.rows
    assert sorted(r.defect.outcome for r in rows) == sorted(d.outcome for d in expected.defects)
    assert rows[0].defect.outcome == "FN" and rows[0].defect.area == 40 * 30
    assert (rows[0].box.x0, rows[0].box.y0) == (DEFAULT_ROI.x0 + 5, DEFAULT_ROI.y0 + 5)  # slide pixels
    # N zooms to the miss: the panels show its box, outlined.
    window.panels.fit()
    tools.next_miss_action.trigger()
    shown = window.panels.views()[0].viewRect()
    assert shown.contains(rows[0].box.x0, rows[0].box.y0) and shown.width() < DEFAULT_ROI.width
    assert tools.defects.table.currentIndex().row() == 0
    # The reliability diagram of this image (and of the images run, here the same one).
    image_bars, dataset_bars = tools.reliability.heights()
    bins = metrics.quality.reliability.bins()
    np.testing.assert_allclose(image_bars, [b["accuracy"] if b["pixels"] else 0.0 for b in bins])
    np.testing.assert_allclose(dataset_bars, image_bars)
    assert f"ECE {metrics.quality.values['ece']:.4f}" in tools.reliability.note.text()
    # The Metrics dock shows what was chosen, and only that.
    labels = window.metrics_panel.value_labels
    assert not labels["hd95"].isHidden() and labels["nsd"].isHidden()


def test_the_defects_list_is_filled_only_while_its_dock_is_on_screen(qtbot, window, missed):
    tools = window.quality_tools
    window.inspection.review_dock.raise_()  # the Defects dock is a tab behind it
    tools.set_spec("defect_f1", remember=False)
    run_and_wait(qtbot, window)
    assert window.session.metrics("002").quality is not None
    tools.refresh()
    assert tools.defects.model.rowCount() == 0 and tools.defects.summary.text() == ""  # no work behind the tab
    tools.defects_dock.raise_()
    qtbot.waitUntil(lambda: tools.defects.model.rowCount() > 0, timeout=5000)
    misses = sum(row.defect.outcome == "FN" for row in tools.defects.model.rows)
    assert misses >= 1 and f"{misses} missed" in tools.defects.summary.text()  # the patch the model cannot find
    alarms = sum(row.defect.outcome == "FP" for row in tools.defects.model.rows)
    assert f" {alarms} false alarm{'' if alarms == 1 else 's'}, " in tools.defects.summary.text()  # "1 false alarm"


def test_a_metric_chosen_later_is_computed_in_the_background(qtbot, window, missed):
    run_and_wait(qtbot, window)
    assert window.session.metrics("002").quality is None  # none chosen yet
    window.quality_tools.set_spec("nsd@1", remember=False)
    qtbot.waitUntil(lambda: window.session.metrics("002").quality is not None, timeout=20000)
    quality = window.session.metrics("002").quality
    result = window.session.result("002")
    expected = image_quality(MetricSpec.parse("nsd@1"), result, truth_at_roi(result, missed))
    assert quality.values["nsd"] == expected.values["nsd"]
    assert not window.metrics_panel.value_labels["nsd"].isHidden()


def test_boundary_error_panel(qtbot, window, missed):
    run_and_wait(qtbot, window)
    panels = window.panels
    qtbot.waitUntil(lambda: panels.result is window.session.result("002"))  # its panel inputs come from a worker
    panels.extra.actions["boundary"].setChecked(True)
    drawn = panels.extra.image("boundary")
    result = window.session.result("002")
    truth = mask_to_labels(truth_at_roi(result, missed), 2)
    np.testing.assert_array_equal(drawn, boundary_error_image(result, 1, truth))
    # The missed patch's outline is wrong: lit, and far from any predicted boundary (bright).
    y, x = 5, 5 + 20  # on its top edge, in ROI pixels
    assert drawn[y, x] > 0.5


def test_closed_qa_docks_are_not_refreshed_and_fill_when_opened(qtbot, window, missed):
    """With the Defects and Reliability docks closed, the session's events ask them for nothing; opening one
    fills it with the numbers as they are now."""
    from segscope.gui.widgets.docking import show_dock

    tools = window.quality_tools
    tools.set_spec("defect_f1", remember=False)
    tools.defects_dock.hide()
    tools.reliability_dock.hide()
    qtbot.waitUntil(lambda: not window.redraws_due())
    refreshes = []
    draw = tools._timer._draw
    tools._timer._draw = lambda: (refreshes.append(1), draw())
    run_and_wait(qtbot, window)
    assert window.session.metrics("002").quality is not None
    assert refreshes == [] and tools.defects.model.rowCount() == 0
    show_dock(tools.defects_dock)
    qtbot.waitUntil(lambda: tools.defects.model.rowCount() > 0, timeout=5000)
    assert refreshes
