"""GeoJSON and COCO exports read back with the reference libraries, never with SegScope's own code: polygons
rasterised by scikit-image (pixel centres inside exterior and outside holes), RLE decoded by pycocotools."""

from __future__ import annotations

import io
import json

import cv2
import numpy as np
import pytest
from pycocotools import mask as coco_mask
from pycocotools.coco import COCO
from scipy import ndimage
from skimage.draw import polygon as fill_polygon

from segscope.core import cli
from segscope.core.export.files import ExportFolder
from segscope.core.export.provenance import Source
from segscope.core.interchange.coco import CocoDocument
from segscope.core.interchange.geojson import mask_geojson
from segscope.core.palette import CLASS_COLORS
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi


def rasterise(geometry: dict, shape: tuple[int, int]) -> np.ndarray:
    """A Polygon/MultiPolygon in pixel-corner coordinates as the pixels whose centres lie inside."""
    polygons = [geometry["coordinates"]] if geometry["type"] == "Polygon" else geometry["coordinates"]
    out = np.zeros(shape, bool)
    for exterior, *holes in polygons:
        inside = np.zeros(shape, bool)
        for ring, value in [(exterior, True)] + [(hole, False) for hole in holes]:
            xs, ys = np.array(ring, float).T
            rows, cols = fill_polygon(ys - 0.5, xs - 0.5, shape)  # centre of pixel (r, c) is (c + .5, r + .5)
            inside[rows, cols] = value
        out |= inside
    return out


def shoelace(ring) -> float:
    xs, ys = np.array(ring, float).T
    return float(np.dot(xs[:-1], ys[1:]) - np.dot(xs[1:], ys[:-1])) / 2


def tricky_masks() -> dict[str, np.ndarray]:
    masks = {}
    diagonal = np.zeros((9, 9), bool)
    diagonal[np.arange(1, 8), np.arange(1, 8)] = True  # a 1-px diagonal crack: pixels touching at corners
    masks["diagonal crack"] = diagonal
    ring = np.zeros((12, 12), bool)
    ring[2:10, 2:10] = True
    ring[4:8, 4:8] = False
    ring[5:7, 5:7] = True  # an island inside the hole
    masks["ring with island"] = ring
    pinch = np.zeros((8, 8), bool)
    pinch[1, 1:4] = pinch[1:4, 1] = pinch[3, 1:3] = pinch[2, 3] = True  # a loop closed only by a corner
    pinch[4, 4] = True  # and a pixel touching it at a corner
    masks["pinched loop"] = pinch
    masks["full image"] = np.ones((5, 7), bool)
    masks["noise"] = np.random.default_rng(3).random((40, 50)) > 0.55
    return masks


@pytest.mark.parametrize("name", list(tricky_masks()))
def test_geojson_polygons_rasterise_to_the_mask_exactly(name):
    mask = tricky_masks()[name]
    document = json.loads(mask_geojson(mask.astype(np.uint8), Roi(0, 0, mask.shape[1], mask.shape[0]), 2,
                                       ("background", "crack")))
    assert document["type"] == "FeatureCollection"
    painted = np.zeros(mask.shape, bool)
    for feature in document["features"]:
        assert feature["properties"] == {"objectType": "annotation",
                                         "classification": {"name": "crack", "color": list(CLASS_COLORS[0])}}
        geometry = feature["geometry"]
        for exterior, *holes in [geometry["coordinates"]] if geometry["type"] == "Polygon" else geometry["coordinates"]:
            assert exterior[0] == exterior[-1] and shoelace(exterior) > 0  # RFC 7946 winding
            assert all(hole[0] == hole[-1] and shoelace(hole) < 0 for hole in holes)
            for ring in (exterior, *holes):  # simple rings (OGC): no corner passed twice
                assert len({tuple(point) for point in ring[:-1]}) == len(ring) - 1
        part = rasterise(geometry, mask.shape)
        assert not (part & painted).any()  # features do not overlap
        painted |= part
    np.testing.assert_array_equal(painted, mask)
    # One feature per 8-connected component.
    assert len(document["features"]) == ndimage.label(mask, np.ones((3, 3)))[1]


def test_geojson_is_in_full_image_coordinates_per_class():
    labels = np.zeros((10, 12), np.uint8)
    labels[2:4, 3:6] = 1
    labels[6:9, 1:2] = 2
    roi = Roi(100, 50, 112, 60)
    document = json.loads(mask_geojson(labels, roi, 3, ("bg", "crack")))
    names = [f["properties"]["classification"]["name"] for f in document["features"]]
    assert names == ["crack", "class 2"]
    first = document["features"][0]["geometry"]
    assert first["type"] == "Polygon"
    xs, ys = np.array(first["coordinates"][0]).T
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (103, 106, 52, 54)
    assert document["features"][1]["properties"]["classification"]["color"] == list(CLASS_COLORS[1])


def test_geojson_round_trips_the_real_cracks(shared_data):
    for folder in sorted(p.parent for p in (shared_data / "pv_el_cells").glob("*/mask.png")):
        mask = cv2.imread(str(folder / "mask.png"), cv2.IMREAD_GRAYSCALE) > 127
        document = json.loads(mask_geojson(mask.astype(np.uint8), Roi(0, 0, *mask.shape[::-1]), 2))
        painted = np.zeros(mask.shape, bool)
        for feature in document["features"]:
            painted |= rasterise(feature["geometry"], mask.shape)
        union = (painted | mask).sum()
        assert union == 0 or (painted & mask).sum() / union >= 0.99, folder.name
        np.testing.assert_array_equal(painted, mask)  # in fact exact


def _coco_masks(document: dict, image_id: int) -> list[np.ndarray]:
    """Each instance mask of an image, decoded by pycocotools' COCO API."""
    api = COCO()
    api.dataset = document
    api.createIndex()
    return [api.annToMask(ann) for ann in api.loadAnns(api.getAnnIds(imgIds=[image_id]))]


def _confident(labels: np.ndarray, num_classes: int, confidence: np.ndarray) -> InferenceResult:
    """A result at ROI size (the ROI at 7, 4 of a 60 x 45 image) whose argmax is `labels`, each pixel's own class at
    its `confidence`, the rest shared by the other classes."""
    probabilities = np.repeat(((1 - confidence) / (num_classes - 1))[..., None], num_classes, axis=-1)
    np.put_along_axis(probabilities, labels[..., None].astype(np.intp), confidence[..., None], axis=-1)
    return InferenceResult(probabilities.astype(np.float32), labels, Roi(7, 4, 7 + labels.shape[1],
                                                                         4 + labels.shape[0]), (60, 45))


def test_coco_instances_decode_to_each_component_with_its_score():
    labels = np.zeros((30, 40), np.uint8)
    labels[3:9, 5:20] = 1
    labels[12, 25:30] = 1  # a second crack: its own instance
    labels[15:28, 30:33] = 2
    labels[20, 2] = 2
    confidence = np.full(labels.shape, 0.9, np.float32)
    confidence[3:9, 5:20] = np.linspace(0.6, 0.8, 15)  # the first crack's mean probability: 0.7
    coco = CocoDocument()
    coco.add("a", "a/image.png", labels, _confident(labels, 4, confidence), ("bg", "crack", "scratch", "stain"))
    document = json.loads(coco.files("test")["annotations.coco.json"])
    assert document["images"] == [{"id": 1, "file_name": "a/image.png", "width": 60, "height": 45,
                                   "segscope_id": "a"}]
    assert [c["name"] for c in document["categories"]] == ["crack", "scratch", "stain"]
    components = [(1, (slice(3, 9), slice(5, 20))), (1, (12, slice(25, 30))), (2, (slice(15, 28), slice(30, 33))),
                  (2, (20, 2))]  # per class, in the order of their first pixel row by row
    assert [a["category_id"] for a in document["annotations"]] == [c for c, _ in components]
    for annotation, (_, where) in zip(document["annotations"], components):
        expected = np.zeros((45, 60), np.uint8, order="F")
        expected[4:34, 7:47][where] = 1
        decoded = coco_mask.decode({"size": annotation["segmentation"]["size"],
                                    "counts": annotation["segmentation"]["counts"].encode()})
        np.testing.assert_array_equal(decoded, expected)
        assert annotation["segmentation"]["counts"] == coco_mask.encode(expected)["counts"].decode()
        assert annotation["iscrowd"] == 0 and annotation["area"] == int(expected.sum())
        ys, xs = np.nonzero(expected)
        assert annotation["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
    assert [a["score"] for a in document["annotations"]] == [pytest.approx(0.7), pytest.approx(0.9),
                                                             pytest.approx(0.9), pytest.approx(0.9)]
    assert "truth.coco.json" not in coco.files("test")  # no image had a truth


def _run_cocoeval(truth_file, predictions_file):
    import contextlib

    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        truth = COCO(str(truth_file))
        evaluation = COCOeval(truth, truth.loadRes(str(predictions_file)), "segm")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats


def test_cocoeval_scores_the_two_files_as_worked_out_by_hand(tmp_path):
    """Two true cracks; three predicted instances by score: 0.9 on the first crack exactly, 0.8 a false alarm,
    0.6 on the second crack exactly. In score order TP, FP, TP: recall 1/2, 1/2, 1; precision 1, 1/2, 2/3, made
    non-increasing from the right: 1, 2/3, 2/3. COCO samples it at the 101 recall points 0, 0.01, ..., 1: precision
    1 at the 51 points up to 0.5 and 2/3 at the 50 above, at every IoU threshold (the matches are exact, the false
    alarm touches nothing): AP = (51 + 50 · 2/3) / 101."""
    truth = np.zeros((30, 40), np.uint8)
    truth[2:6, 2:30] = 1
    truth[20:24, 5:35] = 1
    labels = truth.copy()
    labels[10:14, 30:38] = 1  # the false alarm
    confidence = np.full(labels.shape, 0.9, np.float32)
    confidence[10:14, 30:38] = 0.8
    confidence[20:24, 5:35] = 0.6
    result = _confident(labels, 2, confidence)
    with ExportFolder(tmp_path / "out") as folder:
        folder.export_result(result, Source("x", tmp_path / "x.png", class_names=("bg", "crack"), truth_labels=truth),
                             ["coco"])
        written = folder.write_coco()
    assert sorted(p.name for p in written) == ["annotations.coco.json", "predictions.coco.json", "truth.coco.json"]
    document = json.loads((tmp_path / "out" / "truth.coco.json").read_text())
    assert [(a["iscrowd"], a["area"]) for a in document["annotations"]] == [(0, 4 * 28), (0, 4 * 30)]
    stats = _run_cocoeval(tmp_path / "out" / "truth.coco.json", tmp_path / "out" / "predictions.coco.json")
    assert stats[0] == pytest.approx((51 + 50 * 2 / 3) / 101)  # AP at IoU .50:.95
    assert stats[1] == stats[2] == pytest.approx(stats[0])  # AP at IoU .50 and .75: the matches are exact
    assert stats[8] == pytest.approx(1.0)  # AR with 100 detections: both cracks found


def test_cli_exports_geojson_and_coco_that_match_the_canvas_and_the_truth(tiny_model_project, small_dataset,
                                                                          tmp_path):
    out_dir = tmp_path / "out"
    code = cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     "--roi", "8,4,56,40", "--export", str(out_dir), "--export-kinds", "canvas,geojson,coco"],
                    io.StringIO())
    assert code == 0
    document = json.loads((out_dir / "annotations.coco.json").read_text())
    assert [i["file_name"] for i in document["images"]] == ["1/image.png", "2/image.png", "3/image.png",
                                                             "10/image.png"]
    assert document["categories"] == [{"id": 1, "name": "defect", "supercategory": "segscope"}]
    for image in document["images"]:
        canvas = cv2.imread(str(out_dir / f"{image['segscope_id']}_mask_full.png"), cv2.IMREAD_GRAYSCALE) > 0
        decoded = sum(_coco_masks(document, image["id"]), np.zeros(canvas.shape, np.uint8))
        np.testing.assert_array_equal(decoded.astype(bool), canvas)
        assert max(decoded.ravel()) <= 1  # instances never overlap
        features = json.loads((out_dir / f"{image['segscope_id']}_mask.geojson").read_text())["features"]
        painted = np.zeros(canvas.shape, bool)
        for feature in features:
            assert feature["properties"]["classification"]["name"] == "defect"
            painted |= rasterise(feature["geometry"], canvas.shape)
        np.testing.assert_array_equal(painted, canvas)
        provenance = json.loads((out_dir / f"{image['segscope_id']}_provenance.json").read_text())
        assert "geojson" in [f["kind"] for f in provenance["files"]]
    truth = json.loads((out_dir / "truth.coco.json").read_text())
    assert [i["segscope_id"] for i in truth["images"]] == ["1", "2", "10"]  # 3 has no mask: no known negative
    for image in truth["images"]:  # the truth under the ROI, as scored, instance by instance
        mask = cv2.imread(str(small_dataset / image["segscope_id"] / "mask.png"), cv2.IMREAD_GRAYSCALE) > 127
        expected = np.zeros(mask.shape, bool)
        expected[4:40, 8:56] = mask[4:40, 8:56]
        decoded = sum(_coco_masks(truth, image["id"]), np.zeros(mask.shape, np.uint8))
        np.testing.assert_array_equal(decoded.astype(bool), expected)
    assert all(0 < r["score"] <= 1 for r in json.loads((out_dir / "predictions.coco.json").read_text()))
    stats = _run_cocoeval(out_dir / "truth.coco.json", out_dir / "predictions.coco.json")
    assert 0 <= stats[0] <= 1  # COCOeval runs on the two files


def test_export_folder_writes_coco_only_when_asked(tmp_path):
    probabilities = np.zeros((6, 8, 3), np.float32)
    probabilities[..., 0] = 1
    probabilities[1:3, 1:4] = (0, 0, 1)
    result = InferenceResult(probabilities, probabilities.argmax(-1).astype(np.uint8), Roi(0, 0, 8, 6), (8, 6))
    image = tmp_path / "data" / "x.png"
    source = Source("x", image, class_names=("bg", "a", "b"))
    with ExportFolder(tmp_path / "plain") as folder:
        folder.export_result(result, source, ["mask"])
        assert folder.write_coco() == []
    with ExportFolder(tmp_path / "coco") as folder:
        folder.export_result(result, source, ["coco"])
        [written] = folder.write_coco()
    document = json.loads(written.read_text())
    assert [(a["category_id"], a["area"], a["score"]) for a in document["annotations"]] == [(2, 6, 1.0)]
    assert document["images"][0]["file_name"] == "x.png"


def test_tiled_runs_refuse_the_kinds_they_do_not_write(tiny_model_project, small_dataset, tmp_path, capsys):
    code = cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     "--tile", "32", "--export", str(tmp_path / "out"), "--export-kinds", "mask,coco"], io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "coco" in err and "--tile" in err
