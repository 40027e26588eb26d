"""Exported files: their content, overwrite refusal and atomicity (the export folder is `out` inside the
test's folder: its new version, its lock and any leftover live beside it)."""

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
def out(tmp_path):
    return tmp_path / "out"


def names(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def nothing_beside(out):
    """No staging folder, old version or lock file of the export is left beside `out`."""
    return [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


@pytest.fixture
def result() -> InferenceResult:
    """Model output 6x4 whose left half is defect (p=0.75), for a 12x8 ROI at (10, 20) of a 40x30 slide."""
    p1 = np.full((4, 6), 0.25, np.float32)
    p1[:, :3] = 0.75
    p1[0, 0] = 1.0
    probabilities = np.stack([1 - p1, p1], axis=-1)
    return InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), Roi(10, 20, 22, 28), (40, 30))


def test_each_kind(out, result):
    written = export_result(result, out, Source("s1", out.parent / "s1.png"))
    assert sorted(p.name for p in written) == ALL_FILES
    assert names(out) == ALL_FILES and nothing_beside(out)  # nothing else, no temp files
    # Mask at ROI size, 0/255. Upscaling 6 -> 12 columns samples column 2.25 (p 0.625 -> defect) for x=5
    # and 2.75 (p 0.375 -> background) for x=6: the left six columns are defect.
    mask = read(out / "s1_mask.png")
    expected = np.zeros((8, 12), np.uint8)
    expected[:, :6] = 255
    assert mask.dtype == np.uint8
    np.testing.assert_array_equal(mask, expected)
    canvas = read(out / "s1_mask_full.png")
    full = np.zeros((30, 40), np.uint8)
    full[20:28, 10:16] = 255
    np.testing.assert_array_equal(canvas, full)
    softmax = np.load(out / "s1_softmax.npy", allow_pickle=False)
    assert softmax.dtype == np.float32
    np.testing.assert_array_equal(softmax, result.probabilities)
    # The heatmap is the mask's size (the ROI's), so the two overlay: colours of the viewer's colour map.
    heatmap = read(out / "s1_heatmap.png")
    assert heatmap.shape == (8, 12, 3) and heatmap.dtype == np.uint8

    def colour(p):
        return cv2.applyColorMap(np.uint8([[round(p * 255)]]), cv2.COLORMAP_VIRIDIS)[0, 0]

    # Columns 2-3 sample source columns 0.75-1.25 and rows 3-7 rows 1.25-3.25: all 0.75, away from (0, 0).
    # Columns 8-11 sample source columns 3.75 onwards: all 0.25.
    np.testing.assert_array_equal(heatmap[3:, 2:4], np.broadcast_to(colour(0.75), (5, 2, 3)))
    np.testing.assert_array_equal(heatmap[:, 8:], np.broadcast_to(colour(0.25), (8, 4, 3)))
    luminance = cv2.cvtColor(heatmap, cv2.COLOR_BGR2GRAY)
    assert luminance[0, 0] > luminance[4, 2] > luminance[4, 10]  # p = 1.0 > 0.75 > 0.25


def test_mask_at_model_resolution_and_multi_class(out):
    probabilities = np.zeros((2, 3, 3), np.float32)
    labels = np.array([[0, 1, 2], [2, 2, 0]])
    probabilities[np.arange(2)[:, None], np.arange(3), labels] = 1.0
    result = InferenceResult(probabilities, labels.astype(np.uint8), Roi(1, 1, 4, 3), (5, 4))
    export_result(result, out, Source("m", out.parent / "m.png"), kinds=["mask", "canvas"])
    assert names(out) == ["m_mask.png", "m_mask_full.png", "m_provenance.json"]
    np.testing.assert_array_equal(read(out / "m_mask.png"), labels)  # class indices, not 0/255
    full = np.zeros((4, 5), np.uint8)
    full[1:3, 1:4] = labels
    np.testing.assert_array_equal(read(out / "m_mask_full.png"), full)


def test_refuses_to_overwrite_and_writes_nothing(out, result):
    out.mkdir()
    existing = out / "s1_softmax.npy"
    existing.write_bytes(b"precious")
    before = os.stat(existing)
    with pytest.raises(SegScopeError) as info:
        export_result(result, out, Source("s1", out.parent / "s1.png"))
    assert str(info.value) == f"{existing}: already exists (use --overwrite to replace)"
    assert existing.read_bytes() == b"precious" and os.stat(existing).st_mtime_ns == before.st_mtime_ns
    assert names(out) == ["s1_softmax.npy"] and nothing_beside(out)


def test_overwrite_replaces(out, result):
    out.mkdir()
    (out / "s1_mask.png").write_bytes(b"old")
    (out / "s1_heatmap.png").write_bytes(b"old")
    with pytest.raises(SegScopeError, match=r"already exists|and 1 more"):
        export_result(result, out, Source("s1", out.parent / "s1.png"))
    export_result(result, out, Source("s1", out.parent / "s1.png"), overwrite=True)
    assert names(out) == ALL_FILES and nothing_beside(out)
    assert read(out / "s1_mask.png").shape == (8, 12)


def test_other_files_in_the_folder_are_kept_and_a_folder_in_it_is_refused(out, result):
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    export_result(result, out, Source("s1", out.parent / "s1.png"), kinds=["mask"])
    assert names(out) == ["notes.txt", "s1_mask.png", "s1_provenance.json"]
    assert (out / "notes.txt").read_text() == "mine"
    (out / "data").mkdir()
    with pytest.raises(SegScopeError, match=r"data: a folder inside .*replaced as a whole"):
        export_result(result, out, Source("s2", out.parent / "s2.png"), kinds=["mask"])
    assert names(out) == ["data", "notes.txt", "s1_mask.png", "s1_provenance.json"] and nothing_beside(out)


def test_a_failed_write_leaves_the_folder_as_it_was(out, result, monkeypatch):
    """The disk fills at the second file: nothing of the export reaches the folder, nothing is left beside."""
    export_result(result, out, Source("s0", out.parent / "s0.png"), kinds=["mask"])
    before = {name: (out / name).read_bytes() for name in names(out)}
    real_fsync, calls = os.fsync, []

    def failing_fsync(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(SegScopeError) as info:
        export_result(result, out, Source("s1", out.parent / "s1.png"), kinds=["mask", "canvas", "softmax"])
    assert str(info.value) == (f"{out / 's1_mask_full.png'}: write failed (No space left on device); {out} was "
                               "not changed")
    assert {name: (out / name).read_bytes() for name in names(out)} == before and nothing_beside(out)


def test_unknown_kind(out, result):
    with pytest.raises(SegScopeError, match=r"unknown kind\(s\) or format\(s\) \['masks'\]"):
        export_result(result, out, Source("s1", out.parent / "s1.png"), kinds=["masks"])
    assert not out.exists() and nothing_beside(out)


def test_write_metrics(out):
    rows = [{"id": "1", "soft_dice": 0.5, "dice": (1.0, 0.25)}, {"id": "2", "roi": "0,0,4,4"}]
    summary = {"soft_dice": 0.5, "foreground_dice": math.nan, "images_with_masks": 1}
    paths = write_metrics(rows, summary, out)
    assert [p.name for p in paths] == ["metrics.csv", "metrics.json"]
    assert names(out) == ["metrics.csv", "metrics.json"]
    with open(out / "metrics.csv", newline="") as f:
        table = list(csv.DictReader(f))
    # one column per class (dice_0, dice_1), never a Python tuple in a cell
    assert table == [{"id": "1", "soft_dice": "0.5", "dice_0": "1.0", "dice_1": "0.25", "roi": ""},
                     {"id": "2", "soft_dice": "", "dice_0": "", "dice_1": "", "roi": "0,0,4,4"}]
    document = json.loads((out / "metrics.json").read_text())
    assert document["images"][0] == {"id": "1", "soft_dice": 0.5, "dice": [1.0, 0.25]}
    assert document["summary"] == {"soft_dice": 0.5, "foreground_dice": None, "images_with_masks": 1}
    before = (out / "metrics.csv").read_bytes()
    with pytest.raises(SegScopeError, match=r"metrics.csv and 1 more file: each already exists \(use --overwrite"):
        write_metrics([{"id": "3"}], summary, out)
    assert (out / "metrics.csv").read_bytes() == before
    write_metrics([{"id": "3"}], summary, out, overwrite=True)
    assert (out / "metrics.csv").read_text() == "id\n3\n"
