"""Calibration: can the model's probabilities be trusted? Top-label expected calibration error (Guo et al.,
"On Calibration of Modern Neural Networks", ICML 2017) over pixels, its reliability diagram, and the Brier score
(Brier 1950).

Over every pixel of a defect image the ECE is dominated by confident, correct background (on the demo, 99 % of
pixels have confidence > 0.999, so a headline ECE of 0.0005 hides a 0.1 gap on the defects); the foreground ECE
is the same measure over only the pixels where the truth or the prediction is foreground, which tells a good
model from a bad one. The Brier score is the mean over pixels of Σ_c (p_c − y_c)² with y the one-hot truth.
All three read the truth at the probabilities' (model) resolution as soft Dice does
(`core.metrics.scores.labels_at_model_scale`: binary masks bilinear then > 0.5, class indices nearest).

Each pixel's confidence is its largest class probability and it is correct when that class is the true one.
Confidences fall into 15 equal-width bins (lower, upper] of [0, 1]; ECE = Σ_b (n_b / N)·|accuracy_b −
confidence_b|, the mean gap between how sure the model is and how often it is right, weighted by pixels. A
confidence a float32 softmax rounds above 1 counts in the top bin.

`Reliability` keeps per-bin sums, so images add up to the dataset's diagram (pixels pooled).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BINS = 15
#: Bin edges, as Guo et al.'s code makes them.
EDGES = np.linspace(0.0, 1.0, BINS + 1)


@dataclass(frozen=True)
class Reliability:
    """Per-bin pixel counts, sums of confidence and counts of correct pixels."""

    counts: np.ndarray  # int64, BINS
    confidence: np.ndarray  # float64 sums, BINS
    correct: np.ndarray  # int64, BINS

    @classmethod
    def empty(cls) -> Reliability:
        return cls(np.zeros(BINS, np.int64), np.zeros(BINS), np.zeros(BINS, np.int64))

    @classmethod
    def of(cls, probabilities: np.ndarray, labels: np.ndarray, region: np.ndarray | None = None) -> Reliability:
        """From H x W x C probabilities and the H x W true class of each pixel (only the pixels where the bool
        `region` is set, when given)."""
        confidence = np.minimum(probabilities.max(axis=-1).astype(np.float64), 1.0)
        correct = probabilities.argmax(axis=-1) == labels
        if region is not None:
            confidence, correct = confidence[region], correct[region]
        confidence, correct = confidence.ravel(), correct.ravel()
        index = np.searchsorted(EDGES, confidence, side="left") - 1  # bin b holds (EDGES[b], EDGES[b + 1]]
        inside = index >= 0  # a confidence of exactly 0 is in no bin (it cannot be a top label)
        index, confidence, correct = index[inside], confidence[inside], correct[inside]
        return cls(np.bincount(index, minlength=BINS), np.bincount(index, confidence, minlength=BINS),
                   np.bincount(index[correct], minlength=BINS))

    def __add__(self, other: Reliability) -> Reliability:
        return Reliability(self.counts + other.counts, self.confidence + other.confidence,
                           self.correct + other.correct)

    @property
    def pixels(self) -> int:
        return int(self.counts.sum())

    def ece(self) -> float:
        """Expected calibration error; NaN over no pixel."""
        total = self.pixels
        return float(np.abs(self.correct - self.confidence).sum() / total) if total else float("nan")

    def bins(self) -> list[dict[str, float]]:
        """The diagram's rows: each bin's edges, pixel count, mean confidence and accuracy (NaN when empty)."""
        rows = []
        for b in range(BINS):
            n = int(self.counts[b])
            rows.append({"lower": float(EDGES[b]), "upper": float(EDGES[b + 1]), "pixels": n,
                         "confidence": float(self.confidence[b] / n) if n else float("nan"),
                         "accuracy": float(self.correct[b] / n) if n else float("nan")})
        return rows

    def as_dict(self) -> dict[str, object]:
        return {"ece": self.ece(), "pixels": self.pixels, "bins": self.bins()}


def brier_sum(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Σ over pixels of Σ_c (p_c − y_c)², y the one-hot of `labels`: Σ p² − 2·p_true + 1 per pixel (float64)."""
    p = probabilities.astype(np.float64)
    truth_p = np.take_along_axis(p, labels[..., None].astype(np.intp), axis=-1)
    return float(np.sum(p * p) - 2.0 * np.sum(truth_p) + labels.size)


@dataclass(frozen=True)
class Calibration:
    """An image's (or, added up, a run's) calibration: the reliability of every pixel and of the foreground
    region, and the Brier score's sum over its pixels."""

    reliability: Reliability
    foreground: Reliability
    brier_total: float
    pixels: int

    @classmethod
    def empty(cls) -> Calibration:
        return cls(Reliability.empty(), Reliability.empty(), 0.0, 0)

    @classmethod
    def of(cls, probabilities: np.ndarray, labels: np.ndarray, predicted: np.ndarray) -> Calibration:
        """From H x W x C probabilities, the true classes and the predicted ones (the card's decision) at their
        resolution."""
        region = (labels > 0) | (predicted > 0)
        return cls(Reliability.of(probabilities, labels), Reliability.of(probabilities, labels, region),
                   brier_sum(probabilities, labels), int(labels.size))

    def __add__(self, other: Calibration) -> Calibration:
        return Calibration(self.reliability + other.reliability, self.foreground + other.foreground,
                           self.brier_total + other.brier_total, self.pixels + other.pixels)

    def brier(self) -> float:
        return self.brier_total / self.pixels if self.pixels else float("nan")

    def values(self) -> dict[str, float]:
        """ece, ece_foreground (NaN with no foreground pixel) and brier."""
        return {"ece": self.reliability.ece(), "ece_foreground": self.foreground.ece(), "brier": self.brier()}
