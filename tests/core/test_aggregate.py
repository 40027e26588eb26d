"""The one aggregation rule (core/metrics/aggregate.py) against NumPy and SciPy written here: n/a left out and
counted, infinity counted apart and replaced by the worst value in the worst-case aggregate, counts summed, and
the seeded bootstrap interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from segscope.core.metrics import catalogue
from segscope.core.metrics.aggregate import aggregate
from segscope.core.metrics.numbers import json_safe


def test_n_a_and_infinity_are_counted_apart_and_the_worst_case_substitutes():
    values = [2.0, None, math.inf, 4.0, math.nan, 9.0]
    worst = [50.0, 60.0, 70.0, 80.0, 90.0, 100.0]  # each image's diagonal
    found = aggregate(values, worst, "the diagonal")
    assert (found.images, found.na, found.infinite, found.finite) == (6, 2, 1, 3)
    assert found.mean == pytest.approx(np.mean([2, 4, 9])) and found.median == 4.0
    assert found.worst_mean == pytest.approx(np.mean([2, 70, 4, 9])) and found.worst_median == np.median([2, 70, 4, 9])
    assert found.as_dict() == {"images": 6, "finite": 3, "na": 2, "infinite": 1, "mean": found.mean, "median": 4.0,
                               "worst_case": {"substitute": "the diagonal", "mean": found.worst_mean,
                                              "median": found.worst_median}}
    only_inf = aggregate([math.inf], [30.0], "the diagonal")
    assert only_inf.mean is None and only_inf.worst_mean == 30.0  # the plain mean is n/a, never inf or 0
    nothing = aggregate([None, math.nan])
    assert (nothing.na, nothing.mean, nothing.median) == (2, None, None)


def test_counts_are_summed_as_integers():
    found = aggregate([3, 0, None, 2], count=True)
    assert found.total == 5 and isinstance(found.total, int) and found.mean is None
    assert found.as_dict() == {"images": 4, "total": 5}


def test_the_interval_is_scipys_seeded_percentile_bootstrap():
    values = [0.91, 0.62, 0.88, 0.75, 0.97, 0.55, 0.81, 0.7]
    found = aggregate([*values, None, math.inf], confidence=True)
    seed = "rng" if "rng" in stats.bootstrap.__code__.co_varnames else "random_state"  # scipy 1.15 renamed it
    reference = stats.bootstrap((np.array(values),), np.mean, confidence_level=0.95, n_resamples=9999,
                                method="percentile", **{seed: np.random.default_rng(0)}).confidence_interval
    assert found.ci == (pytest.approx(reference.low), pytest.approx(reference.high))
    assert found.ci[0] < np.mean(values) < found.ci[1]
    assert aggregate(values, confidence=True).ci == found.ci  # the same values, the same interval
    assert aggregate([0.5], confidence=True).ci is None and aggregate([0.5, 0.5], confidence=True).ci == (0.5, 0.5)


def test_the_interval_of_resamples_drawn_in_batches_is_the_same(monkeypatch):
    """Many values are resampled a batch at a time (bounded memory): the interval is exactly that of every resample
    drawn at once."""
    from segscope.core.metrics import aggregate as rule

    values = np.random.default_rng(4).random(300)
    seed = "rng" if "rng" in stats.bootstrap.__code__.co_varnames else "random_state"
    whole = stats.bootstrap((values,), np.mean, confidence_level=0.95, n_resamples=9999, method="percentile",
                            **{seed: np.random.default_rng(0)}).confidence_interval
    monkeypatch.setattr(rule, "RESAMPLE_BYTES", 16 * 300 * 7)  # 7 resamples a batch
    assert rule.bootstrap_interval(list(values)) == (whole.low, whole.high)


def test_json_keeps_infinity_and_n_a_apart():
    assert json_safe({"a": [math.inf, math.nan, -math.inf, 1.5, 3]}) == {"a": ["inf", None, "-inf", 1.5, 3]}


def test_the_status_bar_summary_says_what_its_means_are_over() -> None:
    """The viewer's one-line dataset means name the images with masks and, per brief metric, the images left
    out as n/a (Dice over 2 of 3 images reads "n/a on 1", not a mean "over 3 images")."""
    means = {"soft_dice": 0.9, "foreground_dice": 0.8, "foreground_iou": 0.7, "images_with_masks": 3,
             "aggregates": {"soft_dice": {"na": 0}, "foreground_dice": {"na": 1}, "foreground_iou": {"na": 1}}}
    assert catalogue.brief_means(means) == "Soft Dice 0.9000 · Dice 0.8000 · IoU 0.7000 (3 images; Dice, IoU n/a on 1)"
    one = {**means, "images_with_masks": 1, "aggregates": {}}
    assert catalogue.brief_means(one).endswith("(1 image)")
