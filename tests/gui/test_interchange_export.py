"""File > Export with GeoJSON and COCO: one export unit, the COCO files decoding (pycocotools) to the masks the
viewer shows and to the truth it scored (as `eval --export` writes them), each provenance naming that truth."""

from __future__ import annotations

import hashlib
import json

import cv2
import numpy as np
import pytest
from pycocotools import mask as coco_mask

from segscope.core.metrics.scores import argmax_at_roi
from segscope.gui.dialogs.export_dialog import ExportChoices

pytestmark = pytest.mark.gui


def test_export_geojson_and_coco_from_the_viewer(qtbot, window, tmp_path):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
    ids = ("001", "002")
    out = tmp_path / "export"
    with qtbot.waitSignal(window.exporter.finished, timeout=30000) as exported:
        assert window.commands.write_export(ExportChoices(kinds=("geojson", "coco"), metrics=False, folder=out,
                                                          scope="all", item_ids=ids, overwrite=False))  # on a worker
    written = exported.args[0]
    assert sorted(p.name for p in written) == sorted(
        [f"{i}_{k}" for i in ids for k in ("mask.geojson", "provenance.json")]
        + ["annotations.coco.json", "truth.coco.json", "predictions.coco.json"])
    document = json.loads((out / "annotations.coco.json").read_text())
    assert [image["segscope_id"] for image in document["images"]] == list(ids)
    for image in document["images"]:
        result = window.session.result(image["segscope_id"])
        expected = np.zeros(result.image_size[::-1], np.uint8)
        roi = result.roi
        expected[roi.y0:roi.y1, roi.x0:roi.x1] = argmax_at_roi(result) == 1
        instances = [a for a in document["annotations"] if a["image_id"] == image["id"]]  # one per component
        decoded = sum(coco_mask.decode({"size": a["segmentation"]["size"], "counts": a["segmentation"]["counts"]
                                        .encode()}) for a in instances)
        np.testing.assert_array_equal(decoded, expected)
        features = json.loads((out / f"{image['segscope_id']}_mask.geojson").read_text())["features"]
        assert features and all(f["properties"]["classification"]["name"] == "defect" for f in features)
    truth_document = json.loads((out / "truth.coco.json").read_text())
    for image in truth_document["images"]:  # the truth side: the mask files under the ROI, read here with OpenCV
        item_id = image["segscope_id"]
        mask_file = window.session.dataset.root / item_id / "mask.png"
        roi = window.session.result(item_id).roi
        expected = np.zeros((image["height"], image["width"]), np.uint8)
        expected[roi.y0:roi.y1, roi.x0:roi.x1] = cv2.imread(str(mask_file), cv2.IMREAD_GRAYSCALE)[
            roi.y0:roi.y1, roi.x0:roi.x1] > 0
        instances = [a for a in truth_document["annotations"] if a["image_id"] == image["id"]]
        assert instances and all(a["iscrowd"] == 0 for a in instances)
        decoded = sum(coco_mask.decode({"size": a["segmentation"]["size"], "counts": a["segmentation"]["counts"]
                                        .encode()}) for a in instances)
        np.testing.assert_array_equal(decoded, expected)
        provenance = json.loads((out / f"{item_id}_provenance.json").read_text())
        assert provenance["truth"] == {"kind": "original", "file": f"{item_id}/mask.png",
                                       "sha256": hashlib.sha256(mask_file.read_bytes()).hexdigest()}
    assert [image["segscope_id"] for image in truth_document["images"]] == list(ids)


def test_a_whole_slide_export_names_the_truth_it_was_scored_against(qtbot, window, tmp_path):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    qtbot.waitUntil(lambda: window.session.slide_run_of("001") is not None)
    out = tmp_path / "export"
    with qtbot.waitSignal(window.exporter.finished, timeout=30000):
        assert window.commands.write_export(ExportChoices(kinds=("mask",), metrics=False, folder=out, scope="current",
                                                          item_ids=("001",), overwrite=False, stitched=True))
    mask_file = window.session.dataset.root / "001" / "mask.png"
    provenance = json.loads((out / "001_provenance.json").read_text())
    assert "tiling" in provenance  # (the whole-slide run's, not an ROI run's)
    assert provenance["truth"] == {"kind": "original", "file": "001/mask.png",
                                   "sha256": hashlib.sha256(mask_file.read_bytes()).hexdigest()}


def test_the_viewers_metrics_table_names_the_truth_of_each_row(qtbot, window, tmp_path):
    import csv

    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
    qtbot.waitUntil(lambda: window.editing.shown_result() is not None)
    window.editing.accept_prediction(None)  # 001: unsaved edits, scored as such
    out = tmp_path / "export"
    with qtbot.waitSignal(window.exporter.finished, timeout=30000):
        assert window.commands.write_export(ExportChoices(kinds=("mask",), metrics=True, folder=out, scope="all",
                                                          item_ids=("001", "002"), overwrite=False))
    rows = {row["id"]: row for row in csv.DictReader((out / "metrics.csv").open())}
    root = window.session.dataset.root
    digest = {i: hashlib.sha256((root / i / "mask.png").read_bytes()).hexdigest() for i in ("001", "002")}
    assert (rows["001"]["truth"], rows["001"]["truth_file"], rows["001"]["truth_sha256"]) == (
        "edited", "001/mask.png", digest["001"])  # the file the unsaved edits are on
    assert (rows["002"]["truth"], rows["002"]["truth_file"], rows["002"]["truth_sha256"]) == (
        "original", "002/mask.png", digest["002"])
    assert json.loads((out / "001_provenance.json").read_text())["truth"]["kind"] == "edited"
    window.editing.discard()
