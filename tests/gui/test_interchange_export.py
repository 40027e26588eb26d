"""File > Export with GeoJSON and COCO: one export unit, the COCO file decoding (pycocotools) to the masks the
viewer shows."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pycocotools import mask as coco_mask

from segscope.core.metrics.scores import argmax_at_roi
from segscope.gui.export_dialog import ExportChoices

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
        [f"{i}_{k}" for i in ids for k in ("mask.geojson", "provenance.json")] + ["annotations.coco.json"])
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
