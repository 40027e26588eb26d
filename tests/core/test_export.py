"""Exported files: their content, overwrite refusal and atomicity."""

from __future__ import annotations

import csv
import json
import math
import os

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.export.files import export_result, write_metrics
from segscope.core.export.provenance import Source
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi

ALL_FILES = ["s1_heatmap.png", "s1_mask.png", "s1_mask_full.png", "s1_provenance.json", "s1_softmax.npy"]


def read(path):
    return cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_UNCHANGED)


@pytest.fixture
def result() -> InferenceResult:
    """Model output 6x4 whose left half is defect (p=0.75), for a 12x8 ROI at (10, 20) of a 40x30 slide."""
    p1 = np.full((4, 6), 0.25, np.float32)
    p1[:, :3] = 0.75
    p1[0, 0] = 1.0
    probabilities = np.stack([1 - p1, p1], axis=-1)
    return InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), Roi(10, 20, 22, 28), (40, 30))


def test_each_kind(tmp_path, result):
    written = export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"))
    assert sorted(p.name for p in written) == ALL_FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ALL_FILES  # nothing else, no temp files
    # Mask at ROI size, 0/255. Upscaling 6 -> 12 columns samples column 2.25 (p 0.625 -> defect) for x=5
    # and 2.75 (p 0.375 -> background) for x=6: the left six columns are defect.
    mask = read(tmp_path / "s1_mask.png")
    expected = np.zeros((8, 12), np.uint8)
    expected[:, :6] = 255
    assert mask.dtype == np.uint8
    np.testing.assert_array_equal(mask, expected)
    canvas = read(tmp_path / "s1_mask_full.png")
    full = np.zeros((30, 40), np.uint8)
    full[20:28, 10:16] = 255
    np.testing.assert_array_equal(canvas, full)
    softmax = np.load(tmp_path / "s1_softmax.npy", allow_pickle=False)
    assert softmax.dtype == np.float32
    np.testing.assert_array_equal(softmax, result.probabilities)
    heatmap = read(tmp_path / "s1_heatmap.png")
    assert heatmap.shape == (4, 6, 3) and heatmap.dtype == np.uint8
    # One colour per probability level, brighter for likelier defect (a perceptual colour map).
    colours = {tuple(heatmap[y, x]) for y in range(4) for x in range(6)}
    assert len(colours) == 3
    np.testing.assert_array_equal(heatmap[:, :3][1:], np.broadcast_to(heatmap[1, 1], (3, 3, 3)))
    np.testing.assert_array_equal(heatmap[:, 3:], np.broadcast_to(heatmap[0, 5], (4, 3, 3)))
    luminance = cv2.cvtColor(heatmap, cv2.COLOR_BGR2GRAY)
    assert luminance[0, 0] > luminance[1, 1] > luminance[3, 5]  # p = 1.0 > 0.75 > 0.25


def test_mask_at_model_resolution_and_multi_class(tmp_path):
    probabilities = np.zeros((2, 3, 3), np.float32)
    labels = np.array([[0, 1, 2], [2, 2, 0]])
    probabilities[np.arange(2)[:, None], np.arange(3), labels] = 1.0
    result = InferenceResult(probabilities, labels.astype(np.uint8), Roi(1, 1, 4, 3), (5, 4))
    export_result(result, tmp_path, Source("m", tmp_path / "m.png"), kinds=["mask", "canvas"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m_mask.png", "m_mask_full.png", "m_provenance.json"]
    np.testing.assert_array_equal(read(tmp_path / "m_mask.png"), labels)  # class indices, not 0/255
    full = np.zeros((4, 5), np.uint8)
    full[1:3, 1:4] = labels
    np.testing.assert_array_equal(read(tmp_path / "m_mask_full.png"), full)


def test_refuses_to_overwrite_and_writes_nothing(tmp_path, result):
    existing = tmp_path / "s1_softmax.npy"
    existing.write_bytes(b"precious")
    before = os.stat(existing)
    with pytest.raises(SegScopeError) as info:
        export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"))
    assert str(info.value) == f"{existing}: already exists (use --overwrite to replace)"
    assert existing.read_bytes() == b"precious" and os.stat(existing).st_mtime_ns == before.st_mtime_ns
    assert [p.name for p in tmp_path.iterdir()] == ["s1_softmax.npy"]


def test_overwrite_replaces(tmp_path, result):
    (tmp_path / "s1_mask.png").write_bytes(b"old")
    (tmp_path / "s1_heatmap.png").write_bytes(b"old")
    with pytest.raises(SegScopeError, match=r"already exists|and 1 more"):
        export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"))
    export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"), overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ALL_FILES
    assert read(tmp_path / "s1_mask.png").shape == (8, 12)


def test_failed_move_leaves_no_partial_item_or_temp_file(tmp_path, result, monkeypatch):
    real_link = os.link
    calls = []

    def failing_link(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_link(src, dst)

    monkeypatch.setattr(os, "link", failing_link)
    with pytest.raises(SegScopeError) as info:
        export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"), kinds=["mask", "canvas", "softmax"])
    assert str(info.value) == (f"{tmp_path / 's1_mask_full.png'}: write failed (No space left on device); "
                               "nothing was changed")
    # The item is all or nothing: the mask moved first is taken back, no temp file or lock is left.
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def test_failure_while_writing_the_temp_file(tmp_path, result, monkeypatch):
    def no_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", no_fsync)
    with pytest.raises(SegScopeError, match=r"s1_softmax\.npy: write failed \(Input/output error\)"):
        export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"), kinds=["softmax"])
    assert list(tmp_path.iterdir()) == []


def test_unknown_kind(tmp_path, result):
    with pytest.raises(SegScopeError, match=r"unknown kind\(s\) or format\(s\) \['masks'\]"):
        export_result(result, tmp_path, Source("s1", tmp_path / "s1.png"), kinds=["masks"])
    assert list(tmp_path.iterdir()) == []


def test_write_metrics(tmp_path):
    rows = [{"id": "1", "soft_dice": 0.5, "dice": (1.0, 0.25)}, {"id": "2", "roi": "0,0,4,4"}]
    summary = {"soft_dice": 0.5, "foreground_dice": math.nan, "images_with_masks": 1}
    paths = write_metrics(rows, summary, tmp_path)
    assert [p.name for p in paths] == ["metrics.csv", "metrics.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv", "metrics.json"]
    with open(tmp_path / "metrics.csv", newline="") as f:
        table = list(csv.DictReader(f))
    # one column per class (dice_0, dice_1), never a Python tuple in a cell
    assert table == [{"id": "1", "soft_dice": "0.5", "dice_0": "1.0", "dice_1": "0.25", "roi": ""},
                     {"id": "2", "soft_dice": "", "dice_0": "", "dice_1": "", "roi": "0,0,4,4"}]
    document = json.loads((tmp_path / "metrics.json").read_text())
    assert document["images"][0] == {"id": "1", "soft_dice": 0.5, "dice": [1.0, 0.25]}
    assert document["summary"] == {"soft_dice": 0.5, "foreground_dice": None, "images_with_masks": 1}
    before = (tmp_path / "metrics.csv").read_bytes()
    with pytest.raises(SegScopeError, match="metrics.csv and 1 more: already exists"):
        write_metrics([{"id": "3"}], summary, tmp_path)
    assert (tmp_path / "metrics.csv").read_bytes() == before
    write_metrics([{"id": "3"}], summary, tmp_path, overwrite=True)
    assert (tmp_path / "metrics.csv").read_text() == "id\n3\n"
