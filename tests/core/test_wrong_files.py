"""A path that is not what was asked for is said to be what it is, with what was wanted (issue 34): one rule
for `--dataset`, `--pipeline` and `--model` (the viewer's Backend dialog and Open model use the same one);
`segscope --version`."""

from __future__ import annotations

import json
import shutil
from importlib import metadata
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.stream.source import resolve_source

from helpers import run_cli

RUN_SOURCES = ".pipeline file, a model card (.json), an .onnx or .om with its card, or a model project folder"


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("segscope: error: "), err
    return err


@pytest.fixture
def odd_files(tmp_path: Path) -> Path:
    """Files a new user points SegScope at by mistake."""
    (tmp_path / "README.md").write_text("# My project\n\nSome notes.\n", encoding="utf-8")
    (tmp_path / "insert_op.cfg").write_text("aipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n}\n")
    (tmp_path / "coco.json").write_text(json.dumps({"images": [], "annotations": []}))
    assert cv2.imwrite(str(tmp_path / "photo.png"), np.zeros((4, 4, 3), np.uint8))
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 4)
    return tmp_path


@pytest.mark.parametrize("option", ["--pipeline", "--model"])
@pytest.mark.parametrize("name, what", [("README.md", "is a Markdown text file"),
                                        ("insert_op.cfg", "is an AIPP config (a model card names it)"),
                                        ("coco.json", "is a JSON file that is neither a pipeline nor a model card"),
                                        ("photo.png", "is a PNG image"), ("blob.bin", "is a binary .bin file")])
def test_a_wrong_file_named_as_the_model_says_what_it_is_and_what_is_taken(odd_files: Path, small_dataset: Path,
                                                                            capsys, option: str, name: str,
                                                                            what: str) -> None:
    code, _ = run_cli("eval", "--dataset", small_dataset, option, odd_files / name)
    err = error_line(capsys)
    assert code == 2 and f"{name}: {what}, not a pipeline or model: give a {RUN_SOURCES}" in err


def test_a_dataset_folder_named_as_the_model_and_a_model_as_the_dataset(small_dataset: Path, tiny_model_project,
                                                                        capsys) -> None:
    code, _ = run_cli("eval", "--dataset", small_dataset, "--model", small_dataset)
    assert code == 2 and "is a folder of 4 images (a dataset), not a pipeline or model" in error_line(capsys)
    code, _ = run_cli("eval", "--dataset", tiny_model_project.pipeline)
    err = error_line(capsys)
    assert code == 2 and "unet_simple_opencv.pipeline: is a MindX pipeline, not a dataset folder (" in err
    code, _ = run_cli("eval", "--dataset", tiny_model_project.root)
    err = error_line(capsys)
    assert code == 2 and "no images found (it is a model project folder): expected a dataset folder" in err


def test_no_images_found_names_every_image_type_read(tmp_path: Path, capsys) -> None:
    code, _ = run_cli("eval", "--dataset", tmp_path)
    err = error_line(capsys)
    assert code == 2 and "no images found (it is a folder with nothing in it)" in err
    for kind in ("PNG", "JPEG", "TIFF", "BMP", "WebP", "GIF", "PNM", "SVS", "NDPI", "MRXS"):
        assert kind in err
    for suffix in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".svs"):
        assert f" {suffix}" in err


def test_a_webp_and_a_pnm_image_make_a_dataset(tmp_path: Path) -> None:
    """Every type named is one a dataset takes (WebP and PNM were read, yet no dataset found them)."""
    image = np.random.default_rng(1).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    assert cv2.imwrite(str(tmp_path / "a.webp"), image) and cv2.imwrite(str(tmp_path / "b.ppm"), image)
    dataset = Dataset.open(tmp_path)
    assert [item.id for item in dataset.items] == ["a", "b"]
    assert [dataset.image_size(item) for item in dataset.items] == [(40, 30), (40, 30)]


def test_an_onnx_without_its_own_card_takes_the_card_beside_it_that_names_it(tiny_model_project, small_dataset: Path,
                                                                               capsys) -> None:
    models = tiny_model_project.root / "models"  # unet_hw960_bs1.json names tiny.onnx; no tiny.json
    code, out = run_cli("eval", "--dataset", small_dataset, "--model", models / "tiny.onnx")
    err = capsys.readouterr().err
    assert code == 0 and "image: " in out
    assert (f"segscope: note: {models / 'tiny.onnx'} has no card of its own name (tiny.json); running "
            f"{models / 'unet_hw960_bs1.json'}, the card beside it that names it") in err
    shutil.copyfile(models / "unet_hw960_bs1.json", models / "second.json")  # two cards name it: which one?
    code, _ = run_cli("eval", "--dataset", small_dataset, "--model", models / "tiny.onnx")
    err = error_line(capsys)
    assert code == 2 and "2 cards beside it name it (second.json, unet_hw960_bs1.json): give the one to run" in err


def test_an_onnx_without_any_card_is_checked_first_then_pointed_to_segscope_card(tmp_path: Path, small_dataset: Path,
                                                                                 tiny_model_project, capsys) -> None:
    whole = tiny_model_project.onnx.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 2])
    shutil.copyfile(tiny_model_project.onnx, tmp_path / "bare.onnx")
    code, _ = run_cli("eval", "--dataset", small_dataset, "--model", tmp_path / "cut.onnx")
    assert code == 2 and "cut.onnx: not an ONNX model (" in error_line(capsys)
    code, _ = run_cli("eval", "--dataset", small_dataset, "--model", tmp_path / "bare.onnx")
    err = error_line(capsys)
    assert code == 2 and "bare.onnx: has no model card beside it" in err and "segscope card" in err
    assert resolve_source(tmp_path / "bare.onnx").path is None  # the viewer offers to build one


def test_a_model_project_folder_opens_its_pipeline_or_its_card(tiny_model_project) -> None:
    root = tiny_model_project.root
    assert resolve_source(root).path == tiny_model_project.pipeline
    assert resolve_source(root / "models").path == tiny_model_project.card  # a models/ folder: its one card
    empty = root / "empty"
    empty.mkdir()
    with pytest.raises(SegScopeError, match="empty: is a folder with nothing in it, not a pipeline or model"):
        resolve_source(empty)


def test_version(capsys) -> None:
    code, _ = run_cli("--version")
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"segscope {metadata.version('segscope')} (Python 3.")
