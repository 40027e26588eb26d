"""The QA metrics against the reference packages themselves, on the real crack and tile masks of
../shared/data (skipped when absent): DeepMind's surface-distance for HD95/NSD, scikit-image's skeletonize for
clDice, SciPy's labelling for the defects, and Guo et al.'s binning loop for ECE."""

from __future__ import annotations

import itertools
import math

import cv2
import numpy as np
import pytest
from scipy import ndimage
from skimage.morphology import skeletonize

from segscope.core.quality.calibration import Reliability
from segscope.core.quality.defects import match_defects
from segscope.core.quality.scoring import image_quality
from segscope.core.quality.spec import MetricSpec
from segscope.core.quality.surface import robust_hausdorff, surface_dice, surface_distances
from segscope.core.quality.topology import cldice
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi

TOLERANCES = (0.0, 1.0, 2.0, 3.5)
#: The reference package imports SciPy's deprecated `ndimage.filters` / `ndimage.morphology` namespaces.
pytestmark = pytest.mark.filterwarnings("ignore:Please import:DeprecationWarning")


@pytest.fixture(scope="module")
def deepmind():
    """DeepMind's surface-distance 0.1, a test-only dependency. Its PyPI release computes `np.Inf` for an
    empty mask, an alias numpy 2 removed: the shim puts the alias back for these tests only."""
    with pytest.MonkeyPatch.context() as patch:
        if not hasattr(np, "Inf"):
            patch.setattr(np, "Inf", np.inf, raising=False)
        import surface_distance

        yield surface_distance


def _read(path):
    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED)


@pytest.fixture(scope="module")
def mask_pairs(shared_data):
    """(name, truth, prediction) bool pairs: each real mask against itself shifted, dilated, eroded, against
    another image's mask of the same size, and against nothing."""
    masks = {f"{folder.parent.name}/{folder.name}": _read(folder / "mask.png") > 127
             for folder in sorted(shared_data.glob("*/*")) if (folder / "mask.png").is_file()}
    kernel = np.ones((3, 3), np.uint8)
    pairs = []
    for name, truth in masks.items():
        shifted = np.zeros_like(truth)
        shifted[3:, :-2] = truth[:-3, 2:]
        pairs += [(f"{name} shifted", truth, shifted),
                  (f"{name} dilated", truth, cv2.dilate(truth.view(np.uint8), kernel).astype(bool)),
                  (f"{name} eroded", truth, cv2.erode(truth.view(np.uint8), kernel).astype(bool)),
                  (f"{name} vs nothing", truth, np.zeros_like(truth))]
    pairs += [(f"{a} vs {b}", masks[a], masks[b]) for a, b in itertools.combinations(masks, 2)
              if a.startswith("pv") and b.startswith("pv")][:4]
    return pairs


def test_surface_distances_hd95_and_nsd_equal_deepmind(deepmind, mask_pairs):
    for name, truth, prediction in mask_pairs:
        reference = deepmind.compute_surface_distances(truth, prediction, (1.0, 1.0))
        ours = surface_distances(truth, prediction)
        for key, value in (("distances_gt_to_pred", ours.truth_to_prediction),
                           ("distances_pred_to_gt", ours.prediction_to_truth),
                           ("surfel_areas_gt", ours.truth_lengths), ("surfel_areas_pred", ours.prediction_lengths)):
            np.testing.assert_array_equal(value, reference[key], err_msg=f"{name}: {key}")
        if not truth.any() and not prediction.any():
            continue  # both empty: n/a (NaN) where the package gives inf and NaN
        assert robust_hausdorff(ours, 95) == deepmind.compute_robust_hausdorff(reference, 95), name
        for tolerance in TOLERANCES:
            assert surface_dice(ours, tolerance) == pytest.approx(
                deepmind.compute_surface_dice_at_tolerance(reference, tolerance), rel=1e-12), (name, tolerance)


def _reference_cldice(truth, prediction):
    """clDice as Shit et al. define it, on skimage's skeletons of the whole masks."""
    s_pred, s_truth = skeletonize(prediction), skeletonize(truth)
    t_prec = (s_pred & truth).sum() / s_pred.sum()
    t_sens = (s_truth & prediction).sum() / s_truth.sum()
    return 0.0 if t_prec + t_sens == 0 else 2 * t_prec * t_sens / (t_prec + t_sens)


def test_cldice_equals_skeletonize_on_whole_masks(mask_pairs):
    for name, truth, prediction in mask_pairs:
        if truth.any() and prediction.any():
            assert cldice(truth, prediction) == pytest.approx(_reference_cldice(truth, prediction), rel=1e-12), name


def _reference_defects(truth, prediction, min_area):
    """8-connected components by SciPy, every IoU from pixel sets, pairs >= 0.5 (unique above 0.5); an unmatched
    truth at least half inside a prediction that holds another truth so is merged (and missed), and that prediction
    a merge's host; an unmatched prediction at least half inside one truth, and no host, is a fragment when that
    truth has another piece (its match, or another such prediction): a lone piece is a false alarm."""
    def parts(mask):
        labels, count = ndimage.label(mask, structure=np.ones((3, 3)))
        return [labels == k for k in range(1, count + 1) if (labels == k).sum() >= min_area]

    truths, preds = parts(truth), parts(prediction)
    matched = {(i, j) for i, t in enumerate(truths) for j, p in enumerate(preds)
               if (t & p).sum() / (t | p).sum() >= 0.5}
    tp = len(matched)
    hosts = {}
    for i, t in enumerate(truths):
        shares = [(t & p).sum() / t.sum() for p in preds]
        if shares and max(shares) >= 0.5:
            hosts[i] = int(np.argmax(shares))
    held = [list(hosts.values()).count(host) for host in hosts.values()]
    merged_into = {i: host for (i, host), n in zip(hosts.items(), held) if n >= 2}
    merged = sum(1 for i in merged_into if all(i != a for a, _ in matched))
    merge_hosts = set(merged_into.values())
    homes = {}  # unmatched prediction (no host) -> the truth it lies at least half in
    for j, p in enumerate(preds):
        if any(j == b for _, b in matched) or j in merge_hosts:
            continue
        shares = [(p & t).sum() / p.sum() for t in truths]
        if shares and max(shares) >= 0.5:
            homes[j] = int(np.argmax(shares))
    pieces = [sum(1 for a, _ in matched if a == i) + list(homes.values()).count(i) for i in range(len(truths))]
    split = sum(1 for i in homes.values() if pieces[i] >= 2)
    return tp, len(preds) - tp - split, len(truths) - tp, split, merged


@pytest.mark.parametrize("min_area", [1, 20])
def test_defect_counts_equal_a_scipy_reference(mask_pairs, min_area):
    for name, truth, prediction in mask_pairs[::3]:
        match = match_defects(truth, prediction, min_area)
        assert (match.tp, match.fp, match.fn, match.split, match.merged) == _reference_defects(
            truth, prediction, min_area), name


def _reference_ece(probabilities, labels, bins=15):
    """Guo et al.'s `_ECELoss`, written as their loop."""
    confidences = probabilities.max(axis=-1).ravel().astype(np.float64)
    accuracies = (probabilities.argmax(axis=-1) == labels).ravel()
    edges = np.linspace(0, 1, bins + 1)
    ece = 0.0
    for lower, upper in zip(edges[:-1], edges[1:]):
        in_bin = (confidences > lower) & (confidences <= upper)
        if in_bin.mean() > 0:
            ece += abs(confidences[in_bin].mean() - accuracies[in_bin].mean()) * in_bin.mean()
    return ece


def test_ece_equals_guo_et_al_on_blurred_real_masks(mask_pairs):
    for name, truth, _ in mask_pairs[:12:4]:
        p1 = cv2.GaussianBlur(truth.astype(np.float32) * 0.8 + 0.1, (0, 0), 3)
        probabilities = np.stack([1 - p1, p1], axis=-1)
        labels = truth.astype(np.uint8)
        assert Reliability.of(probabilities, labels).ece() == pytest.approx(
            _reference_ece(probabilities, labels), rel=1e-9, abs=1e-12), name


def test_per_class_values_on_the_five_class_pv_labels(deepmind, shared_data):
    truth = _read(shared_data / "pv_el_cells" / "1" / "label_multiclass.png")
    predicted = _read(shared_data / "pv_el_cells" / "4" / "label_multiclass.png")
    probabilities = np.full((*predicted.shape, 5), 0.05, np.float32)
    np.put_along_axis(probabilities, predicted[..., None].astype(np.intp), 0.8, axis=-1)
    # The ROI is the whole 400x400 cell; the model's output is at the same size.
    result = InferenceResult(probabilities, predicted, Roi(0, 0, 400, 400), (400, 400))
    quality = image_quality(MetricSpec.parse("hd95,nsd@1,cldice"), result, truth)
    for c in range(1, 5):
        reference = deepmind.compute_surface_distances(truth == c, predicted == c, (1.0, 1.0))
        expected_hd = deepmind.compute_robust_hausdorff(reference, 95)
        assert quality.per_class[c]["hd95"] == expected_hd, c
        assert quality.per_class[c]["nsd"] == pytest.approx(
            deepmind.compute_surface_dice_at_tolerance(reference, 1.0), rel=1e-12), c
        assert math.isfinite(quality.per_class[c]["cldice"])
    present = [c for c in range(1, 5) if (truth == c).any() or (predicted == c).any()]
    assert quality.values["hd95"] == pytest.approx(np.mean([quality.per_class[c]["hd95"] for c in present]))
