import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import math

import numpy as np
import pytest

from segscope.core.metrics import image_metrics
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.gui.metrics_panel import BINS, MetricsPanel

pytestmark = pytest.mark.gui


@pytest.fixture
def panel(qtbot):
    widget = MetricsPanel()
    qtbot.addWidget(widget)
    return widget


def real_metrics():
    """Metrics the core computes for a small made-up result and mask."""
    rng = np.random.default_rng(0)
    p1 = rng.random((32, 32)).astype(np.float32)
    result = InferenceResult(np.stack([1 - p1, p1], -1), (p1 > 0.5).astype(np.uint8), Roi(4, 4, 68, 68), (80, 80))
    mask = np.zeros((80, 80), np.uint8)
    mask[10:50, 20:60] = 255
    return image_metrics(result, mask)


def test_labels_show_the_core_numbers(panel):
    metrics = real_metrics()
    panel.show_metrics(metrics, ["background", "defect"])
    for name, label in panel.value_labels.items():
        assert label.text() == f"{getattr(metrics, name):.4f}"
    assert float(panel.value_labels["soft_dice"].text()) == pytest.approx(metrics.soft_dice, abs=5e-5)
    assert f"defect: Dice {metrics.dice[1]:.4f}, IoU {metrics.iou[1]:.4f}" in panel.per_class.text()
    assert panel.current_line.isVisible() and panel.current_line.value() == metrics.soft_dice
    panel.show_metrics(None)
    assert all(label.text() == "–" for label in panel.value_labels.values())
    assert panel.per_class.text() == "" and not panel.current_line.isVisible()


def test_histogram_bins_the_dataset_dice(panel):
    values = [0.0, 0.02, 0.51, 0.52, 0.97, 1.0, 0.999, math.nan]
    panel.set_dataset_dice(values)
    counts, edges = panel.histogram()
    assert len(counts) == BINS and np.allclose(edges, np.linspace(0, 1, BINS + 1))
    assert counts.sum() == 7  # the NaN (an image without a mask) is left out
    assert counts[0] == 2 and counts[10] == 2 and counts[-1] == 3
    assert "7 images" in panel.plot.getPlotItem().titleLabel.text
    assert f"{np.mean(values[:-1]):.4f}" in panel.plot.getPlotItem().titleLabel.text
    panel.set_dataset_dice([])
    counts, _ = panel.histogram()
    assert counts.sum() == 0
    assert "no Dice yet" in panel.plot.getPlotItem().titleLabel.text
