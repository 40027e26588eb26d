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


def _coco_masks(document: dict, image_id: int) -> dict[int, np.ndarray]:
    """Each category's mask of an image, decoded by pycocotools' COCO API."""
    api = COCO()
    api.dataset = document
    api.createIndex()
    return {ann["category_id"]: api.annToMask(ann) for ann in api.loadAnns(api.getAnnIds(imgIds=[image_id]))}


def test_coco_rle_decodes_to_the_full_size_mask_per_class():
    labels = np.zeros((30, 40), np.uint8)
    labels[3:9, 5:20] = 1
    labels[15:28, 30:33] = 2
    labels[20, 2] = 2
    coco = CocoDocument()
    coco.add("a", "a/image.png", labels, Roi(7, 4, 47, 34), (60, 45), 4, ("bg", "crack", "scratch", "stain"))
    document = json.loads(coco.to_bytes("test"))
    assert document["images"] == [{"id": 1, "file_name": "a/image.png", "width": 60, "height": 45,
                                   "segscope_id": "a"}]
    assert [c["name"] for c in document["categories"]] == ["crack", "scratch", "stain"]
    masks = _coco_masks(document, 1)
    assert set(masks) == {1, 2}  # no annotation for a class the image does not hold
    for index, decoded in masks.items():
        expected = np.zeros((45, 60), np.uint8)
        expected[4:34, 7:47] = labels == index
        np.testing.assert_array_equal(decoded, expected)
        ann = next(a for a in document["annotations"] if a["category_id"] == index)
        assert ann["iscrowd"] == 1 and ann["area"] == int(expected.sum())
        ys, xs = np.nonzero(expected)
        assert ann["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
    # The counts are COCO's compressed column-major RLE: pycocotools' own encoding of the Fortran array.
    expected = np.zeros((45, 60), np.uint8, order="F")
    expected[4:34, 7:47] = labels == 1
    assert document["annotations"][0]["segmentation"]["counts"] == coco_mask.encode(expected)["counts"].decode()


def test_cli_exports_geojson_and_coco_that_match_the_exported_canvas(tiny_model_project, small_dataset, tmp_path):
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
        decoded = _coco_masks(document, image["id"]).get(1, np.zeros(canvas.shape, np.uint8))
        np.testing.assert_array_equal(decoded.astype(bool), canvas)
        features = json.loads((out_dir / f"{image['segscope_id']}_mask.geojson").read_text())["features"]
        painted = np.zeros(canvas.shape, bool)
        for feature in features:
            assert feature["properties"]["classification"]["name"] == "defect"
            painted |= rasterise(feature["geometry"], canvas.shape)
        np.testing.assert_array_equal(painted, canvas)
        provenance = json.loads((out_dir / f"{image['segscope_id']}_provenance.json").read_text())
        assert "geojson" in [f["kind"] for f in provenance["files"]]


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
    assert [(a["category_id"], a["area"]) for a in document["annotations"]] == [(2, 6)]
    assert document["images"][0]["file_name"] == "x.png"


def test_tiled_runs_refuse_the_kinds_they_do_not_write(tiny_model_project, small_dataset, tmp_path, capsys):
    code = cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     "--tile", "32", "--export", str(tmp_path / "out"), "--export-kinds", "mask,coco"], io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "coco" in err and "--tile" in err
