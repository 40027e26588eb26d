"""Calibration: can the model's probabilities be trusted? Top-label expected calibration error (Guo et al.,
"On Calibration of Modern Neural Networks", ICML 2017) over pixels, and its reliability diagram.

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
    def of(cls, probabilities: np.ndarray, labels: np.ndarray) -> Reliability:
        """From H x W x C probabilities and the H x W true class of each pixel."""
        confidence = np.minimum(probabilities.max(axis=-1).astype(np.float64).ravel(), 1.0)
        correct = (probabilities.argmax(axis=-1) == labels).ravel()
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
