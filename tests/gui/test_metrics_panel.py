import math
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from segscope.core.metrics import catalogue
from segscope.core.metrics.aggregate import aggregate
from segscope.core.metrics.scores import image_metrics
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.gui.docks.metrics_panel import BINS, MetricsPanel, count_ticks, histogram_title

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
    panel.show_metrics(metrics, catalogue.lookup("foreground_dice"), ["background", "defect"])
    shown = {name for name, label in panel.value_labels.items() if not label.isHidden()}
    assert shown == {"soft_dice", "soft_iou", "foreground_dice", "foreground_iou", "precision", "recall"}
    for name in shown:  # the QA metrics were not computed: their rows are hidden
        assert panel.value_labels[name].text() == f"{getattr(metrics, name):.4f}"
    assert float(panel.value_labels["soft_dice"].text()) == pytest.approx(metrics.soft_dice, abs=5e-5)
    assert f"defect: Dice {metrics.dice[1]:.4f}, IoU {metrics.iou[1]:.4f}" in panel.per_class.text()
    # The histogram's line marks the ranking metric it is given (the session's): here the foreground Dice.
    assert panel.current_line.isVisible() and panel.current_line.value() == metrics.foreground_dice
    panel.show_metrics(metrics, catalogue.lookup("soft_iou"))  # another ranking: its value is marked
    assert panel.current_line.value() == metrics.soft_iou
    panel.show_metrics(None, catalogue.lookup("foreground_dice"))
    assert all(label.text() == "–" for label in panel.value_labels.values() if not label.isHidden())
    assert panel.per_class.text() == "" and not panel.current_line.isVisible()


def test_histogram_bins_the_ranking_metric(panel):
    values = [0.0, 0.02, 0.51, 0.52, 0.97, 1.0, 0.999, None]
    dice = catalogue.lookup("dice")
    panel.set_dataset_values(dice, values, aggregate(values))
    counts, edges = panel.histogram()
    assert len(counts) == BINS and np.allclose(edges, np.linspace(0, 1, BINS + 1))
    assert counts.sum() == 7  # the n/a image (no foreground anywhere) is counted in the title, not binned
    assert counts[0] == 2 and counts[10] == 2 and counts[-1] == 3
    title = panel.plot.getPlotItem().titleLabel.text
    assert f"7 images, mean Dice {np.mean(values[:-1]):.4f}, 1 n/a" in title
    ticks = [value for value, _text in panel.plot.getAxis("left")._tickLevels[0]]
    assert ticks == [0, 1, 2, 3]  # image counts: whole numbers, never 2.5
    panel.set_dataset_values(dice, [0.9], aggregate([0.9]))
    assert "1 image, mean Dice 0.9000" in panel.plot.getPlotItem().titleLabel.text  # not "1 images"
    assert [value for value, _text in panel.plot.getAxis("left")._tickLevels[0]] == [0, 1]
    panel.set_dataset_values(dice, [0.9] * 37, aggregate([0.9] * 37))
    assert [value for value, _text in panel.plot.getAxis("left")._tickLevels[0]] == [0, 10, 20, 30]
    panel.set_dataset_values(dice, [], None)
    counts, _ = panel.histogram()
    assert counts.sum() == 0
    assert "no Dice yet" in panel.plot.getPlotItem().titleLabel.text


def test_histogram_of_an_unbounded_lower_is_better_metric_spans_the_data(panel):
    distance = catalogue.Metric("hd95_test", "HD95", "", lambda m: m.soft_dice, higher_is_better=False,
                                bounds=None)
    panel.set_dataset_values(distance, [2.0, 4.0, 12.0], aggregate([2.0, 4.0, 12.0]))
    counts, edges = panel.histogram()
    assert edges[0] == 2.0 and edges[-1] == 12.0 and counts.sum() == 3 and counts[-1] == 1


def test_a_count_metrics_histogram_is_titled_with_its_total_as_the_status_bar_gives_it(panel):
    """Defects found are summed over the images (2 + 0 + 3 + 1 = 6), never averaged (6 / 4 = 1.5)."""
    found = catalogue.lookup("defect_tp")
    values = [2, 0, 3, 1, None]
    panel.set_dataset_values(found, values, aggregate(values, count=True))
    title = panel.plot.getPlotItem().titleLabel.text
    assert f"4 images, total {found.title} 6" in title and "1.5" not in title
    assert panel.histogram()[0].sum() == 4


def test_the_qa_metrics_computed_are_shown_and_an_infinite_hd95_is_counted(panel):
    from dataclasses import replace

    from segscope.core.quality.scoring import image_quality
    from segscope.core.quality.spec import MetricSpec

    metrics = real_metrics()
    p1 = np.zeros((64, 64), np.float32)
    p1[10:30, 10:30] = 1
    result = InferenceResult(np.stack([1 - p1, p1], -1), p1.astype(np.uint8), Roi(0, 0, 64, 64), (64, 64))
    truth = np.zeros((64, 64), np.uint8)
    truth[12:30, 10:30] = 255
    quality = image_quality(MetricSpec.parse("hd95,defect_f1"), result, truth)
    panel.show_metrics(replace(metrics, quality=quality), catalogue.lookup("foreground_dice"),
                       ["background", "defect"])
    shown = {name for name, label in panel.value_labels.items() if not label.isHidden()}
    assert {"hd95", "defect_f1", "defect_tp", "defect_fp", "defect_fn"} <= shown and "nsd" not in shown
    assert panel.value_labels["hd95"].text() == f"{quality.values['hd95']:.2f}" and quality.values["hd95"] > 0
    assert panel.value_labels["defect_tp"].text() == "1"
    assert "HD95 (px)" in panel.per_class.text()
    hd95 = [1.0, 2.0, float("inf"), None]
    panel.set_dataset_values(catalogue.lookup("hd95"), hd95, aggregate(hd95))
    counts, _edges = panel.histogram()
    assert counts.sum() == 2  # the data's range, the infinite value counted in the title
    assert "2 images, mean HD95 1.50, 1 infinite, 1 n/a" in panel.plot.getPlotItem().titleLabel.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.tuples(st.just("soft_dice"), st.lists(st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1)),
                                             max_size=120)),
    st.tuples(st.just("hd95"), st.lists(st.one_of(st.none(), st.just(math.inf), st.sampled_from([0.0, 2.0, 7.0]),
                                                  st.floats(0, 20)), max_size=40)),
    st.tuples(st.just("defect_tp"), st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=40))),
    min_size=1, max_size=8))
@example(draws=[("soft_dice", [0.9] * 37)])  # (the tallest bar between two ticks: the axis ends at the next one)
@example(draws=[("hd95", [1e16, None])])  # (one value so large that adding 1 leaves it as it is)
def test_each_draw_shows_its_own_values_whatever_was_drawn_before(panel, draws):
    """The panel gives the plot only what changed since its last draw: after any sequence of draws (another
    metric, the same values, fewer or more images) the bars, the axes and the title are those of the last one,
    as a NumPy histogram of its values and its own ticks and title give them."""
    for name, values in draws:
        metric = catalogue.lookup(name)
        panel.set_dataset_values(metric, values, aggregate(values, count=metric.scale.count))
    array = np.array([math.nan if v is None else v for v in values], np.float64)
    finite = array[np.isfinite(array)]
    low, high = metric.bounds or ((finite.min(), finite.max()) if finite.size else (0.0, 1.0))
    high = high if high > low else low + max(1.0, abs(low))
    expected, edges = np.histogram(np.clip(finite, low, high), BINS, (low, high))
    counts, drawn_edges = panel.histogram()
    np.testing.assert_array_equal(counts, expected)
    np.testing.assert_array_equal(drawn_edges, edges)
    tallest = max(1, int(expected.max()))
    ticks = [value for value, _text in panel.plot.getAxis("left")._tickLevels[0]]
    assert ticks == list(count_ticks(tallest))
    step = ticks[1]
    top = -(-tallest // step) * step  # the axis ends at the tallest bar's tick or the next one
    (x_low, x_high), (y_low, y_high) = panel.plot.getViewBox().viewRange()
    assert x_low < low and x_high > high and y_low < 0 and top < y_high < 1.1 * top
    assert panel.plot.getAxis("bottom").labelText == metric.label
    title = histogram_title(metric, aggregate(values, count=metric.scale.count))
    assert panel.plot.getPlotItem().titleLabel.text == title
