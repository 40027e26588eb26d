"""The card's threshold decides the mask at every scale (model output, ROI, tiles, export, hard metrics), and a
card can threshold the raw output as an app does; each number against a NumPy/OpenCV reference written from
docs/model-cards.md (threshold after resizing the probabilities), not from SegScope's code."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.card.reader import load_model_card
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi

import byo_helpers as byo
from helpers import run_cli

SIZE = 24  # the model input; the ROI below is 70 x 57 of a 90 x 70 slide: both resized
ROI = byo.BOX




@pytest.fixture(scope="module")
def slide(tmp_path_factory) -> Path:
    """One 90 x 70 slide with a mask: the reference's disc, so both classes are there."""
    folder = tmp_path_factory.mktemp("threshold_data")
    (folder / "a").mkdir()
    (folder / "a" / "image.png").write_bytes(byo.slide_png())
    mask = np.zeros((70, 90), np.uint8)
    cv2.circle(mask, (45, 35), 17, 255, -1)
    cv2.imwrite(str(folder / "a" / "mask.png"), mask)
    return folder


def net() -> byo.Net:
    return byo.Net(in_channels=3, out_channels=1, size=SIZE, seed=3)


def reference_roi_mask(raw: np.ndarray, to_probability, threshold: float) -> np.ndarray:
    """The card's rule by docs/model-cards.md: the reported probability (float32) resized bilinearly to the
    ROI, then > the threshold; and how far each pixel is from the cut (near-ties are not compared)."""
    p = to_probability(raw[..., 0]).astype(np.float32)
    x0, y0, x1, y1 = ROI
    resized = cv2.resize(p, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR).astype(np.float64)
    return resized > threshold, np.abs(resized - threshold) > 1e-5


def hard_dice(prediction: np.ndarray, truth: np.ndarray) -> float:
    tp, fp, fn = (prediction & truth).sum(), (prediction & ~truth).sum(), (~prediction & truth).sum()
    return 2 * tp / (2 * tp + fp + fn)


def evaluate(tmp_path: Path, slide: Path, output: dict, extra: tuple = ()) -> tuple[dict, np.ndarray, dict, Path]:
    pipeline = byo.write_project(tmp_path / "project", net(), {"color": "RGB", "scale": 1 / 255}, [output],
                                 ["crack"])
    code, out = run_cli("eval", "--dataset", slide, "--pipeline", pipeline, "--roi", ",".join(map(str, ROI)),
                        "--export", tmp_path / "out", "--json", *extra)
    assert code == 0, out
    mask = cv2.imread(str(tmp_path / "out" / "a_mask.png"), cv2.IMREAD_GRAYSCALE)
    provenance = json.loads((tmp_path / "out" / "a_provenance.json").read_text())
    return json.loads(out)["images"][0], mask, provenance, tmp_path / "out"


@pytest.mark.parametrize("threshold", [0.1, 0.5, 0.9])
def test_a_sigmoid_cards_threshold_decides_the_exported_mask_and_the_hard_metrics(tmp_path, slide, threshold):
    row, mask, provenance, _ = evaluate(tmp_path, slide, {"name": "scores", "layout": "NCHW",
                                                          "activation": "sigmoid", "threshold": threshold})
    raw = byo.reference_stream(byo.slide_png(), ROI, net(), color="RGB", scale=1 / 255)
    expected, decided = reference_roi_mask(raw, byo.sigmoid, threshold)
    assert mask.shape == expected.shape and decided.mean() > 0.99
    np.testing.assert_array_equal(mask[decided] == 255, expected[decided])
    truth = cv2.imread(str(slide / "a" / "mask.png"), cv2.IMREAD_GRAYSCALE)[ROI[1]:ROI[3], ROI[0]:ROI[2]] > 0
    assert row["foreground_dice"] == pytest.approx(hard_dice(mask == 255, truth), abs=2e-3)
    assert f"> {threshold:g} (the model card's threshold)" in provenance["mask_rule"]
    # The three thresholds give three different masks (the issue saw p > 0.5 for all three).
    at_half, _ = reference_roi_mask(raw, byo.sigmoid, 0.5)
    assert (expected != at_half).mean() > (0.05 if threshold != 0.5 else -1)


def test_the_threshold_holds_on_stitched_tiles_too(tmp_path, slide):
    threshold = 0.2
    _, _, _, out = evaluate(tmp_path, slide, {"name": "scores", "layout": "NCHW", "activation": "sigmoid",
                                              "threshold": threshold},
                            ("--tile", "36", "--overlap", "8"))
    probabilities = np.load(out / "a_softmax.npy")
    mask = cv2.imread(str(out / "a_mask.png"), cv2.IMREAD_GRAYSCALE)
    p1 = probabilities[..., 1].astype(np.float64)
    decided = np.abs(p1 - threshold) > 1e-6
    assert decided.mean() > 0.99 and ((p1 > threshold) != (p1 > 0.5)).mean() > 0.05
    np.testing.assert_array_equal((mask == 255)[decided], (p1 > threshold)[decided])  # not p1 > 0.5


def test_a_raw_threshold_is_the_apps_rule_and_the_heatmap_is_sigma_of_its_distance(tmp_path, slide):
    """docs/model-cards.md example 4 ("activation": "none", "threshold_on": "raw"), with a threshold below 0: any
    value of the raw output is a valid cut."""
    raw_threshold = -0.5
    row, mask, provenance, out = evaluate(tmp_path, slide, {"name": "scores", "layout": "NCHW",
                                                            "activation": "none", "threshold": raw_threshold,
                                                            "threshold_on": "raw"})
    raw = byo.reference_stream(byo.slide_png(), ROI, net(), color="RGB", scale=1 / 255)
    assert raw.min() < -1 and raw.max() > 1 and 0.05 < (raw > raw_threshold).mean() < 0.95  # raw, not refused
    # The reported probability is σ(x − T): 0.5 exactly on the app's boundary, at model resolution.
    probabilities = np.load(out / "a_softmax.npy")
    np.testing.assert_allclose(probabilities[..., 1], byo.sigmoid(raw[..., 0] - raw_threshold), atol=1e-6)
    expected, decided = reference_roi_mask(raw, lambda x: byo.sigmoid(x - raw_threshold), 0.5)
    np.testing.assert_array_equal(mask[decided] == 255, expected[decided])
    assert "> 0.5 (the model card's threshold)" in provenance["mask_rule"] and row["foreground_dice"] > 0
    # At model resolution the mask is exactly the app's: raw > 0.5.
    pipeline = tmp_path / "project" / "pipelines" / "byo.pipeline"
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(byo.slide_png(), Roi(*ROI))
    np.testing.assert_array_equal(result.argmax, raw[..., 0] > raw_threshold)


def test_a_sigmoid_card_can_threshold_the_raw_logit(tmp_path, slide):
    row, mask, _, _ = evaluate(tmp_path, slide, {"name": "scores", "layout": "NCHW", "activation": "sigmoid",
                                                 "threshold": 1.0, "threshold_on": "raw"})
    raw = byo.reference_stream(byo.slide_png(), ROI, net(), color="RGB", scale=1 / 255)
    # Logit > 1 is σ(logit) > σ(1) = 0.731: the heatmap stays σ(x), the cut moves.
    expected, decided = reference_roi_mask(raw, byo.sigmoid, 1 / (1 + np.exp(-1.0)))
    np.testing.assert_array_equal(mask[decided] == 255, expected[decided])


def test_card_writes_the_raw_rule_for_an_app_that_thresholds_the_output_as_it_is(tmp_path):
    model = net().save(tmp_path / "crack.onnx")
    code, out = run_cli("card", model, "--out", tmp_path / "proj", "--color", "RGB", "--scale", "1/255",
                        "--activation", "none", "--threshold", "0.5", "--classes", "crack")
    assert code == 0, out
    card = json.loads((tmp_path / "proj" / "models" / "crack.json").read_text())
    assert card["outputs"][0] == {"name": "scores", "layout": "NCHW", "activation": "none", "threshold": 0.5,
                                  "threshold_on": "raw"}
    assert "assumed: output 'scores' holds raw scores (from Conv) and activation 'none'" in out
    code, out = run_cli("card", model, "--out", tmp_path / "proj2", "--activation", "none", "--threshold", "0.5",
                        "--threshold-on", "probability", "--scale", "1")
    assert code == 0 and "threshold_on" not in (tmp_path / "proj2" / "models" / "crack.json").read_text()


@pytest.mark.parametrize(("output", "expected"), [
    ({"activation": "sigmoid", "threshold_on": "raw"}, "'raw' needs a threshold"),
    ({"activation": "softmax", "threshold": 0.2, "threshold_on": "raw"}, "'raw' needs a threshold"),
    ({"activation": "none", "threshold": 2.0}, "2: a threshold is a probability in (0, 1)"),
    ({"activation": "none", "threshold": 0.5, "threshold_on": "logit"}, "threshold_on: must be one of"),
])
def test_threshold_fields_are_checked(tmp_path, output, expected):
    byo.write_project(tmp_path, net(), {"scale": 1}, [{"name": "scores", "layout": "NCHW", **output}], ["crack"])
    with pytest.raises(SegScopeError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_model_card(tmp_path / "models" / "byo.json")
