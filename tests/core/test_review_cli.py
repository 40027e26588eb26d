"""`segscope review`: the queue of a dataset through the tiny model (960 x 960 input, 120 x 80 slides, an ROI that is
not the slide), its JSON, CSV and --out, and --against's gate and exit codes. Expected boxes and areas are worked
out by hand from the drawn masks (the tiny model calls exactly the dark pixels defect: checked on eval's exported
mask), margins from the network by hand in NumPy (conftest's `TinyProject.probabilities`)."""

from __future__ import annotations

import csv
import json
import math

import cv2
import numpy as np
import pytest

import helpers
from helpers import run_cli, tiny_card

ROI = "5,2,115,70"  # 110 x 68 of each 120 x 80 slide


@pytest.fixture
def review_dataset(tmp_path, write_png):
    """a: a dark square the truth draws 2 px lower, a dark speck the truth lacks, a light region the truth marks;
    b: no mask; c: a dark rectangle its truth matches exactly; d: a mid-grey block and an empty truth."""
    root = tmp_path / "review"
    light = np.full((80, 120, 3), 210, np.uint8)
    image, truth = light.copy(), np.zeros((80, 120), np.uint8)
    image[10:24, 10:24] = 20
    truth[12:26, 10:24] = 255
    image[5:9, 100:104] = 20
    truth[30:40, 60:75] = 255
    write_png(root / "a" / "image.png", image)
    write_png(root / "a" / "mask.png", truth)
    write_png(root / "b" / "image.png", image)
    clean, clean_truth = light.copy(), np.zeros((80, 120), np.uint8)
    clean[40:60, 30:70] = 20
    clean_truth[40:60, 30:70] = 255
    write_png(root / "c" / "image.png", clean)
    write_png(root / "c" / "mask.png", clean_truth)
    grey = light.copy()
    grey[20:40, 40:80] = 140
    write_png(root / "d" / "image.png", grey)
    write_png(root / "d" / "mask.png", np.zeros((80, 120), np.uint8))
    return root


def _margin(tiny_model_project, value: int) -> float:
    """|p1 - p0| of the tiny network on a uniform pixel of grey `value`."""
    pixel = np.full((1, 1, 3), value, np.uint8)
    p = tiny_model_project.probabilities(tiny_model_project.network_input(pixel))[0, 0]
    return abs(float(p[1] - p[0]))


def test_the_premise_the_model_calls_the_dark_pixels_defect(tiny_model_project, review_dataset, tmp_path):
    out = tmp_path / "export"
    code, _ = run_cli("eval", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline, "--roi", ROI,
                      "--export", out, "--export-kinds", "mask")
    assert code == 0
    for item in "acd":
        image = cv2.imread(str(review_dataset / item / "image.png"), cv2.IMREAD_GRAYSCALE)
        predicted = cv2.imread(str(out / f"{item}_mask.png"), cv2.IMREAD_GRAYSCALE) > 0
        assert np.array_equal(predicted, (image < 100)[2:70, 5:115])


def test_review_json_ranks_the_disagreements_in_slide_pixels(tiny_model_project, review_dataset):
    code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--roi", ROI, "--json")
    assert code == 0
    document = json.loads(text)
    entries = document["entries"]
    assert [(e["image"], e["kind"], e["class"], e["bbox"], e["area"]) for e in entries] == [
        ("a", "missed", 1, [60, 30, 75, 40], 150),  # the light region the truth marks: 15 x 10
        ("a", "boundary", 1, [10, 10, 24, 26], 56),  # rows 10-11 predicted only, 24-25 true only: 2 x 2 x 14
        ("a", "false_alarm", 1, [100, 5, 104, 9], 16),  # the 4 x 4 speck
    ]
    assert all(e["class_name"] == "defect" for e in entries)
    light = _margin(tiny_model_project, 210)  # every pixel of the missed region is light
    assert entries[0]["confidence"] == pytest.approx(light, abs=1e-5)
    assert entries[0]["score"] == pytest.approx(light * 150 / (150 + 32), abs=1e-5)
    assert entries[2]["score"] < entries[1]["score"] < entries[0]["score"]
    summary = document["summary"]
    assert (summary["images"], summary["images_with_truth"], summary["images_without_truth"]) == (4, 3, 1)
    assert summary["entries"] == 3 and summary["by_kind"]["missed"] == 1 and summary["by_class"] == {"defect": 3}


def test_review_csv_into_a_file_and_the_top(tiny_model_project, review_dataset, tmp_path):
    target = tmp_path / "queue.csv"
    args = ("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline, "--roi", ROI)
    code, text = run_cli(*args, "--csv", "--out", target, "--top", "2")
    assert code == 0 and text.startswith(f"wrote {target}: 2 of 3 disagreements")
    with target.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["rank"], r["image"], r["kind"], r["x0"], r["y0"], r["x1"], r["y1"], r["area"]) for r in rows] == [
        ("1", "a", "missed", "60", "30", "75", "40", "150"), ("2", "a", "boundary", "10", "10", "24", "26", "56")]
    code, _ = run_cli(*args, "--csv", "--out", target)
    assert code == 2  # exists: refused, the file as it was
    assert len(target.read_text().splitlines()) == 3
    code, text = run_cli(*args)
    assert code == 0 and text.splitlines()[-1] == ("3 disagreements in 3 images with a truth (1 missed, "
                                                   "1 false_alarm, 1 boundary); 1 image without a truth")


def test_bad_usage_exits_2(tiny_model_project, review_dataset, tmp_path, capsys):
    assert run_cli("review", "--dataset", tmp_path / "nowhere")[0] == 2
    assert run_cli("review", "--dataset", review_dataset, "--top", "-1")[0] == 2
    assert run_cli("review", "--dataset", review_dataset, "--json", "--csv")[0] == 2
    assert run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline, "--out",
                   tmp_path / "no" / "such" / "q.json")[0] == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_gates_threshold_alone_is_refused_not_ignored(tiny_model_project, review_dataset, capsys):
    """--min-dice without a second run was accepted and the queue printed with exit 0: a CI step meant as a gate
    never gated anything."""
    code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--min-dice", "0.5")
    assert code == 2 and text == ""
    assert capsys.readouterr().err == ("segscope: error: --min-dice: only applies to two runs (--against or "
                                       "--against-backend); add one or drop the option\n")


def test_an_out_that_is_a_folder_is_refused_before_the_run_even_with_overwrite(tiny_model_project, review_dataset,
                                                                                tmp_path, capsys):
    """A folder given as --out was said to exist (use --overwrite), and with --overwrite failed only at the end."""
    folder = tmp_path / "queue"
    (folder / "inside").mkdir(parents=True)
    for extra in ((), ("--overwrite",), ("--csv", "--overwrite")):
        code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                             "--out", folder, *extra)
        assert code == 2 and text == ""
        assert capsys.readouterr().err == f"segscope: error: --out {folder}: is a folder; give the path of a file " \
                                          "to write\n"
    assert sorted(p.name for p in folder.iterdir()) == ["inside"]


def test_against_itself_passes_the_gate(tiny_model_project, review_dataset):
    code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--roi", ROI, "--against", tiny_model_project.pipeline, "--json")
    assert code == 0
    document = json.loads(text)
    assert document["gate"]["passed"] and document["gate"]["images"] == 4
    assert {(r["image"], r["dice"], r["lost"], r["gained"], r["changed"]) for r in document["images"]} == {
        ("a", 1.0, 0, 0, 0), ("b", 1.0, 0, 0, 0), ("c", 1.0, 0, 0, 0), ("d", None, 0, 0, 0)}


def test_against_reads_no_truth(tiny_model_project, review_dataset, write_png):
    """Two runs compared need no truth: a mask eval refuses (three classes of grey where the model has two) and one
    that is no image at all block nothing."""
    write_png(review_dataset / "c" / "mask.png", np.tile(np.array([0, 100, 255], np.uint8), (80, 40)))
    (review_dataset / "d" / "mask.png").write_bytes(b"not a png")
    code, _ = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline, "--roi", ROI)
    assert code == 2  # the queue itself needs them: refused
    code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--roi", ROI, "--against", tiny_model_project.pipeline, "--json")
    assert code == 0
    assert json.loads(text)["gate"]["images"] == 4


def test_against_a_model_that_sees_more_fails_the_gate(tiny_model_project, review_dataset, monkeypatch):
    """B's defect class gets a bias 1.0 higher: the mid-grey block of d becomes a defect (gained), the rest
    stays as A sees it (the dark and light pixels are far from either cut)."""
    monkeypatch.setattr(helpers, "TINY_BIAS", np.array([0.0, 0.7], np.float32))
    models = tiny_model_project.root / "models"
    helpers.make_tiny_onnx(models / "seesmore.onnx")
    card = {**tiny_card(), "onnx": "seesmore.onnx", "om": "seesmore.om"}
    (models / "seesmore.json").write_text(json.dumps(card), encoding="utf-8")
    grey = tiny_model_project.probabilities(tiny_model_project.network_input(np.full((1, 1, 3), 140, np.uint8)))
    assert grey[0, 0, 1] < 0.5  # A: background; B adds 1.0 to the defect's logit: 140 becomes a defect
    code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--roi", ROI, "--against", models / "seesmore.json", "--json")
    assert code == 3
    document = json.loads(text)
    first = document["images"][0]
    assert (first["image"], first["gained"], first["lost"], first["changed"], first["passed"]) == ("d", 1, 0, 0, False)
    assert first["flips"][0]["bbox"] == [40, 20, 80, 40] and first["flips"][0]["area"] == 800
    assert first["dice"] == 0.0  # A has no foreground in d, B 800 pixels: class 1's Dice is 0
    assert not document["gate"]["passed"] and document["gate"]["gained"] == 1
    code, text = run_cli("review", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--roi", ROI, "--against", models / "seesmore.json")
    assert code == 3 and text.splitlines()[0].split()[:2] == ["1", "d"] and "gate FAILED" in text
    assert not math.isnan(document["gate"]["lowest_dice"])


def test_the_report_shows_the_top_of_the_queue(tiny_model_project, review_dataset, tmp_path):
    page = tmp_path / "r.html"
    code, _ = run_cli("report", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline, "--roi", ROI,
                      "--out", page)
    assert code == 0
    html = page.read_text(encoding="utf-8")
    section = html.split("<h2>Review queue")[1].split("<h2>")[0]
    cells = [row.split("</td>") for row in section.split("<tr>")[2:]]
    assert [[c.split(">")[-1] for c in row[:6]] for row in cells] == [
        ["1", "a", "missed", "defect", "60, 30, 75, 40", "150"],
        ["2", "a", "boundary", "defect", "10, 10, 24, 26", "56"],
        ["3", "a", "false alarm", "defect", "100, 5, 104, 9", "16"]]
    assert "The 3 most suspicious of 3 places" in section


def test_the_review_log_is_exported_with_the_corrected_masks(tiny_model_project, review_dataset, tmp_path):
    from segscope.core.review.log import LOG_NAME, Decision, ReviewLog
    from segscope.core.review.queue import ReviewEntry

    args = ("eval", "--dataset", review_dataset, "--pipeline", tiny_model_project.pipeline, "--export-kinds")
    assert run_cli(*args, "mask,corrected", "--export", tmp_path / "none")[0] == 0
    assert not (tmp_path / "none" / "review_log.jsonl").exists()  # no log: none exported
    log = ReviewLog.beside(review_dataset)
    log.append(Decision.of(ReviewEntry("a", 0, "missed", 1, (60, 30, 75, 40), 150, 0.9), "remove", who="ana"))
    assert run_cli(*args, "mask", "--export", tmp_path / "masks")[0] == 0
    assert not (tmp_path / "masks" / "review_log.jsonl").exists()  # only with the corrected masks
    assert run_cli(*args, "mask,corrected", "--export", tmp_path / "out")[0] == 0
    assert (tmp_path / "out" / "review_log.jsonl").read_bytes() == (review_dataset / LOG_NAME).read_bytes()
    assert run_cli(*args, "mask,corrected", "--export", tmp_path / "out")[0] == 2  # there: refused, as every file
