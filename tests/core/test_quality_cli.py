"""`segscope eval --metrics`: per image and per class in the lines, the JSON and metrics.csv, checked against the
reference packages on the exported prediction (DeepMind's surface-distance, skimage, SciPy, Guo et al.'s ECE)."""

from __future__ import annotations

import csv
import io
import json
import math
import re

import cv2
import numpy as np
import pytest
from scipy import ndimage
from skimage.morphology import skeletonize

from helpers import run_cli

pytestmark = pytest.mark.filterwarnings("ignore:Please import:DeprecationWarning")




@pytest.fixture
def surface_distance():
    with pytest.MonkeyPatch.context() as patch:  # the package's np.Inf, removed in numpy 2 (see test_quality_reference)
        if not hasattr(np, "Inf"):
            patch.setattr(np, "Inf", np.inf, raising=False)
        import surface_distance

        yield surface_distance


@pytest.fixture
def defects_dataset(tmp_path, write_png):
    """One 120x80 light slide whose dark pixels the tiny model calls defect: a square the truth places 2 px
    lower, a thin crack the truth has too, a speck the truth lacks (a false alarm), and a light region the
    truth marks (a miss); a second image without a mask."""
    image = np.full((80, 120, 3), 210, np.uint8)
    truth = np.zeros((80, 120), np.uint8)
    image[10:24, 10:24] = 20
    truth[12:26, 10:24] = 255
    cv2.line(image, (40, 60), (110, 50), (20, 20, 20), 2)
    cv2.line(truth, (40, 60), (110, 50), 255, 2)
    image[5:9, 100:104] = 20
    truth[30:40, 60:75] = 255
    root = tmp_path / "defects"
    write_png(root / "a" / "image.png", image)
    write_png(root / "a" / "mask.png", truth)
    write_png(root / "b" / "image.png", image)
    return root


def test_eval_metrics_equal_the_reference_packages(tiny_model_project, defects_dataset, tmp_path, surface_distance):
    out_dir = tmp_path / "out"
    code, text = run_cli("eval", "--dataset", defects_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--metrics", "all", "--json", "--export", out_dir, "--export-kinds", "mask,softmax")
    assert code == 0
    document = json.loads(text)
    row = document["images"][0]  # the chosen metrics by their catalogue names, beside the Dice
    prediction = cv2.imread(str(out_dir / "a_mask.png"), cv2.IMREAD_GRAYSCALE) > 0
    truth = cv2.imread(str(defects_dataset / "a" / "mask.png"), cv2.IMREAD_GRAYSCALE) > 127
    distances = surface_distance.compute_surface_distances(truth, prediction, (1.0, 1.0))
    assert row["hd95"] == surface_distance.compute_robust_hausdorff(distances, 95)
    assert row["hd95"] >= 2  # the square is 2 px off
    assert row["nsd"] == pytest.approx(surface_distance.compute_surface_dice_at_tolerance(distances, 2), rel=1e-12)
    s_pred, s_truth = skeletonize(prediction), skeletonize(truth)
    t_prec, t_sens = (s_pred & truth).sum() / s_pred.sum(), (s_truth & prediction).sum() / s_truth.sum()
    assert row["cldice"] == pytest.approx(2 * t_prec * t_sens / (t_prec + t_sens), rel=1e-12)
    # Square (IoU 12/16 ≥ 0.5) and crack found, the speck a false alarm, the light region missed.
    n_truth, n_pred = ndimage.label(truth, np.ones((3, 3)))[1], ndimage.label(prediction, np.ones((3, 3)))[1]
    assert (n_truth, n_pred) == (3, 3)
    assert (row["defect_tp"], row["defect_fp"], row["defect_fn"]) == (2, 1, 1)
    assert row["defect_f1"] == pytest.approx(4 / 6) and row["defect_recall"] == pytest.approx(2 / 3)
    # ECE at model resolution: the exported softmax against main.py's resized truth (linear, /255 > 0.5).
    softmax = np.load(out_dir / "a_softmax.npy")
    resized = cv2.resize(truth.astype(np.uint8) * 255, softmax.shape[1::-1], interpolation=cv2.INTER_LINEAR)
    labels = (resized / 255 > 0.5).astype(int)
    confidence = softmax.max(axis=-1).astype(np.float64).ravel()
    correct = (softmax.argmax(axis=-1) == labels).ravel()
    ece = 0.0
    for lower, upper in zip(np.linspace(0, 1, 16)[:-1], np.linspace(0, 1, 16)[1:]):
        inside = (confidence > lower) & (confidence <= upper)
        if inside.any():
            ece += abs(confidence[inside].mean() - correct[inside].mean()) * inside.mean()
    assert row["ece"] == pytest.approx(ece, rel=1e-9)
    # The same over the pixels where the truth or the model's decision is the defect, and the Brier score.
    region = ((labels > 0) | (softmax.argmax(axis=-1) > 0)).ravel()
    ece_fg = 0.0
    for lower, upper in zip(np.linspace(0, 1, 16)[:-1], np.linspace(0, 1, 16)[1:]):
        inside = region & (confidence > lower) & (confidence <= upper)
        if inside.any():
            ece_fg += abs(confidence[inside].mean() - correct[inside].mean()) * inside.sum() / region.sum()
    assert row["ece_foreground"] == pytest.approx(ece_fg, rel=1e-9) and row["ece_foreground"] > 5 * row["ece"]
    one_hot = np.eye(2)[labels]
    assert row["brier"] == pytest.approx(np.mean(np.sum((softmax - one_hot) ** 2, axis=-1)), rel=1e-9)
    # Per class (one foreground class here: the image's own values), after class 0, the background, n/a.
    assert row["hd95_class"] == [None, row["hd95"]] and row["defect_fn_class"] == [None, 1]
    assert row["defect_tp"] == 2 and isinstance(row["defect_tp"], int)  # counts are integers
    # No mask, no metrics; the summary holds the aggregates over the one image with a mask.
    assert "hd95" not in document["images"][1]
    summary = document["summary"]
    assert summary["hd95"] == row["hd95"] and summary["cldice"] == row["cldice"]
    diagonal = float(np.hypot(80, 120))  # the worst HD95 of this ROI (the whole image)
    assert summary["aggregates"]["hd95"] == {
        "images": 1, "finite": 1, "na": 0, "infinite": 0, "mean": row["hd95"], "median": row["hd95"],
        "worst_case": {"substitute": "each class's inf replaced by the diagonal of the image's scored ROI (px), the "
                                     "largest distance possible", "mean": row["hd95"], "median": row["hd95"]}}
    assert summary["aggregates"]["hd95_class_1"]["mean"] == row["hd95"] and diagonal > row["hd95"]
    assert summary["aggregates"]["defect_tp"] == {"images": 1, "total": 2} and summary["defect_tp"] == 2
    described = {m["name"]: m for m in document["metrics"]}  # the catalogue's definitions come along
    assert described["hd95"]["higher_is_better"] is False and "hd95_class_<i>" in described
    assert described["hd95"]["unit"] == "px" and "Nikolov" in described["hd95"]["reference"]
    assert summary["defects"] == {"tp": 2, "fp": 1, "fn": 1, "split": 0, "merged": 0, "f1": pytest.approx(4 / 6),
                                  "precision": pytest.approx(2 / 3), "recall": pytest.approx(2 / 3)}
    assert summary["reliability"]["ece"] == pytest.approx(ece, rel=1e-9)
    assert summary["reliability"]["pixels"] == softmax.shape[0] * softmax.shape[1]
    assert sum(b["pixels"] for b in summary["reliability"]["bins"]) == summary["reliability"]["pixels"]
    assert summary["reliability_foreground"]["pixels"] == region.sum()
    assert summary["nsd_tolerance_px"] == 2.0 and summary["min_defect_area_px"] == 1 and summary["defect_iou"] == 0.5
    table = list(csv.DictReader(io.StringIO((out_dir / "metrics.csv").read_text())))
    assert float(table[0]["hd95"]) == row["hd95"] and table[0]["defect_fp"] == "1"
    assert float(table[0]["hd95_class_1"]) == row["hd95"] and "hd95_class_0" not in table[0]
    assert json.loads((out_dir / "metrics.json").read_text())["images"][0]["cldice"] == row["cldice"]


def test_eval_metric_lines_and_min_defect_area(tiny_model_project, defects_dataset):
    code, text = run_cli("eval", "--dataset", defects_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--metrics", "nsd@1,defect_f1", "--min-defect-area", "20")
    assert code == 0
    lines = text.splitlines()
    # The 4x4 speck is below 20 px: no false alarm any more.
    assert re.fullmatch(r"image: .*a[/\\]image\.png, dice: [\d.]+, iou: [\d.]+, hard dice: [\d.]+, hard iou: [\d.]+, "
                        r"nsd@1: [\d.]+, defect f1: 0\.8000 \(tp 2 fp 0 fn 1 split 0 merged 0\), "
                        r"truth: original a/mask\.png \(sha256 \w{12}\)", lines[0]), lines[0]
    assert lines[1].endswith("(no mask)")
    assert lines[-5].startswith("========== nsd@1: mean ") and lines[-5].endswith(" over 1 image")
    assert lines[-4:-1] == ["========== defect_f1: mean 0.8000, median 0.8000 over 1 image",
                            "========== defect_precision: mean 1.0000, median 1.0000 over 1 image",
                            "========== defect_recall: mean 0.6667, median 0.6667 over 1 image"]
    assert lines[-1] == ("========== defects: f1 0.8000, precision 1.0000, recall 0.6667 (tp 2, fp 0, fn 1 of which 0 "
                         "merged, 0 fragments; over all images, matched at IoU >= 0.5)")


def test_eval_with_the_shipped_pipeline(defects_dataset):
    """Without --pipeline (or --model) the shipped stream and demo model run: a plain first try."""
    code, text = run_cli("eval", "--dataset", defects_dataset, "--metrics", "hd95")
    assert code == 0 and ", hd95: " in text.splitlines()[0]


def test_eval_without_metrics_prints_the_lines_it_always_did(tiny_model_project, defects_dataset):
    code, text = run_cli("eval", "--dataset", defects_dataset, "--pipeline", tiny_model_project.pipeline)
    assert code == 0
    assert re.fullmatch(r"image: .*, dice: [\d.]+, iou: [\d.]+, hard dice: [\d.]+, hard iou: [\d.]+, "
                        r"truth: original a/mask\.png \(sha256 \w{12}\)", text.splitlines()[0])
    assert text.splitlines()[-1].startswith("========== Hard foreground dice is: ")
    code, text = run_cli("eval", "--dataset", defects_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert "metrics" not in json.loads(text)["images"][0] and "reliability" not in json.loads(text)["summary"]


def test_an_empty_prediction_is_inf_in_the_line_and_null_in_json(tiny_model_project, tmp_path, write_png):
    root = tmp_path / "light"
    write_png(root / "x" / "image.png", np.full((40, 50, 3), 210, np.uint8))  # nothing dark: nothing predicted
    truth = np.zeros((40, 50), np.uint8)
    truth[10:20, 10:20] = 255
    write_png(root / "x" / "mask.png", truth)
    code, text = run_cli("eval", "--dataset", root, "--pipeline", tiny_model_project.pipeline, "--metrics", "hd95,nsd")
    assert code == 0 and ", hd95: inf, nsd@2: 0.0000" in text.splitlines()[0]
    diagonal = np.hypot(40, 50)
    assert (f"========== hd95: mean n/a, median n/a over 0 images (1 inf left out); with the worst case (each class's "
            f"inf replaced by the diagonal of the image's scored ROI (px), the largest distance possible): mean "
            f"{diagonal:.2f}, median {diagonal:.2f}") in text.splitlines()
    code, text = run_cli("eval", "--dataset", root, "--pipeline", tiny_model_project.pipeline, "--metrics", "hd95",
                         "--json")
    document = json.loads(text)
    assert document["images"][0]["hd95"] == "inf" and document["images"][0]["hd95_class"] == [None, "inf"]
    assert document["summary"]["aggregates"]["hd95"]["infinite"] == 1
    assert document["summary"]["hd95"] is None  # no finite value: the plain mean is n/a, the worst case is not
    assert document["summary"]["aggregates"]["hd95"]["worst_case"]["mean"] == pytest.approx(diagonal)
    assert '"inf"' in document["numbers"] and "n/a" in document["numbers"]["null"]


@pytest.mark.parametrize(("argv", "parts"), [
    (["--metrics", "hd9"], ["--metrics", "'hd9'", "hd95"]),
    (["--metrics", "nsd@two"], ["nsd@two"]),
    (["--metrics", "hd95", "--min-defect-area", "4"], ["--min-defect-area", "defect_f1"]),
    (["--metrics", "all", "--tile"], ["--metrics", "--tile"]),
])
def test_bad_metric_options_are_one_line(tiny_model_project, defects_dataset, capsys, argv, parts):
    code, _ = run_cli("eval", "--dataset", defects_dataset, "--pipeline", tiny_model_project.pipeline, *argv)
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("segscope: error: ")
    assert all(part in err for part in parts), err


def test_metrics_on_the_real_pv_crack_cells(tiny_model_project, shared_data, tmp_path, surface_distance):
    """Every cell's HD95, NSD, clDice and defect counts from `eval` equal the reference packages' on the mask
    `eval` exported (cell 5 has no crack)."""
    out_dir = tmp_path / "out"
    dataset = shared_data / "pv_el_cells"
    code, text = run_cli("eval", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--metrics", "all",
                         "--json", "--export", out_dir, "--export-kinds", "mask")
    assert code == 0
    for row in json.loads(text)["images"]:
        prediction = cv2.imread(str(out_dir / f"{row['id']}_mask.png"), cv2.IMREAD_GRAYSCALE) > 0
        truth = cv2.imread(str(dataset / row["id"] / "mask.png"), cv2.IMREAD_GRAYSCALE) > 127
        distances = surface_distance.compute_surface_distances(truth, prediction, (1.0, 1.0))
        hd95 = surface_distance.compute_robust_hausdorff(distances, 95)
        assert row["hd95"] == (hd95 if math.isfinite(hd95) else "inf"), row["id"]
        if not truth.any() and not prediction.any():
            assert row["hd95"] is None and row["nsd"] is None  # n/a
        else:
            assert row["nsd"] == pytest.approx(
                surface_distance.compute_surface_dice_at_tolerance(distances, 2), rel=1e-12, abs=1e-15)
        n_truth, n_prediction = (ndimage.label(mask, np.ones((3, 3)))[1] for mask in (truth, prediction))
        assert row["defect_tp"] + row["defect_fn"] == n_truth
        assert row["defect_tp"] + row["defect_fp"] + row["defect_split"] == n_prediction
        assert row["cldice"] is None or 0 <= row["cldice"] <= 1 and 0 <= row["ece"] <= 1
