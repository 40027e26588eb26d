"""Segmentation metrics and tensor comparison.

Formulas (p = probabilities, y = one-hot ground truth, TP/FP/FN counted per pixel):
- soft Dice (the original script's "dice"): 2·Σ(p·y) / (Σp² + Σy² + 1e-6), over all classes, background
  included, at model resolution; soft IoU = d / (2 − d).
- hard Dice per class: 2·TP / (2·TP + FP + FN); IoU = TP / (TP + FP + FN); NaN ("n/a") when the class is in
  neither the prediction nor the truth (never 1.0: `core.metrics.aggregate` leaves n/a out and counts it).
  Computed on the predicted classes at ROI resolution (the card's decision).
- foreground Dice / IoU: the mean of the per-class values over the foreground classes (≥ 1) present in the
  prediction or the truth (for one foreground class: its Dice); n/a when neither has any foreground.
- foreground precision = TP / (TP + FP), recall = TP / (TP + FN) with every class ≥ 1 as foreground; each n/a
  when its denominator is 0 (precision: nothing predicted; recall: nothing to find, as Metrics Reloaded leaves
  recall undefined for an empty reference), never 1.0; the aggregates leave n/a out and count it.
The QA metrics a user asks for (HD95, NSD, clDice, per-defect F1, ECE) are `core.quality`'s; an image's
values ride along in `ImageMetrics.quality`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ..dataset.masks import BINARY_FOREGROUND, BINARY_THRESHOLD, histogram, mask_to_labels
from ..errors import SegScopeError
from ..result import InferenceResult, decide, decision_map

if TYPE_CHECKING:  # core.quality builds on this module
    from ..quality.spec import ImageQuality

SOFT_DICE_EPS = 1e-6


def soft_dice(probabilities: np.ndarray, mask: np.ndarray) -> float:
    """The original script's soft Dice: `mask` is the ROI crop of the ground truth at any resolution; it is
    resized to the probabilities' (linear for binary masks, then `/255 > 0.5`, as `main.py` did)."""
    return _soft_dice(probabilities, mask_to_labels(mask, probabilities.shape[-1]))


def _soft_dice(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """`soft_dice` of the true classes `labels` (`mask_to_labels` of the mask)."""
    height, width, classes = probabilities.shape
    labels = labels_to_model_scale(labels, height, width, classes)
    p = probabilities.astype(np.float32, copy=False)
    # With the one-hot truth t: sum(p * t) sums each pixel's probability of its true class, sum(t * t) is
    # the pixel count; no one-hot array is made.
    if classes == 2:  # the same sum, 2x faster
        truth_p = np.where(labels == 1, p[..., 1], p[..., 0])
    else:
        truth_p = np.take_along_axis(p, labels[..., None].astype(np.intp), axis=-1)
    inter = float(np.sum(truth_p, dtype=np.float64))
    union = float(np.sum(p * p, dtype=np.float64)) + labels.size
    return 2.0 * inter / (union + SOFT_DICE_EPS)


def labels_at_model_scale(mask: np.ndarray, height: int, width: int, classes: int) -> np.ndarray:
    """The true classes at the model's resolution, as `main.py` made them from its 0/255 masks: the ROI crop of the
    mask resized — for a binary model, its foreground as 0/255 resized bilinearly, then `/255 > 0.5` (a 0/1 mask
    exactly as its 0/255 twin); class indices nearest. Soft Dice, ECE and Brier all read the truth this way."""
    return labels_to_model_scale(mask_to_labels(mask, classes), height, width, classes)


def labels_to_model_scale(labels: np.ndarray, height: int, width: int, classes: int) -> np.ndarray:
    """`labels_at_model_scale` of a mask whose true classes (`mask_to_labels`) are `labels`."""
    if labels.shape == (height, width):
        return labels
    if classes == 2:
        resized = cv2.resize(labels * np.uint8(BINARY_FOREGROUND), (width, height), interpolation=cv2.INTER_LINEAR)
        return (resized > BINARY_THRESHOLD).view(np.uint8)
    return cv2.resize(labels, (width, height), interpolation=cv2.INTER_NEAREST)


def mask_piece_labels(piece: np.ndarray, num_classes: int, foreground: int) -> np.ndarray:
    """Class ids of a piece of a mask whose binary convention (`foreground` 255 or 1) is known; unlike
    `mask_to_labels`, which infers it from the array, this is right for a piece that holds no foreground."""
    if num_classes != 2:
        return piece
    return (piece > (BINARY_THRESHOLD if foreground == BINARY_FOREGROUND else 0)).view(np.uint8)


def iou_from_dice(dice: float) -> float:
    return dice / (2.0 - dice)


@dataclass(frozen=True)
class ImageMetrics:
    soft_dice: float
    soft_iou: float
    dice: tuple[float, ...]  # hard, per class
    iou: tuple[float, ...]
    foreground_dice: float  # NaN: no foreground in either mask (n/a)
    foreground_iou: float
    precision: float
    recall: float
    quality: ImageQuality | None = None  # the QA metrics asked for (None: none were)


def _ratio(numerator: int, denominator: int, empty: float = 1.0) -> float:
    return empty if denominator == 0 else numerator / denominator


def hard_metrics(prediction: np.ndarray, truth: np.ndarray, num_classes: int) -> dict[str, object]:
    """Per-class Dice/IoU and foreground precision/recall of two label maps of the same shape."""
    pairs = num_classes * num_classes
    if pairs <= 256:  # each (truth, prediction) pair as one uint8 code, counted by the fast histogram
        codes = truth.astype(np.uint8) * np.uint8(num_classes) + prediction.astype(np.uint8)
        counts = histogram(codes)[:pairs].reshape(num_classes, num_classes)
    else:
        counts = np.bincount(truth.ravel().astype(np.int64) * num_classes + prediction.ravel(),
                             minlength=pairs).reshape(num_classes, num_classes)
    tp = np.diag(counts)
    fp = counts.sum(axis=0) - tp
    fn = counts.sum(axis=1) - tp
    dice = tuple(_ratio(2 * int(t), 2 * int(t) + int(p) + int(n), math.nan) for t, p, n in zip(tp, fp, fn))
    iou = tuple(_ratio(int(t), int(t) + int(p) + int(n), math.nan) for t, p, n in zip(tp, fp, fn))
    present = [c for c in range(1, num_classes) if tp[c] + fp[c] + fn[c]]  # in the prediction or the truth
    fg_tp = int(counts[1:, 1:].sum())
    fg_fp = int(counts[0, 1:].sum())
    fg_fn = int(counts[1:, 0].sum())
    return {
        "dice": dice, "iou": iou,
        "foreground_dice": float(np.mean([dice[c] for c in present])) if present else math.nan,
        "foreground_iou": float(np.mean([iou[c] for c in present])) if present else math.nan,
        "precision": _ratio(fg_tp, fg_tp + fg_fp, math.nan), "recall": _ratio(fg_tp, fg_tp + fg_fn, math.nan),
    }


def labels_at(probabilities: np.ndarray, size: tuple[int, int], threshold: float | None) -> np.ndarray:
    """The card's decision (`core.result.decide`) on H x W x C probabilities resized (linear) to `size` =
    (width, height): the threshold applies after resizing the probabilities."""
    if probabilities.shape[1::-1] == size:
        return decide(probabilities, threshold)
    two = decision_map(probabilities, threshold)
    if two is None:
        return decide(cv2.resize(probabilities, size, interpolation=cv2.INTER_LINEAR), threshold)
    scores, cut = two  # the one map that decides two classes, resized alone (linear maps commute)
    return (cv2.resize(np.ascontiguousarray(scores), size, interpolation=cv2.INTER_LINEAR) > cut).astype(np.uint8)


def argmax_at_roi(result: InferenceResult) -> np.ndarray:
    """The predicted classes at ROI resolution: the card's decision on the probabilities resized to the ROI
    (the model-resolution classes themselves when no resize is needed)."""
    size = (result.roi.width, result.roi.height)
    if result.probabilities.shape[1::-1] == size:
        return result.argmax
    return labels_at(result.probabilities, size, result.threshold)


def check_mask_size(size: tuple[int, int], result: InferenceResult, source: str = "mask") -> None:
    """A one-line error unless a mask of `size` (width, height) covers the result's slide exactly."""
    check_sizes(size, result.image_size, source)


def check_sizes(mask_size: tuple[int, int], image_size: tuple[int, int], source: str = "mask") -> None:
    """A one-line error unless a mask of `mask_size` (width, height) covers an image of `image_size` exactly."""
    if tuple(mask_size) != tuple(image_size):
        raise SegScopeError(f"{source}: mask is {mask_size[0]}x{mask_size[1]} but the image is "
                            f"{image_size[0]}x{image_size[1]}; save the mask at the image's size, one value a pixel")


def truth_at_roi(result: InferenceResult, mask: np.ndarray, source: str = "mask") -> np.ndarray:
    """The full-slide ground-truth mask cropped to the result's ROI (checks the mask fits the slide)."""
    check_mask_size(mask.shape[1::-1], result, source)
    roi = result.roi
    return mask[roi.y0 : roi.y1, roi.x0 : roi.x1]


def scored_labels(result: InferenceResult, roi_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The predicted and the true classes that hard metrics score, at ROI resolution (the mask's scale):
    `roi_mask` is the ground truth cropped to the result's ROI (`truth_at_roi`)."""
    return argmax_at_roi(result), mask_to_labels(roi_mask, result.num_classes)


def image_metrics(result: InferenceResult, mask: np.ndarray, source: str = "mask") -> ImageMetrics:
    """All metrics of one result against its full-slide ground-truth mask (grayscale)."""
    return roi_metrics(result, truth_at_roi(result, mask, source))


def roi_metrics(result: InferenceResult, roi_mask: np.ndarray) -> ImageMetrics:
    """All metrics of one result against the ground truth under its ROI (ROI-sized, grayscale)."""
    return labels_metrics(result, mask_to_labels(roi_mask, result.num_classes))


def labels_metrics(result: InferenceResult, labels: np.ndarray) -> ImageMetrics:
    """`roi_metrics` of the true classes under the ROI (`mask_to_labels` of its mask: read once for all metrics)."""
    dice = _soft_dice(result.probabilities, labels)
    hard = hard_metrics(argmax_at_roi(result), labels, result.num_classes)
    return ImageMetrics(soft_dice=dice, soft_iou=iou_from_dice(dice), **hard)  # type: ignore[arg-type]


def compare_tensors(reference: np.ndarray, candidate: np.ndarray, eps: float = 1e-7) -> dict[str, float]:
    """Accuracy comparison of a candidate tensor (e.g. the Ascend output) against a reference.

    cosine = a·b/(|a||b|); relative Euclidean = |a−b|/|a|; relative error per element = |a−b|/(|a|+eps),
    its max and mean; cumulative relative error = Σ|a−b|/Σ|a|; KL(a‖b) treats each tensor, shifted to be
    non-negative, as one distribution over all elements.
    """
    if reference.shape != candidate.shape:
        raise SegScopeError(f"cannot compare tensors of shapes {reference.shape} and {candidate.shape}")
    with np.errstate(all="ignore"):  # NaN and infinities give NaN or infinite metrics, never a page of warnings
        return _compare(reference.astype(np.float64).ravel(), candidate.astype(np.float64).ravel(), eps)


def _compare(a: np.ndarray, b: np.ndarray, eps: float) -> dict[str, float]:
    diff = np.abs(a - b)
    norm_a, norm_b = np.linalg.norm(a), np.linalg.norm(b)
    shift = min(a.min(initial=0.0), b.min(initial=0.0))
    p, q = a - shift + eps, b - shift + eps
    p, q = p / p.sum(), q / q.sum()
    relative_euclidean = float(np.linalg.norm(a - b) / norm_a) if norm_a else (math.inf if diff.any() else 0.0)
    return {
        "cosine_similarity": float(a @ b / (norm_a * norm_b)) if norm_a and norm_b else float(norm_a == norm_b),
        "relative_euclidean_distance": relative_euclidean,
        "max_absolute_error": float(diff.max(initial=0.0)),
        "mean_absolute_error": float(diff.mean()) if diff.size else 0.0,
        "root_mean_square_error": float(np.sqrt(np.mean(diff**2))) if diff.size else 0.0,
        "max_relative_error": float((diff / (np.abs(a) + eps)).max(initial=0.0)),
        "mean_relative_error": float((diff / (np.abs(a) + eps)).mean()) if diff.size else 0.0,
        "cumulative_relative_error": float(diff.sum() / np.abs(a).sum()) if np.abs(a).sum() else float(diff.sum()),
        "kl_divergence": float(np.sum(p * np.log(p / q))),
        "std_reference": float(a.std()) if a.size else 0.0,
        "std_candidate": float(b.std()) if b.size else 0.0,
    }
