"""Error map codes and counts, connected error regions in slide coordinates, worst-first ordering."""

from __future__ import annotations

import math

import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.metrics import catalogue
from segscope.core.metrics.review import FN, FP, TN, TP, error_map, error_regions, result_error_map, step, worst_first
from segscope.core.metrics.scores import image_metrics
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi


def test_error_codes_and_counts_by_hand() -> None:
    prediction = np.array([[0, 1, 1, 0], [2, 2, 0, 1]], np.uint8)
    truth = np.array([[0, 1, 0, 1], [2, 1, 0, 0]], np.uint8)
    errors = error_map(prediction, truth, Roi(10, 20, 14, 22))
    assert errors.labels.tolist() == [[TN, TP, FP, FN], [TN, FN, TN, FP]]  # class 2 counts as not-1
    assert errors.counts() == {"TN": 3, "FP": 2, "FN": 2, "TP": 1}
    assert errors.fractions() == {"TN": 3 / 8, "FP": 2 / 8, "FN": 2 / 8, "TP": 1 / 8}
    class_two = error_map(prediction, truth, Roi(10, 20, 14, 22), positive=2)
    assert class_two.labels.tolist() == [[TN, TN, TN, TN], [TP, FP, TN, TN]]
    with pytest.raises(SegScopeError, match="same size"):
        error_map(prediction, truth, Roi(0, 0, 5, 2))


def test_regions_sorted_by_size_with_slide_boxes() -> None:
    roi = Roi(100, 200, 160, 240)  # 60 x 40
    truth = np.zeros((40, 60), np.uint8)
    prediction = np.zeros_like(truth)
    prediction[5:10, 3:13] = 1  # FP 10x5 = 50 px
    truth[20:26, 40:46] = 1  # FN 6x6 = 36 px
    prediction[30, 50:52] = 1  # FP 2 px
    prediction[33, 20] = 1  # FP 1 px, and diagonal neighbour: 8-connected into one region of 2
    prediction[34, 21] = 1
    truth[0:4, 50:60] = 1  # TP block (not an error)
    prediction[0:4, 50:60] = 1
    regions = error_regions(error_map(prediction, truth, roi))
    assert [(r.name, r.area) for r in regions] == [("FP", 50), ("FN", 36), ("FP", 2), ("FP", 2)]
    assert regions[0].box == Roi(103, 205, 113, 210)
    assert regions[0].centroid == pytest.approx((107.5, 207.0))
    assert regions[1].box == Roi(140, 220, 146, 226)
    assert [r.box for r in regions[2:]] == [Roi(150, 230, 152, 231), Roi(120, 233, 122, 235)]  # ties: top first
    assert [r.area for r in error_regions(error_map(prediction, truth, roi), min_area=3)] == [50, 36]


def test_result_error_map_matches_the_hard_metrics() -> None:
    rng = np.random.default_rng(2)
    roi = Roi(5, 7, 45, 37)
    p1 = rng.random((30, 40)).astype(np.float32)
    result = InferenceResult(np.stack([1 - p1, p1], -1), (p1 > 0.5).astype(np.uint8), roi, (60, 50))
    full_mask = np.zeros((50, 60), np.uint8)
    full_mask[7:37, 5:45] = np.where(rng.random((30, 40)) > 0.6, 255, 0)
    counts = result_error_map(result, full_mask).counts()
    truth = full_mask[7:37, 5:45] > 127
    assert counts == {"TN": int(np.sum(~truth & (p1 <= 0.5))), "FP": int(np.sum(~truth & (p1 > 0.5))),
                      "FN": int(np.sum(truth & (p1 <= 0.5))), "TP": int(np.sum(truth & (p1 > 0.5)))}
    metrics = image_metrics(result, full_mask)
    assert metrics.precision == pytest.approx(counts["TP"] / (counts["TP"] + counts["FP"]))
    assert metrics.recall == pytest.approx(counts["TP"] / (counts["TP"] + counts["FN"]))


def test_worst_first_and_stepping() -> None:
    dice = {"a": 0.9, "b": 0.2, "c": None, "d": 0.5, "e": math.nan}
    order = worst_first(dice, catalogue.lookup("dice"))
    assert order == ["b", "d", "a", "c", "e"]
    lower_is_better = catalogue.Metric("distance", "Distance", "", lambda m: m.soft_dice, higher_is_better=False)
    assert worst_first({"a": 3.0, "b": 9.0, "c": None, "d": 1.0}, lower_is_better) == ["b", "a", "d", "c"]
    assert step(order, "b", 1) == "d" and step(order, "d", -1) == "b"
    assert step(order, "e", 1) == "e" and step(order, "b", -1) == "b"  # clamped at the ends
    assert step(order, None, 1) == "b" and step(order, None, -1) == "e" and step([], "a", 1) is None
