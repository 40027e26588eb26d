"""The report's plots, drawn by matplotlib (the `report` extra) off-screen as PNG bytes: per-metric
distributions and the reliability diagram."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..palette import BLUE, ORANGE, SKY_BLUE, VERMILLION
from ..quality.calibration import Reliability


def _rgb(color: tuple[int, int, int]) -> tuple[float, float, float]:
    return color[0] / 255, color[1] / 255, color[2] / 255


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return buffer.getvalue()


def distributions(series: Mapping[str, Sequence[float]], labels: Mapping[str, str]) -> bytes:
    """One histogram per metric over the images (infinite values counted in the title, not drawn), with the median
    of the finite values: the report's table's median."""
    names = list(series)
    columns = min(3, max(1, len(names)))
    rows = math.ceil(len(names) / columns)
    figure = Figure(figsize=(3.4 * columns, 2.5 * rows))
    for position, name in enumerate(names, 1):
        axes = figure.add_subplot(rows, columns, position)
        values = np.asarray(series[name], np.float64)
        finite = values[np.isfinite(values)]
        axes.hist(finite, bins=min(20, max(5, finite.size)), color=_rgb(SKY_BLUE), edgecolor="white")
        infinite = values.size - finite.size
        axes.set_title(labels.get(name, name) + (f" ({infinite} inf, not drawn)" if infinite else ""), fontsize=10)
        axes.set_ylabel("images", fontsize=8)
        axes.tick_params(labelsize=8)
        if finite.size:
            axes.axvline(float(np.median(finite)), color=_rgb(ORANGE), linewidth=1.5, label="median (finite)")
            axes.legend(fontsize=7, frameon=False)
    figure.tight_layout()
    return _png(figure)


def reliability_diagram(reliability: Reliability, pixels: str) -> bytes:
    """Accuracy against confidence per bin (the diagonal is perfect calibration), with the pixel counts; `pixels`
    names the pixels pooled ("every pixel", "foreground pixels")."""
    figure = Figure(figsize=(5.0, 5.2))
    top = figure.add_axes((0.14, 0.36, 0.82, 0.58))
    bottom = figure.add_axes((0.14, 0.08, 0.82, 0.2), sharex=top)
    rows = reliability.bins()
    centres = [(row["lower"] + row["upper"]) / 2 for row in rows]
    width = rows[0]["upper"] - rows[0]["lower"]
    accuracy = [row["accuracy"] if row["pixels"] else 0.0 for row in rows]
    confidence = [row["confidence"] if row["pixels"] else 0.0 for row in rows]
    top.bar(centres, accuracy, width=width * 0.95, color=_rgb(BLUE), label="accuracy")
    top.bar(centres, np.subtract(confidence, accuracy), bottom=accuracy, width=width * 0.95, color=_rgb(VERMILLION),
            alpha=0.35, label="gap to confidence")
    top.plot([0, 1], [0, 1], color="0.4", linestyle="--", linewidth=1, label="perfect calibration")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("accuracy")
    top.set_title(f"{pixels}: ECE {reliability.ece():.4f} over {reliability.pixels:,} pixels", fontsize=10)
    top.legend(fontsize=8, loc="upper left", frameon=False)
    filled = [(centre, row["pixels"]) for centre, row in zip(centres, rows) if row["pixels"]]
    bottom.bar([c for c, _ in filled], [n for _, n in filled], width=width * 0.95, color=_rgb(SKY_BLUE))
    bottom.set_yscale("log")
    bottom.set_ylabel("pixels", fontsize=8)
    bottom.set_xlabel("confidence (top-label probability)")
    bottom.tick_params(labelsize=8)
    return _png(figure)
