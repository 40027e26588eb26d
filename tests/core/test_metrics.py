"""Metrics against hand-computed cases and against the original script's formula written out here."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.metrics.scores import (
    argmax_at_roi,
    compare_tensors,
    hard_metrics,
    image_metrics,
    iou_from_dice,
    mask_to_labels,
    soft_dice,
    truth_at_roi,
)
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi


def original_script_dice(softmax: np.ndarray, mask_crop: np.ndarray) -> tuple[float, float]:
    """main.py's dice/iou (its `np.int` spelled `int`): resize the ROI crop of the mask to the model
    resolution, `/255 > 0.5`, one-hot, then 2·Σ(p·y) / (Σp² + Σy² + 1e-6) over both channels."""
    height, width = softmax.shape[:2]
    mask = cv2.resize(mask_crop, (width, height))
    mask = (mask / 255 > 0.5).astype(int)
    onehot = np.stack([1 - mask, mask], axis=-1)
    inter = np.sum(softmax * onehot)
    union = np.sum(softmax * softmax) + np.sum(onehot * onehot)
    dice = 2 * inter / (union + 1e-6)
    return dice, dice / (2 - dice)


def two_class(p1: np.ndarray) -> np.ndarray:
    p1 = np.asarray(p1, np.float32)
    return np.stack([1 - p1, p1], axis=-1)


# --- soft Dice ----------------------------------------------------------------------------------------


def test_soft_dice_two_by_two_by_hand():
    probabilities = two_class([[0.9, 0.2], [0.6, 0.1]])
    mask = np.array([[255, 0], [255, 0]], np.uint8)
    # inter = 0.9 + 0.8 + 0.6 + 0.9 = 3.2; Σp² = 0.81+0.04+0.36+0.01 + 0.01+0.64+0.16+0.81 = 2.84; Σy² = 4
    expected = 2 * 3.2 / (2.84 + 4 + 1e-6)
    dice = soft_dice(probabilities, mask)
    assert dice == pytest.approx(expected, rel=1e-6)
    assert dice == pytest.approx(original_script_dice(probabilities, mask)[0], rel=1e-6)
    assert iou_from_dice(dice) == pytest.approx(expected / (2 - expected), rel=1e-6)


def test_soft_dice_of_three_classes_by_hand():
    probabilities = np.array([[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]], np.float32)
    mask = np.array([[0, 2]], np.uint8)  # class indices
    # inter = 0.7 + 0.6 = 1.3; sum p^2 = 0.49 + 0.04 + 0.01 + 0.01 + 0.09 + 0.36 = 1.0; sum y^2 = 2 pixels
    assert soft_dice(probabilities, mask) == pytest.approx(2 * 1.3 / (1.0 + 2 + 1e-6), rel=1e-6)


def test_soft_dice_perfect_and_opposite():
    mask = np.array([[255, 0, 0], [0, 255, 255]], np.uint8)
    labels = (mask > 0).astype(np.float32)
    assert soft_dice(two_class(labels), mask) == pytest.approx(2 * 6 / (6 + 6 + 1e-6), rel=1e-9)
    assert soft_dice(two_class(1 - labels), mask) == 0.0
    assert iou_from_dice(1.0) == 1.0 and iou_from_dice(0.0) == 0.0
    assert iou_from_dice(0.5) == pytest.approx(1 / 3)


def test_soft_dice_matches_the_original_script_with_a_resized_mask():
    rng = np.random.default_rng(11)
    probabilities = two_class(rng.random((37, 53)))
    mask = np.zeros((90, 70), np.uint8)
    cv2.circle(mask, (30, 40), 21, 255, -1)
    cv2.line(mask, (0, 89), (69, 0), 255, 2)  # a thin line: linear resizing makes values around 128
    resized = cv2.resize(mask, (53, 37))
    assert ((resized > 0) & (resized < 255)).any()  # the threshold matters in this case
    dice, iou = original_script_dice(probabilities, mask)
    assert soft_dice(probabilities, mask) == pytest.approx(dice, rel=1e-6)
    assert iou_from_dice(soft_dice(probabilities, mask)) == pytest.approx(iou, rel=1e-6)


def test_soft_dice_of_a_faint_resized_0_255_mask_matches_the_original():
    mask = np.zeros((2, 173), np.uint8)
    mask[:, 8] = 255  # a one-pixel defect that INTER_LINEAR all but misses when shrinking 173 -> 82 columns
    assert cv2.resize(mask, (82, 2)).max() == 1
    probabilities = two_class(np.full((2, 82), 0.25))
    expected, _ = original_script_dice(probabilities, mask)  # no defect pixel survives `/255 > 0.5`
    assert soft_dice(probabilities, mask) == pytest.approx(expected, rel=1e-6)


def test_soft_dice_accepts_0_1_masks():
    probabilities = two_class([[0.9, 0.2], [0.6, 0.1]])
    labels = np.array([[1, 0], [1, 0]], np.uint8)
    assert soft_dice(probabilities, labels) == pytest.approx(6.4 / 6.840001, rel=1e-6)


def test_soft_dice_multi_class_uses_class_indices():
    probabilities = np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]], np.float32)  # 1 x 2 pixels, 3 classes
    mask = np.array([[0, 2]], np.uint8)
    # inter = 0.7 + 0.8; Σp² = 0.49+0.04+0.01 + 0.01+0.01+0.64 = 1.2; Σy² = 2
    assert soft_dice(probabilities, mask) == pytest.approx(2 * 1.5 / (3.2 + 1e-6), rel=1e-6)
    # A 2x4 mask shrinks to 1x2 by nearest neighbour: class indices are never blended.
    big = np.array([[0, 0, 2, 2], [0, 0, 2, 2]], np.uint8)
    assert soft_dice(probabilities, big) == pytest.approx(2 * 1.5 / (3.2 + 1e-6), rel=1e-6)
    with pytest.raises(SegScopeError, match=r"values 0, 3 are not a mask convention for this 3-class model"):
        soft_dice(probabilities, np.array([[0, 3]], np.uint8))


def test_mask_to_labels():
    np.testing.assert_array_equal(mask_to_labels(np.array([[0, 255, 255, 0]], np.uint8), 2), [[0, 1, 1, 0]])
    np.testing.assert_array_equal(mask_to_labels(np.array([[0, 1, 1]], np.uint8), 2), [[0, 1, 1]])
    np.testing.assert_array_equal(mask_to_labels(np.zeros((2, 2), np.uint8), 2), np.zeros((2, 2)))
    for never_guessed in ([0, 127, 128, 255], [0, 1, 2], [0, 1, 255]):  # greys, 3 classes, two conventions
        with pytest.raises(SegScopeError, match="are not a mask convention for this 2-class model"):
            mask_to_labels(np.array([never_guessed], np.uint8), 2)


# --- hard metrics -------------------------------------------------------------------------------------


def test_hard_metrics_binary_by_hand():
    truth = np.array([[0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]], np.uint8)
    pred = np.array([[0, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 1]], np.uint8)
    m = hard_metrics(pred, truth, 2)
    # class 1: TP 3, FP 2, FN 1; class 0: TP 6, FP 1, FN 2
    assert m["dice"] == pytest.approx((12 / 15, 6 / 9))
    assert m["iou"] == pytest.approx((6 / 9, 3 / 6))
    assert m["foreground_dice"] == pytest.approx(6 / 9) and m["foreground_iou"] == pytest.approx(3 / 6)
    assert m["precision"] == pytest.approx(3 / 5) and m["recall"] == pytest.approx(3 / 4)


def test_hard_metrics_multi_class_by_hand():
    truth = np.array([[0, 1, 2], [2, 2, 1]], np.uint8)
    pred = np.array([[0, 2, 2], [2, 1, 1]], np.uint8)
    m = hard_metrics(pred, truth, 3)
    # class 0: TP 1; class 1: TP 1, FP 1, FN 1; class 2: TP 2, FP 1, FN 1
    assert m["dice"] == pytest.approx((1.0, 2 / 4, 4 / 6))
    assert m["iou"] == pytest.approx((1.0, 1 / 3, 2 / 4))
    # Precision/recall pool every class >= 1: all five defect pixels are found, whatever their class.
    assert m["precision"] == 1.0 and m["recall"] == 1.0
    # Dice/IoU (foreground) average the foreground classes present: (2/4 + 4/6) / 2, (1/3 + 2/4) / 2.
    assert m["foreground_dice"] == pytest.approx(7 / 12) and m["foreground_iou"] == pytest.approx(5 / 12)


def test_foreground_dice_averages_only_the_classes_present():
    truth = np.array([[0, 1, 1, 0]], np.uint8)
    pred = np.array([[0, 1, 0, 0]], np.uint8)
    m = hard_metrics(pred, truth, 4)  # classes 2 and 3 are in neither mask: n/a, never a vacuous 1.0
    assert m["dice"] == pytest.approx((4 / 5, 2 / 3, math.nan, math.nan), nan_ok=True)
    assert m["foreground_dice"] == pytest.approx(2 / 3) and m["foreground_iou"] == pytest.approx(1 / 2)


@pytest.mark.parametrize(
    ("truth", "pred", "expected"),
    [
        # Nothing to find, nothing found: the background's ratios 1, every foreground one n/a (NaN).
        ([[0, 0], [0, 0]], [[0, 0], [0, 0]],
         {"dice": (1.0, math.nan), "iou": (1.0, math.nan), "foreground_dice": math.nan, "foreground_iou": math.nan,
          "precision": math.nan, "recall": math.nan}),
        # Nothing to find, two false alarms: precision 0/2, recall 0/0 n/a (Metrics Reloaded: undefined for an
        # empty reference), Dice 0.
        ([[0, 0], [0, 0]], [[1, 0], [0, 1]],
         {"dice": (4 / 6, 0.0), "iou": (2 / 4, 0.0), "foreground_dice": 0.0, "precision": 0.0,
          "recall": math.nan}),
        # One defect pixel, nothing predicted: precision 0/0 n/a (never a vacuous 1), recall 0/1.
        ([[0, 1], [0, 0]], [[0, 0], [0, 0]],
         {"dice": (6 / 7, 0.0), "iou": (3 / 4, 0.0), "foreground_dice": 0.0, "precision": math.nan,
          "recall": 0.0}),
    ],
)
def test_empty_mask_conventions(truth, pred, expected):
    m = hard_metrics(np.array(pred, np.uint8), np.array(truth, np.uint8), 2)
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, nan_ok=True), key


# --- per image ----------------------------------------------------------------------------------------


def make_result(p1, roi: Roi, image_size: tuple[int, int]) -> InferenceResult:
    probabilities = two_class(p1)
    return InferenceResult(probabilities, probabilities.argmax(axis=-1).astype(np.uint8), roi, image_size)


def test_argmax_at_roi_resizes_probabilities_linearly():
    result = make_result([[0.9, 0.2], [0.6, 0.1]], Roi(0, 0, 4, 4), (4, 4))
    # Upscaling 2 -> 4 samples at -0.25, 0.25, 0.75, 1.25 (clamped): p1 rows
    # [.9 .725 .375 .2], [.825 .6625 .3375 .175], [.675 .5375 .2625 .125], [.6 .475 .225 .1]
    expected = [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0]]
    np.testing.assert_array_equal(argmax_at_roi(result), expected)
    three = InferenceResult(np.dstack([result.probabilities, np.zeros((2, 2), np.float32)]), result.argmax,
                            result.roi, result.image_size)
    np.testing.assert_array_equal(argmax_at_roi(three), expected)
    same_size = make_result([[0.9, 0.2], [0.6, 0.1]], Roi(3, 3, 5, 5), (8, 8))
    assert argmax_at_roi(same_size) is same_size.argmax


def test_image_metrics_crop_the_full_mask_to_the_roi():
    p1 = np.array([[0.9, 0.2, 0.7], [0.6, 0.1, 0.4]])
    result = make_result(p1, Roi(2, 1, 5, 3), (7, 4))  # ROI 3x2 = model resolution: no resizing anywhere
    full = np.full((4, 7), 255, np.uint8)  # outside the ROI everything is "defect": must not count
    full[1:3, 2:5] = [[255, 0, 0], [255, 0, 255]]
    np.testing.assert_array_equal(truth_at_roi(result, full), full[1:3, 2:5])
    m = image_metrics(result, full)
    dice, iou = original_script_dice(result.probabilities, full[1:3, 2:5])
    assert m.soft_dice == pytest.approx(dice, rel=1e-6) and m.soft_iou == pytest.approx(iou, rel=1e-6)
    # argmax [[1,0,1],[1,0,0]] vs truth [[1,0,0],[1,0,1]]: TP 2, FP 1, FN 1; background TP 2, FP 1, FN 1
    assert m.dice == pytest.approx((4 / 6, 4 / 6)) and m.iou == pytest.approx((2 / 4, 2 / 4))
    assert m.precision == pytest.approx(2 / 3) and m.recall == pytest.approx(2 / 3)


def test_mask_of_the_wrong_size_names_the_file():
    result = make_result([[0.9]], Roi(0, 0, 1, 1), (7, 4))
    with pytest.raises(SegScopeError) as info:
        image_metrics(result, np.zeros((5, 7), np.uint8), "data/1/mask.png")
    assert str(info.value) == ("data/1/mask.png: mask is 7x5 but the image is 7x4; save the mask at the "
                                "image's size, one value a pixel")


# --- tensor comparison --------------------------------------------------------------------------------


def test_compare_tensors_by_hand():
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([1.0, 2.0, 3.0, 5.0], np.float32)
    m = compare_tensors(a.reshape(2, 2), b.reshape(2, 2))
    eps = 1e-7
    p = [(x + eps) / (10 + 4 * eps) for x in (1.0, 2.0, 3.0, 4.0)]
    q = [(x + eps) / (11 + 4 * eps) for x in (1.0, 2.0, 3.0, 5.0)]
    expected = {
        "cosine_similarity": 34 / math.sqrt(30 * 39),
        "relative_euclidean_distance": 1 / math.sqrt(30),
        "max_absolute_error": 1.0,
        "mean_absolute_error": 0.25,
        "root_mean_square_error": 0.5,
        "max_relative_error": 1 / (4 + eps),
        "mean_relative_error": 1 / (4 + eps) / 4,
        "cumulative_relative_error": 0.1,
        "kl_divergence": sum(pi * math.log(pi / qi) for pi, qi in zip(p, q)),
        "std_reference": math.sqrt(1.25),
        "std_candidate": math.sqrt((1.75**2 + 0.75**2 + 0.25**2 + 2.25**2) / 4),
    }
    assert m.keys() == expected.keys()
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert expected["kl_divergence"] > 0


def test_compare_identical_and_negative_tensors():
    a = np.array([[-2.0, 0.5], [1.0, 3.0]])
    m = compare_tensors(a, a.copy())
    assert m["cosine_similarity"] == pytest.approx(1.0)
    for key in ("relative_euclidean_distance", "max_absolute_error", "mean_absolute_error",
                "root_mean_square_error", "max_relative_error", "mean_relative_error",
                "cumulative_relative_error", "kl_divergence"):
        assert m[key] == pytest.approx(0.0, abs=1e-12), key
    flipped = compare_tensors(a, -a)
    assert flipped["cosine_similarity"] == pytest.approx(-1.0)
    assert flipped["relative_euclidean_distance"] == pytest.approx(2.0)
    assert flipped["kl_divergence"] > 0 and math.isfinite(flipped["kl_divergence"])


def test_compare_tensors_shape_mismatch():
    with pytest.raises(SegScopeError, match=r"cannot compare tensors of shapes \(2, 2\) and \(4,\)"):
        compare_tensors(np.zeros((2, 2)), np.zeros(4))


def test_histogram_counts_exactly_like_bincount_on_crops_and_past_float32_precision():
    from segscope.core.dataset.masks import histogram

    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (300, 411), dtype=np.uint8)
    crop = image[17:250, 33:400]  # not contiguous: rows of a larger array
    for values in (image, crop, image[5], np.zeros((0, 3), np.uint8)):
        np.testing.assert_array_equal(histogram(values), np.bincount(values.ravel(), minlength=256))
    # 2**24 + 1 equal values: a float32 count alone would round to 2**24 (or 2**24 + 2).
    big = np.full(((1 << 24) + 1,), 7, np.uint8)
    counts = histogram(big)
    assert counts[7] == (1 << 24) + 1 and counts.sum() == counts[7]


def test_hard_metrics_count_pairs_like_a_confusion_matrix_by_hand():
    truth = np.array([[0, 0, 1, 1, 2], [2, 2, 0, 1, 1]], np.uint8)
    prediction = np.array([[0, 1, 1, 1, 2], [0, 2, 0, 0, 1]], np.uint8)
    hard = hard_metrics(prediction, truth, 3)
    # class 0: tp 2 (cols 0 row0, col2 row1), fp 2 (truth 2->0, truth 1->0), fn 1 (truth 0->1)
    # class 1: tp 3, fp 1, fn 1; class 2: tp 2, fp 0, fn 1
    assert hard["dice"] == pytest.approx((4 / 7, 6 / 8, 4 / 5))
    assert hard["iou"] == pytest.approx((2 / 5, 3 / 5, 2 / 3))
