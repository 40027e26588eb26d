"""The viewer's running summary (`core.metrics.running`) against the batch rule and an exact reference: whatever
sequence of images is set, changed and dropped, its means equal `catalogue.means` of the images it holds bit for
bit, its counts (n/a, infinite, totals) equal ones counted here, and the exact sum equals a sum of Fractions."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from segscope.core.metrics import catalogue
from segscope.core.metrics.running import ExactSum, RunningSummary
from segscope.core.metrics.scores import ImageMetrics
from segscope.core.quality.calibration import Calibration, Reliability
from segscope.core.quality.spec import ImageQuality

from helpers import same_numbers, without_medians

NAN, INF = math.nan, math.inf
#: Values a metric takes, the awkward ones included: n/a, infinite, tiny and huge magnitudes, repeats.
values = st.one_of(st.just(NAN), st.just(INF), st.floats(0, 1), st.sampled_from([0.1, 0.2, 0.3, 1e-300, 1e16]))


@st.composite
def image_metrics(draw: st.DrawFn) -> ImageMetrics:
    classes = draw(st.integers(2, 4))
    dice = tuple(draw(values) for _ in range(classes))
    quality = None
    if draw(st.booleans()):  # QA metrics asked for: a distance (may be inf) and a count
        hd95 = {c: draw(values) for c in range(1, classes)}
        tp = {c: draw(st.integers(0, 9)) for c in range(1, classes)}
        quality = ImageQuality({"hd95": draw(values), "defect_tp": float(sum(tp.values()))},
                               {c: {"hd95": hd95[c], "defect_tp": float(tp[c])} for c in range(1, classes)},
                               diagonal=10.0)
    return ImageMetrics(draw(st.floats(0, 1)), draw(st.floats(0, 1)), dice, dice, draw(values), draw(values),
                        draw(values), draw(values), quality)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), image_metrics())), max_size=30))
def test_the_running_means_are_the_batch_means_after_any_changes(changes: list) -> None:
    running, held = RunningSummary(), {}
    for image, metrics in changes:
        running.set(str(image), metrics)
        if metrics is None:
            held.pop(str(image), None)
        else:
            held[str(image)] = metrics
        assert same_numbers(running.means(), without_medians(catalogue.means(held.values()))), (changes, held)
    assert len(running) == len(held)


def test_counts_and_means_by_hand() -> None:
    """Three images: Dice of the foreground 0.5, n/a and 1.0; one image's HD95 infinite; the defects summed."""
    def image(fg: float, hd95: float, tp: int) -> ImageMetrics:
        quality = ImageQuality({"hd95": hd95, "defect_tp": float(tp)}, {1: {"hd95": hd95, "defect_tp": float(tp)}})
        return ImageMetrics(0.9, 0.8, (1.0, fg), (1.0, fg), fg, fg, 1.0, 1.0, quality)

    running = RunningSummary()
    running.set("a", image(0.5, 3.0, 2))
    running.set("b", image(NAN, INF, 0))
    running.set("c", image(1.0, 5.0, 1))
    dice = running.aggregate(catalogue.lookup("foreground_dice"))
    assert dice is not None and (dice.images, dice.na, dice.infinite, dice.mean) == (3, 1, 0, 0.75)
    hd95 = running.aggregate(catalogue.lookup("hd95"))
    assert hd95 is not None and (hd95.images, hd95.infinite, hd95.mean) == (3, 1, 4.0)
    tp = running.aggregate(catalogue.lookup("defect_tp"))
    assert tp is not None and tp.total == 3
    running.set("c", None)  # dropped: the means are of a and b only
    assert running.means()["foreground_dice"] == 0.5 and running.means()["images_with_masks"] == 2
    np.testing.assert_array_equal(np.sort(running.values(catalogue.lookup("foreground_dice"))), [0.5, NAN])
    running.clear()
    assert running.aggregate(catalogue.lookup("foreground_dice")) is None and len(running) == 0


#: Metrics a histogram ranks by: bounded, unbounded (may be infinite), a count, optional (QA) and per-class ones.
RANKED = [catalogue.lookup(name) for name in ("foreground_dice", "soft_dice", "hd95", "defect_tp")] + \
    [family.entry(index) for family in catalogue.per_class() for index in (1, 3)]
steps = st.one_of(st.tuples(st.just("set"), st.integers(0, 5), st.one_of(st.none(), image_metrics())),
                  st.tuples(st.just("discard"), st.integers(0, 5)), st.tuples(st.just("clear")),
                  st.tuples(st.just("rank"), st.sampled_from(RANKED)))


def held_values(metric: catalogue.Metric, held: dict[str, ImageMetrics]) -> np.ndarray:
    """`metric` of every image held that computed it, NaN for n/a, sorted (NaN last): counted here."""
    found = [metric.of(m) for m in held.values() if metric.computed(m)]
    return np.sort(np.array([NAN if value is None else value for value in found], np.float64))


@settings(max_examples=150, deadline=None)
@given(st.lists(steps, max_size=40))
def test_the_values_kept_for_a_histogram_are_those_of_the_images_held_after_any_changes(changes: list) -> None:
    """The ranked metric's values (kept by slot as images are set, dropped and cleared, refilled when another
    metric is ranked) are every held image's value of it, and bin as a histogram of those values does."""
    running, held = RunningSummary(), {}
    ranked = RANKED[0]
    for step in changes:
        if step[0] == "set":
            running.set(str(step[1]), step[2])
            if step[2] is None:
                held.pop(str(step[1]), None)
            else:
                held[str(step[1])] = step[2]
        elif step[0] == "discard":
            running.discard(str(step[1]))
            held.pop(str(step[1]), None)
        elif step[0] == "clear":
            running.clear()
            held.clear()
        else:
            ranked = step[1]
        kept = running.values(ranked)
        expected = held_values(ranked, held)
        np.testing.assert_array_equal(np.sort(kept), expected, err_msg=str(changes))
        finite = expected[np.isfinite(expected)]
        low, high = ranked.bounds or ((finite.min(), finite.max()) if finite.size else (0.0, 1.0))
        high = high if high > low else low + max(1.0, abs(low))  # (the data's range, as the histogram spans it)
        np.testing.assert_array_equal(np.histogram(np.clip(kept[np.isfinite(kept)], low, high), 20, (low, high))[0],
                                      np.histogram(np.clip(finite, low, high), 20, (low, high))[0])


@given(st.lists(st.tuples(st.booleans(), st.floats(-1e300, 1e300)), max_size=60))
def test_the_exact_sum_is_a_sum_of_fractions(steps: list[tuple[bool, float]]) -> None:
    total, exact, added = ExactSum(), Fraction(0), []
    for remove, value in steps:
        if remove and added:
            value = added.pop()
            total.remove(value)
            exact -= Fraction(value)
        else:
            added.append(value)
            total.add(value)
            exact += Fraction(value)
        assert total.value == float(exact)  # (float of a Fraction: correctly rounded)


def test_the_change_count_moves_exactly_when_what_is_summed_changes() -> None:
    """A view redraws only when `changes` moved: setting an image to the metrics it holds (or none to none) is
    no change; a new value, a drop and a clear are."""
    def image(fg: float) -> ImageMetrics:
        return ImageMetrics(0.9, 0.8, (1.0, fg), (1.0, fg), fg, fg, 1.0, 1.0)

    running = RunningSummary()
    first, other = image(0.5), image(0.25)
    seen = [running.changes]

    def moved() -> bool:
        seen.append(running.changes)
        return seen[-1] != seen[-2]

    running.set("a", None)
    assert not moved()
    running.set("a", first)
    assert moved()
    running.set("a", first)
    assert not moved() and running.means()["foreground_dice"] == 0.5
    running.set("a", other)
    assert moved() and running.means()["foreground_dice"] == 0.25
    running.set("a", None)
    assert moved() and len(running) == 0
    running.discard("a")
    assert not moved()
    running.set("b", first)
    running.clear()
    assert moved() and len(running) == 0


def test_the_pooled_reliability_follows_images_set_changed_and_dropped() -> None:
    """The Reliability dock's "images run" diagram: every pixel of the images held, binned here by hand (bin b
    holds confidences in (b/15, (b+1)/15]), whatever order images came and went in."""
    rng = np.random.default_rng(3)

    def image(pixels: int) -> tuple[ImageMetrics, np.ndarray, np.ndarray, Reliability]:
        confidence = rng.uniform(0.5, 1.0, pixels)
        correct = rng.random(pixels) < confidence
        probabilities = np.stack([confidence, 1 - confidence], -1)[:, None, :]  # top label: class 0
        labels = np.where(correct, 0, 1)[:, None]
        reliability = Reliability.of(probabilities, labels)
        calibration = Calibration(reliability, Reliability.empty(), 0.0, pixels)
        quality = ImageQuality({"ece": reliability.ece()}, {}, calibration=calibration)
        metrics = ImageMetrics(0.9, 0.8, (1.0, 0.5), (1.0, 0.5), 0.5, 0.5, 1.0, 1.0, quality)
        return metrics, confidence, correct, reliability

    running, held = RunningSummary(), {}
    for name, pixels in [("a", 40), ("b", 25), ("a", 31), ("c", 50), ("b", 0)]:
        if pixels:
            metrics, confidence, correct, reliability = image(pixels)
            running.set(name, metrics)
            held[name] = confidence, correct, reliability
        else:
            running.discard(name)
            held.pop(name)
    pooled, images = running.reliability()
    confidence = np.concatenate([c for c, _, _ in held.values()])
    correct = np.concatenate([k for _, k, _ in held.values()])
    bins = np.ceil(confidence * 15).astype(int) - 1
    assert images == 2
    assert pooled.counts.tolist() == np.bincount(bins, minlength=15).tolist()
    assert pooled.correct.tolist() == np.bincount(bins[correct], minlength=15).tolist()
    expected = [math.fsum(confidence[bins == b]) for b in range(15)]
    assert np.allclose(pooled.confidence, expected, rtol=1e-12, atol=0)
    # each bin's sum is the exact sum of the images' own sums: no trace left of the images changed or dropped
    assert pooled.confidence.tolist() == [math.fsum(r.confidence[b] for _, _, r in held.values()) for b in range(15)]
