"""Tiled runs through the real embedded backend (a tiny 64 px ONNX model) and `segscope eval --tile`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.roi import Roi
from segscope.core.slides import open_slide, slide_kind_for
from segscope.core.wholeslide import evaluate as tiled_eval
from segscope.core.wholeslide.evaluate import TilePlan, evaluate_tiled, run_tiled

from helpers import make_tiny_onnx, run_cli, tiny_card

SIZE = 64  # model input: small, so every test stays quick


@pytest.fixture
def pipeline(tiny_model_project) -> Path:
    """The tiny project with a SIZE x SIZE model and the stream's resize to match."""
    make_tiny_onnx(tiny_model_project.onnx, SIZE)
    tiny_model_project.card.write_text(json.dumps(tiny_card(SIZE)), encoding="utf-8")

    def edit(data: dict) -> None:
        data["unet_mindspore"]["mxpi_imageresize0"]["props"].update(resizeWidth=str(SIZE), resizeHeight=str(SIZE))
    return tiny_model_project.write_pipeline("small.pipeline", edit)


def textured(tmp_path: Path, width: int = 300, height: int = 200) -> Path:
    image = np.random.default_rng(2).integers(0, 256, (height, width, 3), dtype=np.uint8)
    cv2.circle(image, (120, 90), 50, (20, 30, 40), -1)
    path = tmp_path / "slide.png"
    assert cv2.imwrite(str(path), image)
    return path




def test_a_one_tile_run_equals_a_plain_roi_run_bit_for_bit(pipeline: Path, tmp_path: Path) -> None:
    path, roi = textured(tmp_path), Roi(40, 30, 140, 130)
    with EmbeddedBackend(pipeline) as backend, open_slide(path) as reader:
        plain = backend.infer(path, roi)
        stitched = run_tiled(backend, reader, TilePlan((100, 100), 0), roi)  # default scale 64/100: the model's
    assert stitched.probabilities.shape == plain.probabilities.shape == (SIZE, SIZE, 2)
    assert stitched.probabilities.tobytes() == plain.probabilities.tobytes()
    assert (stitched.argmax == plain.argmax).all() and stitched.region == plain.roi == roi


def test_eval_tile_prints_slide_metrics_per_image(pipeline: Path, small_dataset: Path) -> None:
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", 32, "--overlap", 8)
    assert code == 0, out
    lines = out.splitlines()
    # 64x48 slides widened by the 4 px margin, 32 px tiles, stride 24: x at -4, 20, 36 (flush with 68) and y at
    # -4, 20 -> 6 tiles each.
    images = [line for line in lines if line.startswith("image: ")]
    assert len(images) == 4 and all(", tiles: 6" in line for line in images)
    assert images[0].endswith(")") and ", tiles: 6, truth: original 1/mask.png (sha256 " in images[0]
    assert "dice: n/a" in images[2]  # item 3 has no mask
    dataset = Dataset.open(small_dataset)
    with EmbeddedBackend(pipeline) as backend:
        expected = [e.metrics for e in evaluate_tiled(backend, dataset, TilePlan((32, 32), 8))]
    for line, metrics in zip(images, expected):
        if metrics is not None:
            assert f"dice: {metrics.soft_dice:.6f}, iou: {metrics.soft_iou:.6f}" in line
            assert f"hard dice: {metrics.foreground_dice:.6f}" in line
    scored = [m.soft_dice for m in expected if m is not None]
    assert lines[-3] == f"========== Cross Valid dice coeff is: {np.mean(scored)}"
    assert lines[-1].endswith("(over 3 images with masks)")


def test_eval_tile_json_and_export(pipeline: Path, small_dataset: Path, tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "out"
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", 40, "--blend", "gaussian",
                        "--overlap", 10, "--output-scale", 0.5, "--json", "--export", out_dir)
    assert code == 0
    assert "no slide-size canvas" in capsys.readouterr().err  # the default kinds include canvas
    document = json.loads(out)
    # widened by the 5 px margin (half the overlap): x at -5, 25, 29 (flush with 69); y at -5, 13 (flush with 53)
    assert [row["tiles"] for row in document["images"]] == [6, 6, 6, 6]
    mask = cv2.imread(str(out_dir / "1_mask.png"), cv2.IMREAD_UNCHANGED)
    assert mask.shape == (24, 32) and set(np.unique(mask)) <= {0, 255}  # 64x48 at half scale
    assert cv2.imread(str(out_dir / "1_heatmap.png")).shape == (24, 32, 3)
    assert np.load(out_dir / "1_softmax.npy").shape == (24, 32, 2)
    provenance = json.loads((out_dir / "1_provenance.json").read_text())
    assert provenance["roi"] == [0, 0, 64, 48] and provenance["image_size"] == [64, 48]
    assert provenance["tiling"]["output_scale"] == 0.5 and provenance["tiling"]["blend"] == "gaussian"
    assert {f["name"] for f in provenance["files"]} == {"1_mask.png", "1_softmax.npy", "1_heatmap.png"}
    assert (out_dir / "metrics.csv").is_file()
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", 40, "--export", out_dir)
    assert code == 2 and "already exists" in capsys.readouterr().err  # nothing overwritten silently


def test_eval_tile_defaults_to_the_datasets_roi_size(pipeline: Path, small_dataset: Path, tmp_path: Path) -> None:
    (small_dataset / "segscope.json").write_text(json.dumps({"version": 1, "default_roi": [0, 0, 40, 30],
                                                             "rois": {}}))
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", "--json")
    assert code == 0
    rows = json.loads(out)["images"]
    # 40x30 tiles, the margin 6 px (2/15 of 40, up), overlap 12: x at -6, 22, 30 (flush with 70) and y at -6, 12,
    # 24 (flush with 54)
    assert [row["tiles"] for row in rows] == [9, 9, 9, 9]
    dataset = Dataset.open(small_dataset)
    with EmbeddedBackend(pipeline) as backend:
        first = next(evaluate_tiled(backend, dataset, TilePlan((40, 30))))
    assert first.stitched.argmax.shape == (77, 102)  # the model's scale: 64 px per 40 slide px (half up)
    assert first.metrics is not None and rows[0]["soft_dice"] == first.metrics.soft_dice


@pytest.mark.parametrize("argv, part", [
    (["--tile", "0"], "--tile"),
    (["--tile", "32", "--overlap", "32"], "--overlap"),
    (["--tile", "32", "--overlap", "-1"], "--overlap"),
    (["--overlap", "8"], "--overlap: only applies with --tile"),
    (["--tile", "32", "--output-scale", "2"], "--output-scale"),
    (["--tile", "32", "--roi", "0,0,65,10"], "--roi"),
])
def test_bad_tiling_values_are_one_line_errors(pipeline: Path, small_dataset: Path, capsys, argv, part) -> None:
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, *argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("segscope: error: ") and part in err, err


def test_a_tile_too_small_for_the_models_scale_names_the_smallest_that_fits(pipeline: Path, small_dataset: Path,
                                                                            capsys) -> None:
    """The default output scale is the model's (its input per tile): a tile too small for the stitched output is
    the tile's fault, said with the smallest tile that fits, and that tile is accepted while one less is not."""
    import re

    limit = ["--max-canvas", "0.001"]  # 1,073,741 bytes: a 64x48 slide fits only below ~13x its size
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", "4", *limit)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("segscope: error: --tile: a 4 px tile is below the model's edge margin")
    assert "--output-scale:" not in err
    smallest = int(re.search(r"the smallest tile that fits is (\d+) px: give --tile \1 or more", err).group(1))
    assert run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", smallest, *limit)[0] == 0
    capsys.readouterr()
    assert run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", smallest - 1, *limit)[0] == 2
    assert "the smallest tile that fits is" in capsys.readouterr().err


def test_ctrl_c_stops_within_a_tile_with_a_clear_line(pipeline: Path, small_dataset: Path, capsys,
                                                      monkeypatch) -> None:
    added = []

    class Interrupted(tiled_eval.Stitcher):
        def add(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            if len(added) == 2:
                raise KeyboardInterrupt
            added.append(1)
            super().add(*args, **kwargs)

    monkeypatch.setattr(tiled_eval, "Stitcher", Interrupted)
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", 32)
    err = capsys.readouterr().err
    assert code == 130 and "image: " not in out
    assert re.search(r"stopped after 2/\d+ tiles", err), err


def test_a_tiled_tiff_slide_and_mask_score_as_their_png_twins(pipeline: Path, tmp_path: Path) -> None:
    """The TIFF mask is read a band at a time by its slide reader, the PNG one whole: same metrics."""
    tifffile = pytest.importorskip("tifffile")
    rng = np.random.default_rng(4)
    image = rng.integers(150, 256, (96, 128, 3), dtype=np.uint8)
    mask = np.zeros((96, 128), np.uint8)
    cv2.circle(mask, (70, 40), 25, 255, -1)
    image[mask > 0] = 30
    for kind in ("png", "tif"):
        folder = tmp_path / kind / "a"
        folder.mkdir(parents=True)
        if kind == "png":
            assert cv2.imwrite(str(folder / "image.png"), image) and cv2.imwrite(str(folder / "mask.png"), mask)
        else:
            tifffile.imwrite(folder / "image.tif", image[..., ::-1], tile=(32, 32), photometric="rgb")
            tifffile.imwrite(folder / "mask.tif", mask, tile=(32, 32), photometric="minisblack")
    plan = TilePlan((48, 48), 12, "gaussian", 0.5)
    with EmbeddedBackend(pipeline) as backend:
        png, tif = (next(evaluate_tiled(backend, Dataset.open(tmp_path / kind), plan)) for kind in ("png", "tif"))
    assert tif.item.mask_path is not None and slide_kind_for(tif.item.mask_path).name == "tiff"
    assert slide_kind_for(tif.item.image_path).name == "tiff"
    assert tif.stitched.probabilities.tobytes() == png.stitched.probabilities.tobytes()
    assert tif.metrics == png.metrics and png.metrics is not None and png.metrics.foreground_dice > 0.5


def test_eval_tile_exports_pyramidal_ome_tiff_with_the_png_exports_pixels(pipeline: Path, small_dataset: Path,
                                                                          tmp_path: Path) -> None:
    import tifffile

    common = ["eval", "--dataset", small_dataset, "--pipeline", pipeline, "--tile", 40, "--output-scale", 0.5,
              "--export-kinds", "mask,heatmap"]
    assert run_cli(*common, "--export", tmp_path / "png", "--stitched-format", "png")[0] == 0
    assert run_cli(*common, "--export", tmp_path / "ome", "--stitched-format", "ome-tiff")[0] == 0
    assert not (tmp_path / "ome" / "1_mask.png").exists() and not (tmp_path / "png" / "1_mask.tif").exists()
    png_mask = cv2.imread(str(tmp_path / "png" / "1_mask.png"), cv2.IMREAD_UNCHANGED)
    with tifffile.TiffFile(tmp_path / "ome" / "1_mask.tif") as tif:
        assert tif.is_ome  # what QuPath and napari recognise as OME-TIFF
        np.testing.assert_array_equal(tif.series[0].asarray(), png_mask)  # lossless: zlib
    with open_slide(tmp_path / "ome" / "1_heatmap.tif") as heatmap:  # JPEG tiles: close to the PNG, not equal
        png_heatmap = cv2.imread(str(tmp_path / "png" / "1_heatmap.png"))
        assert heatmap.size == (png_heatmap.shape[1], png_heatmap.shape[0])
        read = heatmap.read_region(0, 0, 0, *heatmap.size).astype(int)
        error, swapped = np.abs(read - png_heatmap).mean(), np.abs(read[..., ::-1] - png_heatmap).mean()
        assert error < 8 and swapped > 2 * error  # JPEG's loss on a 32x24 map, and BGR kept BGR
    provenance = json.loads((tmp_path / "ome" / "1_provenance.json").read_text())
    assert {f["name"] for f in provenance["files"]} == {"1_mask.tif", "1_heatmap.tif"}
    # auto (the default) may write either format, so either name already there stops a second run
    code, _ = run_cli(*common, "--export", tmp_path / "ome")
    assert code == 2
    assert run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--stitched-format", "png")[0] == 2
