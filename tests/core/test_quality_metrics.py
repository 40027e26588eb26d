"""The QA metrics (core/quality) against small cases computed by hand, including every empty-mask case."""

from __future__ import annotations

import math

import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.metrics.scores import ImageMetrics
from segscope.core.quality.calibration import Reliability
from segscope.core.quality.defects import match_defects
from segscope.core.quality.options import line_text
from segscope.core.quality.scoring import QualitySummary, image_quality
from segscope.core.quality.spec import MetricSpec
from segscope.core.quality.surface import robust_hausdorff, surface_dice, surface_distances
from segscope.core.quality.topology import cldice
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi

DIAGONAL = math.sqrt(2) / 2


def boxes(shape, *spans):
    mask = np.zeros(shape, bool)
    for rows, cols in spans:
        mask[rows, cols] = True
    return mask


# --- HD95 and NSD -------------------------------------------------------------------------------------------


def test_one_pixel_contour_is_a_diamond_of_four_corner_cuts():
    pixel = boxes((5, 5), (2, 2))
    distances = surface_distances(pixel, pixel)
    np.testing.assert_allclose(distances.truth_lengths, [DIAGONAL] * 4)
    assert robust_hausdorff(distances) == 0.0 and surface_dice(distances, 0) == 1.0


def test_two_squares_three_pixels_apart_by_hand():
    # Each 2x2 square's contour: 4 corner cuts (√2/2) and 4 unit edges through 8 corners. The truth's corners
    # lie 1, 2 and 3 columns from the prediction's nearest ones: at 1 a cut, an edge, a cut; at 2 two edges;
    # at 3 a cut, an edge, a cut (and the same the other way).
    truth = boxes((4, 8), (slice(1, 3), slice(1, 3)))
    prediction = boxes((4, 8), (slice(1, 3), slice(4, 6)))
    distances = surface_distances(truth, prediction)
    np.testing.assert_allclose(distances.truth_to_prediction, [1, 1, 1, 2, 2, 3, 3, 3])
    np.testing.assert_allclose(distances.prediction_lengths, [DIAGONAL, DIAGONAL, 1, 1, 1, DIAGONAL, DIAGONAL, 1])
    total = 4 + 4 * DIAGONAL
    # Length-weighted share of the truth's contour within 2 px: (2 cuts + 3 edges) / total = 0.646 < 0.95,
    # so the 95th percentile is the last distance, 3, in both directions.
    assert robust_hausdorff(distances, 95) == 3.0
    assert surface_dice(distances, 2) == pytest.approx((3 + 2 * DIAGONAL) / total)
    assert surface_dice(distances, 1) == pytest.approx((1 + 2 * DIAGONAL) / total)
    assert surface_dice(distances, 0.5) == 0.0


def test_hd95_ignores_the_last_five_percent_of_the_contour():
    # A 20x20 truth; the prediction adds a 1-pixel spike 6 px long. The prediction's contour: 4·19 edges and
    # 4 cuts of the square, its two corners where the spike joins now cuts (−2 + √2), 2·5 spike edges and a
    # tip of 2 cuts: 84 + 6·√2/2 + ... = 89.657. Its corners 4, 5 and 6 px out weigh 2 + 2 + √2 = 5.41
    # (6.0 %), those 5 and 6 px out 3.41 (3.8 %): the 95th percentile is 4, the maximum 6.
    truth = boxes((40, 40), (slice(10, 30), slice(10, 30)))
    prediction = truth.copy()
    prediction[19, 30:36] = True
    distances = surface_distances(truth, prediction)
    assert distances.prediction_lengths.sum() == pytest.approx(76 + 4 * DIAGONAL - 2 + 2 * DIAGONAL + 10
                                                               + 2 * DIAGONAL)
    assert robust_hausdorff(distances, 100) == 6.0
    assert robust_hausdorff(distances, 95) == 4.0


@pytest.mark.parametrize(("truth_empty", "prediction_empty", "hd95", "nsd"),
                         [(True, True, math.nan, math.nan), (True, False, math.inf, 0.0),
                          (False, True, math.inf, 0.0)])
def test_empty_masks_have_defined_boundary_values(truth_empty, prediction_empty, hd95, nsd):
    square = boxes((6, 6), (slice(1, 4), slice(1, 4)))
    empty = np.zeros((6, 6), bool)
    distances = surface_distances(empty if truth_empty else square, empty if prediction_empty else square)
    # Neither has the class: n/a (NaN); only one: no contour to reach, infinitely far, none within T.
    np.testing.assert_equal([robust_hausdorff(distances), surface_dice(distances, 2)], [hd95, nsd])


def test_a_mask_touching_the_image_border_has_a_contour_there():
    full = np.ones((3, 4), bool)
    distances = surface_distances(full, full)
    # Outside the image is background: the rim is a contour of 2·(2 + 3) unit edges and 4 corner cuts.
    assert distances.truth_lengths.sum() == pytest.approx(2 * (2 + 3) + 4 * DIAGONAL)


# --- clDice --------------------------------------------------------------------------------------------------


def test_cldice_of_a_crack_broken_in_two():
    truth = boxes((9, 14), (4, slice(2, 12)))  # a 1-px crack of 10 pixels: its own skeleton
    prediction = truth.copy()
    prediction[4, 6:8] = False  # broken: 8 pixels in two pieces
    # Tprec = |S(P) ∩ G| / |S(P)| = 8/8; Tsens = |S(G) ∩ P| / |S(G)| = 8/10.
    assert cldice(truth, prediction) == pytest.approx(2 * 1.0 * 0.8 / 1.8)


def test_cldice_of_a_parallel_crack_is_zero_and_of_itself_one():
    truth = boxes((9, 14), (2, slice(2, 12)))
    assert cldice(truth, boxes((9, 14), (5, slice(2, 12)))) == 0.0
    assert cldice(truth, truth) == 1.0


def test_cldice_of_empty_masks():
    crack = boxes((5, 5), (2, slice(0, 5)))
    empty = np.zeros((5, 5), bool)
    assert math.isnan(cldice(empty, empty))
    assert cldice(crack, empty) == 0.0 and cldice(empty, crack) == 0.0


# --- defects -------------------------------------------------------------------------------------------------


def test_defects_matched_one_to_one_by_iou_by_hand():
    truth = boxes((12, 20), (slice(1, 4), slice(1, 4)), (slice(7, 9), slice(10, 12)))
    prediction = boxes((12, 20), (slice(1, 4), slice(1, 4)),  # the 3x3 defect exactly: TP
                       (slice(7, 9), slice(11, 13)),  # the 2x2 one shifted 1 px: IoU 2/6 < 0.5, so FN + FP
                       (10, 18))  # a 1-pixel speck: FP
    match = match_defects(truth, prediction)
    assert (match.tp, match.fp, match.fn, match.split, match.merged) == (1, 2, 1, 0, 0)  # half inside: not mostly
    scores = match.scores()
    assert scores["defect_f1"] == pytest.approx(2 / 5)
    assert scores["defect_precision"] == pytest.approx(1 / 3) and scores["defect_recall"] == 0.5
    shifted = next(d for d in match.defects if d.source == "truth" and d.area == 4)
    assert shifted.outcome == "FN" and shifted.iou == pytest.approx(2 / 6) and shifted.box == (10, 7, 12, 9)
    # Specks below --min-defect-area are not defects in either mask.
    assert (match_defects(truth, prediction, min_area=2).fp, match_defects(truth, prediction, min_area=5).fn) == (1, 0)


def test_defects_are_8_connected_and_match_at_iou_one_half():
    diagonal = boxes((6, 6), (1, 1), (2, 2))  # two pixels touching at a corner: one defect
    assert [d.area for d in match_defects(diagonal, diagonal).defects] == [2, 2]
    truth = boxes((6, 6), (slice(1, 3), slice(1, 3)))
    half = boxes((6, 6), (slice(1, 3), 1))  # IoU 2/4 = 0.5: a match
    match = match_defects(truth, half)
    assert (match.tp, match.fp, match.fn) == (1, 0, 0)
    assert all(d.outcome == "TP" and d.iou == 0.5 for d in match.defects)


def test_no_defect_anywhere_is_n_a_and_only_false_alarms_score_zero():
    empty = np.zeros((5, 5), bool)
    scores = match_defects(empty, empty).scores()
    for ratio in ("defect_f1", "defect_precision", "defect_recall"):  # nothing to score: n/a, never 1.0
        assert math.isnan(scores.pop(ratio))
    assert scores == {"defect_tp": 0, "defect_fp": 0, "defect_fn": 0, "defect_split": 0, "defect_merged": 0}
    speck = boxes((5, 5), (2, 2))
    alarm = match_defects(empty, speck).scores()  # one false alarm, nothing to find: recall 0/0 is n/a
    assert (alarm["defect_f1"], alarm["defect_precision"]) == (0.0, 0.0) and math.isnan(alarm["defect_recall"])
    missed = match_defects(speck, empty).scores()  # one miss, nothing predicted: precision 0/0 is n/a
    assert (missed["defect_f1"], missed["defect_recall"]) == (0.0, 0.0) and math.isnan(missed["defect_precision"])


def test_a_lone_undersized_detection_inside_a_defect_is_a_false_alarm_not_a_fragment():
    """A 1 x 20 crack and one 1 x 3 piece on it (IoU 3/20): the crack is missed and the piece, alone on it, is what
    plain matching makes it, a false alarm; two such pieces are the crack predicted in pieces: fragments."""
    truth = boxes((5, 30), (2, slice(0, 20)))
    lone = match_defects(truth, boxes((5, 30), (2, slice(5, 8))))
    assert (lone.tp, lone.fp, lone.fn, lone.split, lone.merged) == (0, 1, 1, 0, 0)
    two = match_defects(truth, boxes((5, 30), (2, slice(5, 8)), (2, slice(12, 15))))
    assert (two.tp, two.fp, two.fn, two.split, two.merged) == (0, 0, 1, 2, 0)


def test_half_inside_is_mostly_inside():
    """">= 50 %": a 1 x 10 crack found by a 6-pixel piece (IoU 0.6) and a 2-pixel piece with 1 pixel on it (50 %)."""
    truth = boxes((6, 12), (2, slice(0, 10)))
    prediction = boxes((6, 12), (2, slice(0, 6)), (2, 8), (3, 8))
    match = match_defects(truth, prediction)
    assert (match.tp, match.fp, match.fn, match.split) == (1, 0, 0, 1)
    # A true defect half inside a blob that holds another one wholly is merged.
    truths = boxes((6, 14), (slice(0, 2), slice(0, 4)), (slice(0, 2), slice(8, 10)))  # 8 px and 4 px
    blob = boxes((6, 14), (slice(0, 2), slice(2, 10)))  # 4 of the first's 8 px, all of the second's 4
    merge = match_defects(truths, blob, threshold=0.9)
    assert (merge.tp, merge.fn, merge.merged) == (0, 2, 2)


def test_a_merges_host_is_never_also_a_fragment():
    """A 4 x 10 defect and a 2 x 2 one, two columns apart; one prediction covers 28 px of the first (70 % of it,
    78 % of the prediction's 36 px), bridges the gap and covers all of the second. IoU with the first 28/48."""
    truth = boxes((6, 16), (slice(0, 4), slice(0, 10)), (slice(0, 2), slice(12, 14)))
    prediction = boxes((6, 16), (slice(0, 4), slice(3, 10)), (slice(0, 2), slice(10, 14)))
    loose = match_defects(truth, prediction)  # IoU 0.58 >= 0.5: the first found, the second merged into it
    assert (loose.tp, loose.fp, loose.fn, loose.split, loose.merged) == (1, 0, 1, 0, 1)
    strict = match_defects(truth, prediction, threshold=0.8)  # unmatched: one false alarm holding two merges
    assert (strict.tp, strict.fp, strict.fn, strict.split, strict.merged) == (0, 1, 2, 0, 2)
    assert [d.outcome for d in strict.defects if d.source == "prediction"] == ["FP"]


def test_fragments_of_a_found_crack_are_not_false_alarms():
    """The reviewer's demo 001: pieces of found cracks counted as false alarms. A 1 x 20 crack predicted as a
    1 x 10 piece (IoU 10/20 = 0.5: TP), two 1 x 3 pieces on it (wholly inside: fragments) and a 4-pixel piece at
    its end (1 of 4 pixels inside: not mostly, a false alarm); a lone speck elsewhere is a false alarm."""
    truth = boxes((8, 40), (2, slice(0, 20)))
    prediction = boxes((8, 40), (2, slice(0, 10)), (2, slice(11, 14)), (2, slice(15, 18)), (5, 30))
    prediction[2, 19:21] = True  # column 19 inside, 20 outside, and two more outside below
    prediction[3, 20:22] = True
    match = match_defects(truth, prediction)
    assert (match.tp, match.fp, match.fn, match.split, match.merged) == (1, 2, 0, 2, 0)
    assert sorted(d.outcome for d in match.defects if d.source == "prediction") == ["FP", "FP", "TP", "split", "split"]
    scores = match.scores()  # F1 2TP / (2TP + FP + FN) = 2 / 4, precision 1 / 3: fragments count nowhere
    assert (scores["defect_f1"], scores["defect_precision"], scores["defect_recall"]) == (0.5, 1 / 3, 1.0)
    # At --defect-iou 0.6 the 10-pixel piece no longer matches: the crack is missed, the piece is a fragment.
    strict = match_defects(truth, prediction, threshold=0.6)
    assert (strict.tp, strict.fp, strict.fn, strict.split) == (0, 2, 1, 3)


def test_two_defects_predicted_as_one_are_a_match_and_a_merge():
    """Two true 3x3 squares one column apart; the prediction covers both and the gap (3x7 = 21 px): IoU with each
    is 9/21 < 0.5 at the default threshold, so both are missed, one predicted blob is a false alarm, and the two
    misses are merges (each lies wholly inside the one blob that holds both)."""
    truth = boxes((6, 10), (slice(1, 4), slice(1, 4)), (slice(1, 4), slice(5, 8)))
    prediction = boxes((6, 10), (slice(1, 4), slice(1, 8)))
    match = match_defects(truth, prediction)
    assert (match.tp, match.fp, match.fn, match.merged, match.split) == (0, 1, 2, 2, 0)
    # At IoU 0.4 the blob matches the first square (9/21 = 0.43, ties broken by component number); the other is
    # a miss by merge.
    loose = match_defects(truth, prediction, threshold=0.4)
    assert (loose.tp, loose.fp, loose.fn, loose.merged) == (1, 0, 1, 1)
    # A blob holding one defect only (a bloated prediction) merges nothing: a plain miss and a false alarm.
    bloated = match_defects(boxes((6, 10), (2, 2)), prediction)
    assert (bloated.fn, bloated.merged, bloated.fp) == (1, 0, 1)


# --- ECE -----------------------------------------------------------------------------------------------------


def test_ece_by_hand():
    p1 = np.array([[0.9, 0.78, 0.3, 0.55]], np.float32)
    probabilities = np.stack([1 - p1, p1], axis=-1)
    labels = np.array([[1, 0, 0, 1]])
    # Top labels 1, 1, 0, 1 with confidences 0.9, 0.78, 0.7, 0.55, each alone in its bin; right, wrong,
    # right, right: ECE = (0.1 + 0.78 + 0.3 + 0.45) / 4.
    reliability = Reliability.of(probabilities, labels)
    assert reliability.ece() == pytest.approx(1.63 / 4, abs=1e-6)
    rows = reliability.bins()
    assert [b for b, row in enumerate(rows) if row["pixels"]] == [8, 10, 11, 13]
    assert rows[13]["lower"] == pytest.approx(13 / 15) and rows[13]["accuracy"] == 1.0
    assert math.isnan(rows[0]["confidence"])


def test_ece_pools_pixels_of_a_bin_and_images_add_up():
    p1 = np.array([[0.9, 0.92]], np.float32)  # one bin: accuracy 0.5 against a mean confidence of 0.91
    probabilities = np.stack([1 - p1, p1], axis=-1)
    first = Reliability.of(probabilities, np.array([[1, 0]]))
    assert first.ece() == pytest.approx(0.41, abs=1e-6)
    both = first + Reliability.of(probabilities, np.array([[1, 1]]))
    assert both.pixels == 4 and both.ece() == pytest.approx(abs(0.75 - 0.91), abs=1e-6)
    assert math.isnan(Reliability.empty().ece())


# --- the chosen metrics per image ----------------------------------------------------------------------------


def test_metric_list_parsing():
    spec = MetricSpec.parse("ECE, nsd@3,hd95")
    assert spec.names == ("hd95", "nsd", "ece") and spec.nsd_tolerance == 3.0
    assert MetricSpec.parse("all").names == ("hd95", "nsd", "cldice", "defect_f1", "ece")
    assert MetricSpec.parse("defects").keys() == ["defect_f1", "defect_precision", "defect_recall",
                                                  "defect_tp", "defect_fp", "defect_fn", "defect_split",
                                                  "defect_merged"]
    assert MetricSpec.parse("ece").keys() == ["ece", "ece_foreground", "brier"] == MetricSpec.parse("brier").keys()
    assert MetricSpec.parse("defect_f1", defect_iou=0.3).defect_iou == 0.3
    for iou in (0.0, 1.5):
        with pytest.raises(SegScopeError, match="--defect-iou: must be in"):
            MetricSpec.parse("defect_f1", defect_iou=iou)
    assert not MetricSpec.parse("")
    for bad, named in (("hd99", "'hd99'"), ("nsd@x", "nsd@x"), ("nsd@-1", "nsd@-1")):
        with pytest.raises(SegScopeError, match=named):
            MetricSpec.parse(bad)
    with pytest.raises(SegScopeError, match="--min-defect-area"):
        MetricSpec.parse("defect_f1", min_defect_area=0)


def _result(prediction_labels: np.ndarray, num_classes: int) -> InferenceResult:
    """A confident result whose argmax is `prediction_labels`, at ROI size, the ROI at (5, 3) in a larger slide."""
    probabilities = np.full((*prediction_labels.shape, num_classes), 0.1 / (num_classes - 1), np.float32)
    np.put_along_axis(probabilities, prediction_labels[..., None].astype(np.intp), 0.9, axis=-1)
    height, width = prediction_labels.shape
    return InferenceResult(probabilities, prediction_labels.astype(np.uint8), Roi(5, 3, 5 + width, 3 + height),
                           (width + 10, height + 6))


def test_image_quality_per_foreground_class_on_the_roi():
    truth = np.zeros((10, 12), np.uint8)
    truth[1:4, 1:4] = 1
    truth[6:9, 7:10] = 2
    prediction = truth.copy()
    prediction[6:9, 7:10] = 0  # class 2 missed entirely
    quality = image_quality(MetricSpec.parse("hd95,nsd,defect_f1,ece"), _result(prediction, 3), truth)
    assert quality.per_class[1]["hd95"] == 0.0 and quality.per_class[1]["defect_f1"] == 1.0
    assert quality.per_class[2]["hd95"] == math.inf and quality.per_class[2]["nsd"] == 0.0
    assert quality.per_class[2]["defect_recall"] == 0.0
    # The image: the mean over the classes present (both), the counts summed: 1 of 2 defects found.
    assert quality.values["hd95"] == math.inf and quality.values["nsd"] == 0.5
    assert quality.values["defect_f1"] == 0.5
    assert quality.values["defect_tp"] == 1 and quality.values["defect_fn"] == 1
    # 9 of 120 pixels wrong at confidence 0.9: ECE = |111/120 − 0.9|. The foreground (truth or prediction: the
    # 18 pixels of both squares) holds 9 right and 9 wrong at 0.9: |9/18 − 0.9| = 0.4.
    assert quality.values["ece"] == pytest.approx(abs(111 / 120 - 0.9), abs=1e-6)
    assert quality.values["ece_foreground"] == pytest.approx(0.4, abs=1e-6)
    # Brier per pixel: right (0.9 on the true class, 0.05 on each other) 0.1² + 2·0.05² = 0.015; wrong 0.9² + 0.95²
    # + 0.05² = 1.715: (111·0.015 + 9·1.715) / 120.
    assert quality.values["brier"] == pytest.approx((111 * 0.015 + 9 * 1.715) / 120, rel=1e-6)
    assert set(quality.per_class) == {1, 2} and set(quality.defects) == {1, 2}
    assert quality.diagonal == math.hypot(10, 12)  # the worst HD95 of this ROI
    text = line_text(MetricSpec.parse("hd95,defect_f1"), quality, ("bg", "crack", "scratch"))
    assert text.startswith(", hd95: inf, defect f1: 0.5000 (tp 1 fp 0 fn 1 split 0 merged 0) [crack, hd95: 0.00, ")
    assert "[scratch, hd95: inf, defect f1: 0.0000 (tp 0 fp 0 fn 1 split 0 merged 0)]" in text


def test_a_class_in_neither_mask_is_left_out_of_the_image_value():
    truth = np.zeros((10, 12), np.uint8)
    truth[1:4, 1:4] = 1
    prediction = truth.copy()
    prediction[1, 1] = 0
    quality = image_quality(MetricSpec.parse("nsd@0,cldice,defect_f1"), _result(prediction, 3), truth)
    assert math.isnan(quality.per_class[2]["nsd"]) and math.isnan(quality.per_class[2]["defect_f1"])
    assert quality.values["nsd"] == quality.per_class[1]["nsd"] < 1  # class 2 does not pull the mean
    assert quality.values["defect_f1"] == 1.0 and quality.values["cldice"] == quality.per_class[1]["cldice"]


def _metrics(quality):
    return ImageMetrics(1.0, 1.0, (1.0, 1.0), (1.0, 1.0), 1.0, 1.0, 1.0, 1.0, quality)


def test_quality_summary_pools_defects_and_pixels():
    spec = MetricSpec.parse("defect_f1,ece")
    summary = QualitySummary(spec)
    truth = np.zeros((8, 8), np.uint8)
    truth[2:4, 2:4] = 1
    for prediction in (truth, np.zeros_like(truth), np.zeros_like(truth)):  # perfect, missed, missed
        summary.add(_metrics(image_quality(spec, _result(prediction, 2), truth * 255)))
    summary.add(_metrics(image_quality(spec, _result(truth * 0, 2), truth * 0)))  # nothing anywhere
    summary.add(None)  # an image without a mask counts nowhere
    document = summary.summary()
    assert document["defects"] == {"tp": 1, "fp": 0, "fn": 2, "split": 0, "merged": 0, "f1": pytest.approx(2 / 4),
                                   "precision": 1.0, "recall": pytest.approx(1 / 3)}
    # 256 pixels at confidence 0.9, 8 of them wrong (the two missed squares): |248/256 − 0.9|; the foreground
    # region is the 3 images' squares (12 pixels, 4 right).
    assert document["calibration"]["ece"] == pytest.approx(abs(248 / 256 - 0.9), abs=1e-6)
    assert document["calibration"]["ece_foreground"] == pytest.approx(abs(4 / 12 - 0.9), abs=1e-6)
    assert document["calibration"]["pixels"] == 256 and "bilinear" in document["calibration"]["truth_resampling"]
    assert document["reliability_foreground"]["pixels"] == 12
    assert QualitySummary(MetricSpec()).summary() == {}


# --- the boundary-error picture ------------------------------------------------------------------------------


def test_boundary_errors_mark_only_wrong_boundary_pixels_with_their_distance():
    from segscope.core.quality.boundary import boundary_errors

    truth = boxes((20, 20), (slice(4, 12), slice(4, 12)))
    prediction = boxes((20, 20), (slice(4, 12), slice(4, 15)))  # the right side 3 px too far out
    errors = boundary_errors(truth, prediction)
    # The truth's right column (x = 11) lies 3 px from the prediction's (x = 14), nearer to its ends the
    # prediction's top and bottom rows (y = 4, 11); back, every pixel of x = 14 is 3 px from x = 11. The shared
    # rows are right (0); the prediction's top row beyond x = 11 is 1-3 px from the truth's corner.
    assert errors[5:11, 11].tolist() == pytest.approx([1.0, 2.0, 3.0, 3.0, 2.0, 1.0], rel=0.02)
    assert errors[5:11, 14].tolist() == pytest.approx([3.0] * 6, rel=0.02)
    assert errors[4, 4:11].tolist() == [0.0] * 7 and errors[8, 8] == 0.0 and errors[8, 2] == 0.0
    assert errors[4, 12:15].tolist() == pytest.approx([1.0, 2.0, 3.0], rel=0.02)
    only = boundary_errors(truth, np.zeros_like(truth))
    assert np.isinf(only[4, 4]) and only[8, 8] == 0.0
