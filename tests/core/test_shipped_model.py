"""The shipped demo model does what its card says: held-out Dice on the demo dataset, end to end.

Swapping the ONNX file for an untrained network (or breaking the stream's preprocessing) fails here. The
Dice is computed in NumPy from the masks `segscope eval --export` wrote and the demo's own masks.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from segscope.core import cli

REPO = Path(__file__).resolve().parents[2]
CARD = REPO / "models" / "unet_hw960_bs1.json"
SHIPPED_PIPELINE = REPO / "pipelines" / "unet_simple_opencv.pipeline"
#: The card rounds to 4 decimals; ONNX Runtime builds differ in the last bits of a float.
TOLERANCE = 0.002


def test_shipped_model_reaches_its_card_heldout_dice(tmp_path):
    card = json.loads(CARD.read_text(encoding="utf-8"))
    claimed = card["training"]["heldout_foreground_dice"]
    demo, out = tmp_path / "demo", tmp_path / "out"
    assert cli.main(["demo", str(demo)]) == 0  # seed 0, 8 slides: the card's held-out set
    assert cli.main(["eval", "--dataset", str(demo), "--pipeline", str(SHIPPED_PIPELINE), "--export", str(out),
                     "--export-kinds", "mask", "--json"]) == 0
    tp = fp = fn = 0
    x0, y0, x1, y1 = 2200, 1000, 4000, 2800  # the default ROI the card names
    for folder in sorted(demo.iterdir()):
        truth = cv2.imread(str(folder / "mask.png"), cv2.IMREAD_GRAYSCALE)[y0:y1, x0:x1] > 127
        predicted = cv2.imread(str(out / f"{folder.name}_mask.png"), cv2.IMREAD_GRAYSCALE) > 127
        tp += int((truth & predicted).sum())
        fp += int((~truth & predicted).sum())
        fn += int((truth & ~predicted).sum())
    pooled = 2 * tp / (2 * tp + fp + fn)
    assert abs(pooled - claimed) <= TOLERANCE, (pooled, claimed)
    assert np.isfinite(pooled) and tp > 0
