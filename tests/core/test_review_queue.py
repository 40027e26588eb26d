"""The review queue (core/review): entries of hand-made masks with known components (kinds, boxes in slide pixels,
disagreement areas and margins worked out by hand), at sizes where the model's output is not the ROI's and the ROI
is not the slide, with three classes; the bounded queue against a plain sort; decisions on the truth; the parity of
two runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage

from segscope.core.metrics.scores import argmax_at_roi
from segscope.core.result import InferenceResult, decide
from segscope.core.review.decisions import apply_decision
from segscope.core.review.parity import ParityRun, image_parity
from segscope.core.review.queue import AREA_HALF, QueueOptions, ReviewEntry, ReviewQueue, result_entries
from segscope.core.roi import Roi


def _result(classes: np.ndarray, roi: Roi, image_size: tuple[int, int], num_classes: int = 3,
            high: float = 0.9) -> InferenceResult:
    """A result whose class `c` pixel has probability `high` for c and the rest shared by the other classes."""
    low = (1 - high) / (num_classes - 1)
    probabilities = np.full((*classes.shape, num_classes), low, np.float32)
    np.put_along_axis(probabilities, classes[..., None].astype(np.intp), high, axis=-1)
    return InferenceResult(probabilities, decide(probabilities, None), roi, image_size)


def _by_kind(entries: list[ReviewEntry]) -> dict[tuple[str, int], ReviewEntry]:
    found = {(e.kind, e.cls): e for e in entries}
    assert len(found) == len(entries)
    return found


# The ROI (60 x 40) sits at (10, 20) of a 100 x 80 slide; the model's output is 30 x 20, each of its pixels one
# 2 x 2 block of the ROI (a linear 2x upscale keeps the class of a 0.9 / 0.05 / 0.05 pixel in its block).
ROI = Roi(10, 20, 70, 60)
SLIDE = (100, 80)


def _three_class_case() -> tuple[InferenceResult, np.ndarray]:
    model = np.zeros((20, 30), np.uint8)  # predicted classes at model resolution (rows y, columns x)
    truth = np.zeros((40, 60), np.uint8)  # true classes under the ROI
    model[2:4, 2:5] = 1  # ROI x 4..10, y 4..8: a false alarm of class 1 (24 px)
    truth[2:6, 30:36] = 2  # a miss of class 2 (24 px)
    truth[20:36, 40:56] = 1  # class 1, 16 x 16 = 256 px ...
    model[11:18, 20:28] = 1  # ... predicted 16 x 14 (ROI y 22..36): IoU 224 / 256, 32 px differ: boundary
    truth[20:28, 4:12] = 2  # class 2, 8 x 8 ...
    model[10:14, 5:9] = 2  # ... predicted 6 px to the right (ROI x 10..18): 16 px shared, IoU 16 / 112: shifted
    truth[30:36, 20:28] = 1  # class 1 in the truth, class 2 predicted: a miss of 1 and a false alarm of 2
    model[15:18, 10:14] = 2
    truth[12:16, 30:34] = 1  # found exactly: no entry
    model[6:8, 15:17] = 1
    return _result(model, ROI, SLIDE), truth


def test_entries_of_three_classes_when_the_model_output_is_not_the_roi() -> None:
    result, truth = _three_class_case()
    assert np.array_equal(argmax_at_roi(result), np.kron(result.argmax, np.ones((2, 2), np.uint8)))  # the premise
    entries = _by_kind(result_entries("img", 0, result, truth))
    assert set(entries) == {("false_alarm", 1), ("missed", 2), ("boundary", 1), ("shifted", 2), ("wrong_class", 1)}
    # Boxes by hand: the ROI box plus the ROI's offset (10, 20), x1 and y1 exclusive.
    expected = {("false_alarm", 1): ((14, 24, 20, 28), 24), ("missed", 2): ((40, 22, 46, 26), 24),
                ("boundary", 1): ((50, 40, 66, 56), 32), ("shifted", 2): ((14, 40, 28, 48), 96),
                ("wrong_class", 1): ((30, 50, 38, 56), 48)}  # class 1 seen as 2: one entry, the same 48 px
    for key, (bbox, area) in expected.items():
        assert (entries[key].bbox, entries[key].area) == (bbox, area), key
    # Every disagreeing pixel has a margin of at most 0.9 - 0.05, less at a block's blended edge (exact margins:
    # test_margins_and_scores_by_hand).
    for entry in entries.values():
        assert 0.1 < entry.confidence <= 0.85 + 1e-6
    assert entries["wrong_class", 1].to == 2 and entries["wrong_class", 1].what(("bg", "crack", "pore")) == \
        "crack → pore"
    assert entries["wrong_class", 1].record(("bg", "crack", "pore"))["to_class_name"] == "pore"
    shifted = entries["shifted", 2]
    assert (len(shifted.truth_seeds), len(shifted.prediction_seeds)) == (1, 1)
    assert shifted.truth_seeds[0] == (4 + 10, 20 + 20)  # the first pixel of each component, in slide pixels
    assert shifted.prediction_seeds[0] == (10 + 10, 20 + 20)


def test_boxes_and_areas_match_a_scipy_reference() -> None:
    result, truth = _three_class_case()
    predicted = result.argmax.repeat(2, 0).repeat(2, 1)  # each model pixel is one 2 x 2 block (checked above)
    for entry in result_entries("img", 0, result, truth):
        if entry.kind not in ("missed", "false_alarm"):
            continue
        source = truth if entry.kind == "missed" else predicted
        labels, _ = ndimage.label(source == entry.cls, np.ones((3, 3)))
        x, y = entry.bbox[0] - ROI.x0, entry.bbox[1] - ROI.y0
        found = ndimage.find_objects(labels)[labels[y, x] - 1]
        assert (found[1].start + ROI.x0, found[0].start + ROI.y0, found[1].stop + ROI.x0, found[0].stop + ROI.y0) \
            == entry.bbox
        assert int((labels == labels[y, x]).sum()) == entry.area


def test_split_merged_and_the_boundary_size() -> None:
    roi = Roi(0, 0, 60, 10)
    truth = np.zeros((10, 60), np.uint8)
    model = np.zeros_like(truth)
    truth[0:6, 0:20] = 1  # one defect (120 px) predicted in two pieces of 48 px: IoU 0.4 each, fragments
    model[0:6, 0:8] = 1
    model[0:6, 12:20] = 1
    truth[0:6, 30:38] = 1  # two defects predicted as one (120 px): merged
    truth[0:6, 42:50] = 1
    model[0:6, 30:50] = 1
    truth[0:5, 52:60] = 1  # matched, 8 px differ: under the default 16 no entry, over a limit of 8 one
    model[0:6, 52:60] = 1
    result = _result(model, roi, (60, 10), num_classes=2)
    entries = _by_kind(result_entries("a", 0, result, truth))
    assert set(entries) == {("split", 1), ("merged", 1)}
    assert (entries["split", 1].bbox, entries["split", 1].area) == ((0, 0, 20, 6), 24)
    assert (entries["merged", 1].bbox, entries["merged", 1].area) == ((30, 0, 50, 6), 24)
    assert len(entries["merged", 1].truth_seeds) == 2 and len(entries["split", 1].prediction_seeds) == 2
    finer = _by_kind(result_entries("a", 0, result, truth, QueueOptions(min_boundary_area=8)))
    assert (finer["boundary", 1].bbox, finer["boundary", 1].area) == ((52, 0, 60, 6), 8)


def test_margins_and_scores_by_hand() -> None:
    """Two classes at the ROI's size: the argmax margin |p1 - p0|, and a 1-channel threshold's |p1 - t| / (1 - t)
    above it and / t below it."""
    roi = Roi(5, 5, 25, 15)
    p1 = np.full((10, 20), 0.1, np.float32)
    truth = np.zeros((10, 20), np.uint8)
    p1[0:4, 0:4] = 0.9  # a false alarm of 16 px at margin 0.8
    truth[5:10, 10:20] = 1  # a miss of 50 px where p1 = 0.3: margin 0.4
    p1[5:10, 10:20] = 0.3
    probabilities = np.stack([1 - p1, p1], axis=-1)
    result = InferenceResult(probabilities, decide(probabilities, None), roi, (40, 30))
    entries = _by_kind(result_entries("x", 3, result, truth))
    alarm, miss = entries["false_alarm", 1], entries["missed", 1]
    assert alarm.confidence == pytest.approx(0.8) and miss.confidence == pytest.approx(0.4)
    assert alarm.score == pytest.approx(0.8 * 16 / (16 + AREA_HALF))
    assert miss.score == pytest.approx(0.4 * 50 / (50 + AREA_HALF))
    assert alarm.bbox == (5, 5, 9, 9) and miss.bbox == (15, 10, 25, 15)
    queue = ReviewQueue()
    queue.add(entries.values())
    assert [e.kind for e in queue.entries()] == ["false_alarm", "missed"]  # 0.286 before 0.244
    thresholded = InferenceResult(probabilities, decide(probabilities, 0.2), roi, (40, 30), threshold=0.2)
    entries = _by_kind(result_entries("x", 3, thresholded, truth))
    assert entries["false_alarm", 1].confidence == pytest.approx((0.9 - 0.2) / 0.8)
    assert ("missed", 1) not in entries  # 0.3 > 0.2: found


def test_the_record_holds_the_issue_fields() -> None:
    entry = ReviewEntry("a", 0, "missed", 2, (1, 2, 3, 4), 10, 0.5, ((1, 2),), ())
    record = entry.record(["background", "crack", "hole"])
    assert record["image"] == "a" and record["kind"] == "missed" and record["class"] == 2
    assert record["class_name"] == "hole" and record["bbox"] == [1, 2, 3, 4] and record["area"] == 10
    assert record["score"] == pytest.approx(0.5 * 10 / (10 + AREA_HALF))


_entries = st.builds(ReviewEntry, st.sampled_from("abc"), st.integers(0, 3), st.sampled_from(["missed", "split"]),
                     st.integers(1, 2), st.tuples(*[st.integers(0, 9)] * 4), st.integers(1, 60),
                     st.sampled_from([0.0, 0.25, 0.5, 1.0]))


@given(st.lists(st.lists(_entries, max_size=6), max_size=6), st.integers(0, 8))
@settings(max_examples=60, deadline=None)
def test_the_bounded_queue_keeps_the_best_as_a_full_sort_would(images: list[list[ReviewEntry]], limit: int) -> None:
    queue = ReviewQueue(limit)
    for entries in images:
        queue.add(entries)
    everything = [e for entries in images for e in entries]
    reference = sorted(everything, key=lambda e: (-e.score, -e.area, e.order, e.cls, e.bbox, e.kind))
    assert [e.rank() for e in queue.entries()] == [e.rank() for e in reference[:limit]]
    assert queue.total == len(everything) and queue.images == len(images)


def test_decisions_fix_the_truth() -> None:
    """Accept a false alarm, remove a spurious truth, accept a shifted defect, keep one: the truth as expected."""
    roi = Roi(10, 20, 40, 40)  # 30 x 20 of a 50 x 50 slide
    truth = np.zeros((50, 50), np.uint8)
    prediction = np.zeros((20, 30), np.uint8)
    prediction[2:5, 2:6] = 1  # a defect the truth lacks
    truth[20 + 10 : 20 + 14, 10 + 20 : 10 + 24] = 1  # a spurious blob
    truth[20 + 2 : 20 + 8, 10 + 12 : 10 + 18] = 2  # a defect of class 2 drawn 3 px higher than predicted
    prediction[5:11, 12:18] = 2
    result = _result(prediction, roi, (50, 50))
    expected = truth.copy()
    expected[20 + 2 : 20 + 5, 10 + 2 : 10 + 6] = 1
    expected[20 + 10 : 20 + 14, 10 + 20 : 10 + 24] = 0
    expected[20 + 2 : 20 + 8, 10 + 12 : 10 + 18] = 0
    expected[20 + 5 : 20 + 11, 10 + 12 : 10 + 18] = 2
    entries = _by_kind(result_entries("a", 0, result, truth[20:40, 10:40]))
    assert set(entries) == {("false_alarm", 1), ("missed", 1), ("shifted", 2)}  # the pair: IoU 18 / 54
    fixed = truth.copy()
    window = fixed[20:40, 10:40]  # a view: the decisions change the slide's truth
    assert apply_decision(window, prediction, roi, entries["missed", 1], "keep") is None
    assert apply_decision(window, prediction, roi, entries["false_alarm", 1], "accept") == Roi(12, 22, 16, 25)
    assert apply_decision(window, prediction, roi, entries["missed", 1], "remove") == Roi(30, 30, 34, 34)
    assert apply_decision(window, prediction, roi, entries["shifted", 2], "accept") == Roi(22, 22, 28, 31)
    assert np.array_equal(fixed, expected)


def test_parity_of_two_runs_by_hand() -> None:
    roi = Roi(5, 5, 45, 25)  # 40 x 20 of a 60 x 40 slide
    a = np.zeros((20, 40), np.uint8)
    b = np.zeros_like(a)
    a[0:4, 0:4] = b[0:4, 0:4] = 1  # the same defect in both
    a[10:14, 10:16] = 1  # class 1 in A, class 2 in B: changed
    b[10:14, 10:16] = 2
    a[0:3, 30:33] = 2  # only in A: lost
    b[15:20, 30:40] = 1  # only in B: gained
    parity = image_parity("p", 0, a, b, roi, 3)
    flips = {flip.kind: flip for flip in parity.flips}
    assert (flips["changed"].cls, flips["changed"].to, flips["changed"].bbox, flips["changed"].area) == \
        (1, 2, (15, 15, 21, 19), 24)
    assert (flips["lost"].cls, flips["lost"].bbox, flips["lost"].area) == (2, (35, 5, 38, 8), 9)
    assert (flips["gained"].cls, flips["gained"].bbox, flips["gained"].area) == (1, (35, 20, 45, 25), 50)
    assert len(parity.flips) == 3
    # Class 1: 16 shared of 40 in A and 66 in B; class 2: none shared of 9 and 24. The mean of the two Dice:
    assert parity.dice == pytest.approx((2 * 16 / (40 + 66) + 0.0) / 2)
    same = image_parity("same", 1, a, a, roi, 3)
    assert same.dice == 1.0 and not same.flips and same.passed()
    empty = np.zeros_like(a)
    nothing = image_parity("empty", 2, empty, empty, roi, 3)
    assert math.isnan(nothing.dice) and nothing.passed()
    wider = a.copy()  # one row more of the first defect: no flip; class 1 40 of 40 and 44, class 2 identical
    wider[4, 0:4] = 1
    wide = image_parity("wide", 3, a, wider, roi, 3)
    assert not wide.flips and wide.dice == pytest.approx((2 * 40 / 84 + 1) / 2)  # 0.976 < 0.99
    pieces = a.copy()  # the first defect in two pieces: a different outline, no flip
    pieces[0:4, 2] = 0
    split = image_parity("pieces", 4, a, pieces, roi, 3)
    assert not split.flips and split.dice == pytest.approx((2 * 36 / (40 + 36) + 1) / 2)
    run = ParityRun()
    for image in (same, wide, nothing, parity):
        run.add(image)
    assert [p.image for p in run.ranked()] == ["p", "wide", "same", "empty"]
    gate = run.gate()
    assert (gate["passed"], gate["failed_images"], gate["lost"], gate["gained"], gate["changed"]) == (False, 2, 1, 1, 1)
    assert parity.record(["bg", "crack", "hole"])["flips"][0]["class_name"] in {"crack", "hole"}


def test_a_wrong_class_is_one_entry_and_one_decision_fixes_it() -> None:
    """Class 1 drawn in the truth where the model says class 2 (the same 4 x 6 block), and a class-2 blob the truth
    lacks beside a class-1 defect it has (no pixel shared: a miss and a false alarm, not a wrong class). Accept
    repaints the block as class 2; remove clears it; either way one decision."""
    roi = Roi(0, 0, 40, 20)
    truth = np.zeros((20, 40), np.uint8)
    prediction = np.zeros((20, 40), np.uint8)
    truth[2:6, 2:8] = 1
    prediction[2:6, 2:8] = 2  # the same pixels, another class
    truth[10:13, 20:23] = 1  # a miss of class 1 ...
    prediction[10:13, 30:33] = 2  # ... and, apart, a false alarm of class 2
    result = _result(prediction, roi, (40, 20))
    entries = _by_kind(result_entries("a", 0, result, truth))
    assert set(entries) == {("wrong_class", 1), ("missed", 1), ("false_alarm", 2)}
    wrong = entries["wrong_class", 1]
    assert (wrong.bbox, wrong.area, wrong.to, wrong.predicted_cls) == ((2, 2, 8, 6), 24, 2, 2)
    assert wrong.confidence == pytest.approx(0.9 - 0.05)  # p(predicted 2) - p(true 1) at every pixel
    accepted = truth.copy()
    assert apply_decision(accepted, prediction, roi, wrong, "accept") == Roi(2, 2, 8, 6)
    expected = truth.copy()
    expected[2:6, 2:8] = 2
    assert np.array_equal(accepted, expected)
    removed = truth.copy()
    assert apply_decision(removed, prediction, roi, wrong, "remove") == Roi(2, 2, 8, 6)
    expected[2:6, 2:8] = 0
    assert np.array_equal(removed, expected)


def test_a_partly_wrong_class_covers_both_components() -> None:
    """Truth class 1 on x 0..6, the model's class 2 on x 3..9 (rows 0..4): they share 3 x 4 px, so one wrong-class
    entry whose disagreement is the union, 9 x 4 = 36 px."""
    roi = Roi(0, 0, 12, 6)
    truth = np.zeros((6, 12), np.uint8)
    prediction = np.zeros((6, 12), np.uint8)
    truth[0:4, 0:6] = 1
    prediction[0:4, 3:9] = 2
    entries = _by_kind(result_entries("a", 0, _result(prediction, roi, (12, 6)), truth))
    assert set(entries) == {("wrong_class", 1)}
    assert (entries["wrong_class", 1].bbox, entries["wrong_class", 1].area) == ((0, 0, 9, 4), 36)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 90), st.integers(1, 90), st.integers(1, 3),
       st.data())
def test_margins_are_sampled_per_box_as_the_whole_map_resized(src_w, src_h, dst_w, dst_h, channels, data) -> None:
    """`resized_window` inside any box equals cv2.resize of the whole map (linear), cut to the box."""
    import cv2

    from segscope.core.review.queue import resized_window

    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    values = rng.random((src_h, src_w, channels) if channels > 1 else (src_h, src_w)).astype(np.float32)
    x0 = data.draw(st.integers(0, dst_w - 1))
    x1 = data.draw(st.integers(x0 + 1, dst_w))
    y0 = data.draw(st.integers(0, dst_h - 1))
    y1 = data.draw(st.integers(y0 + 1, dst_h))
    whole = cv2.resize(values, (dst_w, dst_h), interpolation=cv2.INTER_LINEAR)
    box = (slice(y0, y1), slice(x0, x1))
    assert np.allclose(resized_window(values, (dst_w, dst_h), box), whole[box], atol=1e-5)


def test_the_queue_labels_each_class_once(monkeypatch) -> None:
    """The components `match_defects` labelled are the queue's: per class, two labellings (truth, prediction),
    none again."""
    import cv2

    from segscope.core.quality import defects

    calls = []
    real = cv2.connectedComponentsWithStats
    monkeypatch.setattr(defects.cv2, "connectedComponentsWithStats",
                        lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    result, truth = _three_class_case()
    result_entries("img", 0, result, truth)
    assert len(calls) == 2 * 2  # classes 1 and 2
