"""`segscope eval` and the truth: every truth mask checked before the first result (one line, exit 2, nothing
printed), a card's declared truth values, and which truth file each image was scored against in the lines, the
JSON, metrics.csv/json and the provenance."""

from __future__ import annotations

import csv
import hashlib
import json

import cv2
import numpy as np
import pytest

from helpers import run_cli


def _mask(path):
    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED)


@pytest.mark.parametrize("values, shown", [((0, 1, 2), "0, 1, 2"), ((0, 1, 2, 255), "0, 1, 2, 255"),
                                           ((0, 128, 255), "0, 128, 255")])
def test_a_mask_in_no_convention_is_refused_before_any_result(tiny_model_project, small_dataset, capsys, values,
                                                              shown):
    """The reviewer's case: 0/1/2 read as "foreground above 127" made the truth empty with exit 0. The bad mask is
    the last image's, so the first image's result would already be out if the check came late."""
    path = small_dataset / "10" / "mask.png"
    mask = (_mask(path) > 0).astype(np.uint8) * values[1]
    for k, value in enumerate(values[2:]):
        mask[k, :5] = value
    cv2.imwrite(str(path), mask)
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and text == ""
    assert len(err) == 1 and err[0].startswith(f"segscope: error: {path}: values {shown} are not a mask convention "
                                               "for this 2-class model")


def test_every_refused_truth_is_named_before_any_result(tiny_model_project, small_dataset, capsys):
    """Four broken masks (values, size, a text file named .png, a lossy JPEG) are named in one run, in dataset
    order, each in its line, then one line counting them; exit 2, nothing on stdout."""
    (small_dataset / "1" / "mask.png").write_text("not an image")
    cv2.imwrite(str(small_dataset / "10" / "mask.png"), np.zeros((40, 64), np.uint8))
    two = small_dataset / "2" / "mask.png"
    cv2.imwrite(str(two), (_mask(two) > 0).astype(np.uint8) * 2)  # 0/2: no binary convention
    (small_dataset / "3" / "mask.png").unlink(missing_ok=True)
    jpeg = small_dataset / "3" / "mask.jpg"
    smooth = np.zeros((48, 64), np.uint8)
    smooth[10:30, 10:40] = 255
    cv2.imwrite(str(jpeg), smooth, [cv2.IMWRITE_JPEG_QUALITY, 50])  # ringing: grey values beside 0 and 255
    assert len(np.unique(cv2.imread(str(jpeg), cv2.IMREAD_GRAYSCALE))) > 2
    for extra in ((), ("--json",)):
        code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, *extra)
        err = capsys.readouterr().err.splitlines()
        assert code == 2 and text == ""
        assert [line.split(": ")[2] for line in err[:4]] == [str(small_dataset / n / m) for n, m in (
            ("1", "mask.png"), ("2", "mask.png"), ("3", "mask.jpg"), ("10", "mask.png"))]  # dataset order
        assert all(line.startswith("segscope: error: ") for line in err) and len(err) == 5
        assert "cannot read this mask: it is a file named .png that holds no image" in err[0]
        assert err[0].endswith("save the mask as a PNG (lossless, one value a pixel) at the image's size, or as a "
                               "tiled TIFF")  # (a mask's advice, not the slide scanners' formats)
        assert "values 0, 2 are not a mask convention for this 2-class model" in err[1]
        assert err[1].endswith("save the mask as 0/255 or 0/1, or declare its values in the model card (truth_values)")
        assert "a JPEG mask: its lossy compression is the likely cause" in err[2]
        assert err[3].endswith("mask is 64x40 but the image is 64x48; save the mask at the image's size, one value a "
                               "pixel")
        assert err[4] == "segscope: error: 4 truth masks are refused (each named above): fix them and run again"


def test_the_advice_fits_the_models_class_count():
    from segscope.core.dataset.masks import MaskRule, histogram

    counts = histogram(np.array([[0, 255]], np.uint8))
    with pytest.raises(Exception, match=r"not among class indices 0\.\.2\); save the mask as class indices "
                                        r"0\.\.2, or declare"):
        MaskRule(3).check(counts, "m.png")
    with pytest.raises(Exception, match=r"save the mask with the values the card declares \(0:0,9:1\)$"):
        MaskRule(2, ((0, 0), (9, 1))).check(counts, "m.png")


def test_a_jpeg_saved_under_a_png_name_is_named_as_a_jpeg(tmp_path):
    """A JPEG mask renamed mask.png: its name hides the lossy compression behind its stray values, so the advice
    says what the file's first bytes are; a label that names no file gets the plain advice."""
    from segscope.core.dataset.masks import MaskRule, histogram

    smooth = np.zeros((48, 64), np.uint8)
    smooth[10:30, 10:40] = 255
    ok, encoded = cv2.imencode(".jpg", smooth, [cv2.IMWRITE_JPEG_QUALITY, 50])
    path = tmp_path / "mask.png"
    path.write_bytes(encoded.tobytes())
    counts = histogram(cv2.imread(str(path), cv2.IMREAD_GRAYSCALE))
    with pytest.raises(Exception, match=r"; a JPEG file under another name: its lossy compression is the likely "
                                        r"cause of the stray values, so save it as PNG; save the mask as 0/255"):
        MaskRule(2).check(counts, str(path))
    with pytest.raises(Exception, match=r"not among binary 0/255 or 0/1\); save the mask as 0/255"):
        MaskRule(2).check(counts, "truth mask")


def test_a_mask_of_another_size_is_refused_from_its_header_before_any_result(tiny_model_project, small_dataset,
                                                                            capsys):
    path = small_dataset / "10" / "mask.png"
    cv2.imwrite(str(path), np.zeros((40, 64), np.uint8))
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 2 and text == ""
    assert capsys.readouterr().err.strip() == (f"segscope: error: {path}: mask is 64x40 but the image is 64x48; "
                                               "save the mask at the image's size, one value a pixel")


def _dice(text):
    return [row.get("foreground_dice") for row in json.loads(text)["images"]]


def test_a_card_declares_the_values_its_masks_hold(tiny_model_project, small_dataset, capsys):
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 0
    reference = _dice(text)
    for item in ("1", "2", "10"):  # the same truth written as 7 (background) / 200 (defect)
        path = small_dataset / item / "mask.png"
        cv2.imwrite(str(path), np.where(_mask(path) > 0, 200, 7).astype(np.uint8))
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 2 and "values 7, 200 are not a mask convention" in capsys.readouterr().err
    card = json.loads(tiny_model_project.card.read_text())
    tiny_model_project.card.write_text(json.dumps({**card, "truth_values": {"7": 0, "200": 1}}))
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 0 and _dice(text) == reference
    # A correction saved by the viewer holds SegScope's own 0/255, whatever the card declares for the originals.
    original = _mask(small_dataset / "1" / "mask.png")
    cv2.imwrite(str(small_dataset / "1" / "mask_corrected.png"), np.where(original == 200, 255, 0).astype(np.uint8))
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 0 and _dice(text) == reference and json.loads(text)["images"][0]["truth"] == "corrected"
    tiny_model_project.card.write_text(json.dumps({**card, "truth_values": {"7": 0, "200": 2}}))
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)
    assert code == 2 and "truth_values: must map mask file values" in capsys.readouterr().err


def test_the_truth_scored_against_is_named_everywhere(tiny_model_project, small_dataset, tmp_path, capsys):
    original = small_dataset / "2" / "mask.png"
    corrected = small_dataset / "2" / "mask_corrected.png"
    cv2.imwrite(str(corrected), np.zeros_like(_mask(original)))  # a correction that removes the defect
    digest = hashlib.sha256(corrected.read_bytes()).hexdigest()
    out = tmp_path / "out"
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                         "--export", out, "--export-kinds", "mask")
    assert code == 0
    lines = [line for line in text.splitlines() if line.startswith("image:")]
    assert lines[1].endswith(f", truth: corrected 2/mask_corrected.png (sha256 {digest[:12]})")
    assert lines[0].endswith(", truth: original 1/mask.png (sha256 "
                             f"{hashlib.sha256((small_dataset / '1' / 'mask.png').read_bytes()).hexdigest()[:12]})")
    assert "truth:" not in lines[2]  # image 3 has no mask
    assert capsys.readouterr().err.count("truth: 1 of 4 images scored against their saved correction") == 1
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert (rows[1]["truth"], rows[1]["truth_file"], rows[1]["truth_sha256"]) == ("corrected", "2/mask_corrected.png",
                                                                                digest)
    assert rows[2]["truth"] == "" and rows[0]["truth"] == "original"
    assert json.loads((out / "metrics.json").read_text())["images"][1]["truth_sha256"] == digest
    provenance = json.loads((out / "2_provenance.json").read_text())
    assert provenance["truth"] == {"kind": "corrected", "file": "2/mask_corrected.png", "sha256": digest}
    # --truth original scores mask.png (the defect is back: a different Dice), and says the correction is unused
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json",
                         "--truth", "original")
    row = json.loads(text)["images"][1]
    assert (row["truth"], row["truth_file"]) == ("original", "2/mask.png")
    assert "1 saved correction(s) (mask_corrected.png) are not used" in capsys.readouterr().err
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json",
                         "--truth", "corrected")
    images = json.loads(text)["images"]
    assert [r.get("truth") for r in images] == [None, "corrected", None, None]
    assert json.loads(text)["summary"]["images_with_masks"] == 1


def test_a_tiled_export_names_the_truth_each_slide_was_scored_against(tiny_model_project, small_dataset, tmp_path):
    corrected = small_dataset / "2" / "mask_corrected.png"
    cv2.imwrite(str(corrected), np.zeros_like(_mask(small_dataset / "2" / "mask.png")))
    out = tmp_path / "out"
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--tile", 40,
                      "--export", out, "--export-kinds", "mask")
    assert code == 0

    def named(item: str) -> dict | None:
        return json.loads((out / f"{item}_provenance.json").read_text())["truth"]

    original = small_dataset / "1" / "mask.png"
    assert named("1") == {"kind": "original", "file": "1/mask.png",
                          "sha256": hashlib.sha256(original.read_bytes()).hexdigest()}
    assert named("2") == {"kind": "corrected", "file": "2/mask_corrected.png",
                          "sha256": hashlib.sha256(corrected.read_bytes()).hexdigest()}
    assert named("3") is None  # no mask: nothing scored
