"""The metric catalogue: names, aliases, per-class entries, n/a, direction, and a metric registered later
reaching the filter, the rows, the means and the documents without any other change; the dataset summary kept
as one value a metric and image."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace

import pytest

from segscope.core.errors import SegScopeError
from segscope.core.export.files import write_metrics
from segscope.core.metrics import catalogue
from segscope.core.metrics.catalogue import DatasetSummary
from segscope.core.metrics.filter import MetricFilter
from segscope.core.metrics.review import worst_first
from segscope.core.metrics.scores import ImageMetrics
from segscope.core.quality.spec import ImageQuality, MetricSpec

#: Two images by hand: b has no foreground in either mask (its class 1 and foreground values are n/a).
A = ImageMetrics(0.8, 0.8 / 1.2, (0.9, 0.6), (0.8, 0.4), 0.6, 0.4, 0.5, 0.75)
B = ImageMetrics(0.95, 0.95 / 1.05, (1.0, math.nan), (1.0, math.nan), math.nan, math.nan, math.nan, math.nan)
#: Three classes: its class 2 reaches back to A and B as n/a (they scored classes 0 and 1 only).
C = ImageMetrics(0.7, 0.7 / 1.3, (0.95, 0.5, 0.25), (0.9, 0.33, 0.125), 0.375, 0.25, 0.45, 0.35)


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry for a test to add to."""
    monkeypatch.setattr(catalogue, "_METRICS", dict(catalogue._METRICS))
    monkeypatch.setattr(catalogue, "_PER_CLASS", dict(catalogue._PER_CLASS))


def test_names_aliases_and_per_class_entries():
    assert catalogue.lookup("Dice") is catalogue.lookup("foreground_dice")
    assert catalogue.lookup(" iou ").name == "foreground_iou"
    crack = catalogue.lookup("dice_1", ["background", "crack"])
    assert (crack.name, crack.label) == ("dice_1", "Dice: crack")
    assert crack.of(A) == 0.6 and catalogue.lookup("iou_0").of(A) == 0.8
    assert catalogue.lookup("dice_5").of(A) is None  # no such class in this image's metrics: n/a
    assert [m.name for m in catalogue.metrics(["bg", "crack"]) if not m.optional] == [
        "soft_dice", "soft_iou", "foreground_dice", "foreground_iou", "precision", "recall",
        "dice_0", "dice_1", "iou_0", "iou_1"]
    with pytest.raises(SegScopeError, match=r"unknown metric 'hd99'; use one of .*dice_<i>, iou_<i>"):
        catalogue.lookup("hd99")


def test_n_a_is_shown_left_out_of_means_and_ranked_last():
    dice = catalogue.lookup("dice")
    assert dice.of(B) is None and dice.text(dice.of(B)) == "n/a" and dice.text(0.6) == "0.6000"
    means = catalogue.means([A, B, None])
    assert means["images_with_masks"] == 2
    assert means["foreground_dice"] == 0.6 and means["soft_dice"] == pytest.approx((0.8 + 0.95) / 2)
    assert means["aggregates"]["dice_1"] == {"images": 2, "finite": 1, "na": 1, "infinite": 0, "mean": 0.6,
                                             "median": 0.6}  # b's absent class: left out and counted, never 1.0
    assert means["aggregates"]["precision"]["na"] == 1 and means["precision"] == 0.5
    assert worst_first({"b": dice.of(B), "a": dice.of(A)}, dice) == ["a", "b"]
    assert not MetricFilter.parse("dice < 2").matches(B)  # n/a compares with nothing
    row = catalogue.row_values(B)
    assert row["foreground_dice"] is None and row["dice"] == [1.0, None] and row["soft_dice"] == 0.95


def test_a_registered_metric_is_filtered_ranked_exported_and_described(registry, tmp_path):
    # A lower-is-better distance in pixels, n/a where there is nothing to measure (as HD95 is).
    hd = catalogue.register(catalogue.Metric(
        "hd99", "HD99", "99th percentile of the boundary distances, pixels",
        lambda m: math.nan if math.isnan(m.foreground_dice) else 10 * (1 - m.foreground_dice),
        higher_is_better=False, bounds=None, digits=1))
    assert catalogue.lookup("hd99") is hd and hd in catalogue.metrics()
    assert hd.of(A) == pytest.approx(4.0) and hd.text(hd.of(A)) == "4.0"
    values = {"a": hd.of(A), "b": hd.of(B), "c": 9.0}
    assert worst_first(values, hd) == ["c", "a", "b"]  # the largest distance is the worst; n/a last
    assert MetricFilter.parse("hd99 > 3 and dice >= 0.6").matches(A)
    rows = [{"id": "a", **catalogue.row_values(A)}, {"id": "b", **catalogue.row_values(B)}]
    write_metrics(rows, catalogue.means([A, B]), tmp_path, ranking=hd)
    document = json.loads((tmp_path / "metrics.json").read_text())
    assert document["ranking"] == {"name": "hd99", "label": "HD99", "higher_is_better": False,
                                   "description": "99th percentile of the boundary distances, pixels"}
    names = [m["name"] for m in document["metrics"]]
    assert names.index("hd99") == names.index("dice_<i>") - 1 and names.index("iou_<i>") > names.index("dice_<i>")
    assert document["summary"]["hd99"] == pytest.approx(4.0) and document["images"][1]["hd99"] is None
    assert "hd95" not in document["summary"]  # an optional metric no image has: left out
    with open(tmp_path / "metrics.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert float(table[0]["hd99"]) == pytest.approx(4.0) and "hd95" not in table[0]
    assert table[1]["hd99"] == "" and table[1]["foreground_dice"] == "" and table[1]["dice_1"] == ""


def test_names_cannot_clash(registry):
    with pytest.raises(ValueError, match="already registered"):
        catalogue.register(catalogue.Metric("recall", "Recall", "", lambda m: m.recall))
    with pytest.raises(ValueError, match="already registered"):  # an alias, or a per-class entry's name
        catalogue.register(catalogue.Metric("dice_2", "x", "", lambda m: m.recall))
    catalogue.register(catalogue.Metric("nsd_1", "NSD at 1 px", "", lambda m: m.recall))
    with pytest.raises(ValueError, match="clashing"):  # its entry nsd_1 would be taken
        catalogue.register_per_class(catalogue.PerClass("nsd", "NSD", "", lambda m: m.dice))
    with pytest.raises(ValueError, match="already registered"):
        catalogue.register_per_class(catalogue.PerClass("iou", "IoU", "", lambda m: m.iou))


def test_the_summary_keeps_one_value_a_metric_and_image():
    summary = DatasetSummary()
    for metrics in (A, None, B):
        summary.add(metrics)
    assert summary.images == 2
    assert summary.bytes_per_image == 10 * 9  # 6 metrics, dice and IoU of 2 classes: a float64 and a byte each
    summary.add(C)
    assert summary.bytes_per_image == 12 * 9  # class 2's Dice and IoU
    means = summary.means()
    aggregates = means["aggregates"]
    assert list(aggregates) == ["soft_dice", "soft_iou", "foreground_dice", "foreground_iou", "precision", "recall",
                                "dice_0", "dice_1", "dice_2", "iou_0", "iou_1", "iou_2"]
    assert means["images_with_masks"] == 3
    assert means["soft_dice"] == pytest.approx((0.8 + 0.95 + 0.7) / 3)
    assert means["foreground_dice"] == pytest.approx((0.6 + 0.375) / 2)
    assert aggregates["dice_2"] == {"images": 3, "finite": 1, "na": 2, "infinite": 0, "mean": 0.25, "median": 0.25}
    assert aggregates["dice_1"] == {"images": 3, "finite": 2, "na": 1, "infinite": 0, "mean": 0.55, "median": 0.55}
    assert aggregates["recall"]["median"] == pytest.approx((0.75 + 0.35) / 2)
    assert summary.values(catalogue.lookup("dice_2")) == [None, None, 0.25]
    assert summary.values(catalogue.lookup("foreground_iou")) == [0.4, None, 0.25]
    assert summary.values(catalogue.lookup("hd95")) == [None, None, None]  # not computed by any image
    assert means == catalogue.means([A, None, B, C])


def _with_hd95(metrics: ImageMetrics, hd95: float, diagonal: float) -> ImageMetrics:
    quality = ImageQuality({"hd95": hd95}, {1: {"hd95": hd95}}, spec=MetricSpec.parse("hd95"), diagonal=diagonal)
    return replace(metrics, quality=quality)


def test_a_metric_first_computed_mid_run_and_its_worst_case():
    """HD95 computed from the second image on (the first has none: not n/a, not counted), infinite on one: the
    worst case substitutes that image's diagonal."""
    summary = DatasetSummary()
    for metrics in (A, _with_hd95(A, math.inf, 50.0), _with_hd95(B, 3.0, 20.0), _with_hd95(A, math.nan, 10.0)):
        summary.add(metrics)
    aggregates = summary.means()["aggregates"]
    for name in ("hd95", "hd95_class_1"):
        found = aggregates[name]
        assert (found["images"], found["finite"], found["na"], found["infinite"]) == (3, 1, 1, 1)
        assert found["mean"] == found["median"] == 3.0
        assert found["worst_case"]["mean"] == found["worst_case"]["median"] == (50.0 + 3.0) / 2
    assert summary.values(catalogue.lookup("hd95")) == [None, math.inf, 3.0, None]
    # hd95 and its class 1: a value, a byte and a worst case each; whether each image has the family: a byte
    assert summary.bytes_per_image == 10 * 9 + 2 * 17 + 1


def test_the_worst_case_substitutes_each_class_not_the_whole_image():
    """Two foreground classes: class 1 at HD95 4 px, class 2 in one mask only (inf), class 3 in neither (n/a). The
    image's value is inf; its worst case replaces class 2's inf by the 100 px diagonal and keeps class 1's 4 px:
    (4 + 100) / 2 = 52, not 100. Per class, class 2's worst case is the diagonal itself."""
    per_class = {1: {"hd95": 4.0}, 2: {"hd95": math.inf}, 3: {"hd95": math.nan}}
    quality = ImageQuality({"hd95": math.inf}, per_class, spec=MetricSpec.parse("hd95"), diagonal=100.0)
    summary = DatasetSummary()
    summary.add(replace(A, quality=quality))
    aggregates = summary.means()["aggregates"]
    assert aggregates["hd95"]["infinite"] == 1 and aggregates["hd95"]["worst_case"]["mean"] == 52.0
    assert aggregates["hd95_class_2"]["worst_case"]["mean"] == 100.0
    assert aggregates["hd95_class_1"]["worst_case"]["mean"] == 4.0
