"""Exports with provenance: sidecar contents and hashes, grayscale files without colour tables, names,
and exported masks that re-open as the same ground truth."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.export.files import encode_mask, export_result
from segscope.core.export.provenance import Source, sha256_file
from segscope.core.files.fileio import read_mask, write_image
from segscope.core.metrics.scores import image_metrics
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi

ROI = Roi(12, 8, 52, 38)  # 40 x 30
MASKS = ("mask", "canvas")
SLIDE = (64, 48)


@pytest.fixture()
def binary_result() -> InferenceResult:
    rng = np.random.default_rng(9)
    p1 = rng.random((30, 40)).astype(np.float32)
    return InferenceResult(np.stack([1 - p1, p1], -1), (p1 > 0.5).astype(np.uint8), ROI, SLIDE, {}, "embedded")


@pytest.fixture()
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "unet.onnx"
    path.parent.mkdir()
    path.write_bytes(os.urandom(3000))
    return path


def tiff_tags(data: bytes) -> dict[int, int]:
    """Tag -> first value of the first IFD of a little- or big-endian TIFF (enough for SHORT/LONG tags)."""
    order = "<" if data[:2] == b"II" else ">"
    (offset,) = struct.unpack(order + "I", data[4:8])
    (count,) = struct.unpack(order + "H", data[offset : offset + 2])
    tags = {}
    for i in range(count):
        entry = data[offset + 2 + 12 * i : offset + 14 + 12 * i]
        tag, kind, _ = struct.unpack(order + "HHI", entry[:8])
        if kind == 3:  # SHORT
            tags[tag] = struct.unpack(order + "H", entry[8:10])[0]
        else:
            tags[tag] = struct.unpack(order + "I", entry[8:])[0]
    return tags


def test_export_writes_named_files_and_a_complete_sidecar(tmp_path: Path, binary_result: InferenceResult,
                                                          model_file: Path) -> None:
    image = tmp_path / "data" / "001" / "image.png"
    source = Source("001", image, model_file, backend="embedded")
    before = datetime.now(timezone.utc).replace(microsecond=0)
    written = export_result(binary_result, tmp_path / "out", source, mask_formats=("png", "tiff", "npy"), kinds=MASKS)
    names = sorted(p.name for p in written)
    assert names == ["001_mask.npy", "001_mask.png", "001_mask.tif", "001_mask_full.npy", "001_mask_full.png",
                     "001_mask_full.tif", "001_provenance.json"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == names  # no temp files left
    sidecar = json.loads((tmp_path / "out" / "001_provenance.json").read_text())
    assert sidecar["image_id"] == "001" and sidecar["source_image"] == str(image.resolve())
    assert sidecar["roi"] == [12, 8, 52, 38] and sidecar["image_size"] == [64, 48]
    assert sidecar["model"] == {"file": str(model_file), "sha256": hashlib.sha256(model_file.read_bytes()).hexdigest()}
    assert sidecar["backend"] == "embedded" and sidecar["threshold"] is None and sidecar["class_index"] is None
    assert sidecar["segscope_version"] == metadata.version("segscope")
    created = datetime.fromisoformat(sidecar["created"])
    assert before <= created <= datetime.now(timezone.utc)
    files = {f["name"]: f for f in sidecar["files"]}
    assert sorted(files) == names[:-1]
    for name, entry in files.items():
        assert entry["sha256"] == hashlib.sha256((tmp_path / "out" / name).read_bytes()).hexdigest()
        assert entry["kind"] == ("canvas" if "_full" in name else "mask")


def test_exported_masks_are_grayscale_without_colour_tables(tmp_path: Path, binary_result: InferenceResult) -> None:
    export_result(binary_result, tmp_path, Source("s", tmp_path / "s.png"), MASKS, mask_formats=("png", "tiff"))
    png = (tmp_path / "s_mask_full.png").read_bytes()
    assert png[25] == 0 and b"PLTE" not in png  # IHDR colour type 0: grayscale, no palette
    tags = tiff_tags((tmp_path / "s_mask_full.tif").read_bytes())
    assert tags[262] == 1 and 320 not in tags and tags.get(277, 1) == 1  # BlackIsZero, no ColorMap, 1 sample
    assert tags[258] == 8  # 8 bits


def test_exported_masks_reopen_as_ground_truth_unchanged(tmp_path: Path, binary_result: InferenceResult) -> None:
    export_result(binary_result, tmp_path / "out", Source("001", tmp_path / "image.png"), MASKS,
                  mask_formats=("png", "tiff", "npy"))
    expected = np.zeros(SLIDE[::-1], np.uint8)
    expected[8:38, 12:52] = np.where(binary_result.probabilities[..., 1] > 0.5, 255, 0)
    for suffix in (".png", ".tif"):
        assert np.array_equal(read_mask(tmp_path / "out" / f"001_mask_full{suffix}"), expected)
        assert np.array_equal(read_mask(tmp_path / "out" / f"001_mask{suffix}"), expected[8:38, 12:52])
    assert np.array_equal(np.load(tmp_path / "out" / "001_mask_full.npy"), expected)

    # Used as a dataset's ground truth, the exported mask scores the same prediction perfectly.
    folder = tmp_path / "data" / "001"
    write_image(folder / "image.png", np.zeros((*SLIDE[::-1], 3), np.uint8))
    (folder / "mask.png").write_bytes((tmp_path / "out" / "001_mask_full.png").read_bytes())
    dataset = Dataset.open(tmp_path / "data")
    truth = dataset.load_mask(dataset.items[0])
    metrics = image_metrics(binary_result, truth)
    assert metrics.foreground_dice == 1.0 and metrics.precision == 1.0 and metrics.recall == 1.0


def test_threshold_export_and_multiclass_values(tmp_path: Path, binary_result: InferenceResult) -> None:
    export_result(binary_result, tmp_path, Source("t", tmp_path / "t.png", threshold=0.9), kinds=MASKS)
    expected = np.where(binary_result.probabilities[..., 1] >= 0.9, 255, 0)
    assert np.array_equal(read_mask(tmp_path / "t_mask.png"), expected)
    sidecar = json.loads((tmp_path / "t_provenance.json").read_text())
    assert sidecar["threshold"] == 0.9 and sidecar["class_index"] == 1 and sidecar["model"] == {"file": None,
                                                                                                 "sha256": None}

    rng = np.random.default_rng(1)
    probabilities = rng.dirichlet(np.ones(4), size=(30, 40)).astype(np.float32)
    multi = InferenceResult(probabilities, probabilities.argmax(-1).astype(np.uint8), ROI, SLIDE, {}, "mindx")
    source = Source("m", tmp_path / "m.png", Path("/remote/unet.om"), model_sha256="ab" * 32)
    export_result(multi, tmp_path, source, MASKS)
    assert np.array_equal(read_mask(tmp_path / "m_mask.png"), probabilities.argmax(-1))
    sidecar = json.loads((tmp_path / "m_provenance.json").read_text())
    assert sidecar["model"] == {"file": "/remote/unet.om", "sha256": "ab" * 32}  # hashed where it ran
    assert sidecar["backend"] == "mindx" and sidecar["mask_values"] == "class index"


def test_existing_files_are_refused_before_anything_is_written(tmp_path: Path, binary_result: InferenceResult) -> None:
    (tmp_path / "001_provenance.json").write_text("{}")
    with pytest.raises(SegScopeError, match="already exists"):
        export_result(binary_result, tmp_path, Source("001", tmp_path / "i.png"), kinds=MASKS)
    assert [p.name for p in tmp_path.iterdir()] == ["001_provenance.json"]
    written = export_result(binary_result, tmp_path, Source("001", tmp_path / "i.png"), overwrite=True, kinds=MASKS)
    assert len(written) == 3 and json.loads((tmp_path / "001_provenance.json").read_text())["image_id"] == "001"
    with pytest.raises(SegScopeError, match=r"unknown kind\(s\) or format\(s\) \[.jpeg.\]"):
        export_result(binary_result, tmp_path, Source("001", tmp_path / "i.png"), MASKS, mask_formats=("jpeg",))
    with pytest.raises(SegScopeError, match="2-D uint8"):
        encode_mask(np.zeros((4, 4), np.float32), "png")


def test_model_hash_follows_file_changes(model_file: Path) -> None:
    first = sha256_file(model_file)
    assert first == hashlib.sha256(model_file.read_bytes()).hexdigest()
    model_file.write_bytes(b"another model")
    assert sha256_file(model_file) == hashlib.sha256(b"another model").hexdigest()
    with pytest.raises(SegScopeError, match="cannot hash"):
        sha256_file(model_file.parent / "missing.onnx")
