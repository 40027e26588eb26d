"""Every writer is staged, locked and cleaned like `--export`: a card project, the int8 cache, a stitched
OME-TIFF export. What a killed run leaves is gone after the next run, a second writer into a locked folder
is refused, and a cache entry is checked by its hash before use (an --overwrite export killed at each step:
test_export_swap.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest

from segscope.core.files.atomic_folder import lock_path
from segscope.core.files.fileio import STAGING_LOCK, STAGING_PREFIX, staging_folder
from segscope.core.files.folder_lock import FolderLock

from .test_export_safety import assert_every_item_described
from helpers import run_cli


def left_by_a_killed_run(folder: Path) -> Path:
    """A staging folder as a killed writer leaves it: partial content, its lock file free."""
    staging = folder / f"{STAGING_PREFIX}killed"
    (staging / "models").mkdir(parents=True)
    (staging / "models" / "half.onnx").write_bytes(b"\0" * 4096)
    (staging / STAGING_LOCK).write_text("12345\n")
    return staging


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*"))


def test_a_card_into_a_folder_another_card_is_writing_is_refused(tmp_path, capsys, byo):
    model = byo.Net().save(tmp_path / "m.onnx")
    out = tmp_path / "proj"
    out.mkdir()
    with FolderLock(lock_path(out), "segscope card", out):  # another `segscope card` is writing there
        code, _ = run_cli("card", model, "--out", out, "--scale", "1/255")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"another segscope card (process {os.getpid()})" in err
    assert sorted(os.listdir(out)) == []


def test_what_a_killed_card_left_goes_with_the_next_run_and_a_live_staging_stays(tmp_path, capsys, byo):
    model = byo.Net().save(tmp_path / "m.onnx")
    out = tmp_path / "proj"
    out.mkdir()
    killed = left_by_a_killed_run(out)
    with staging_folder(out) as alive:  # another writer's, still running
        code, _ = run_cli("card", model, "--out", out, "--scale", "1/255")
        assert code == 0, capsys.readouterr().err
        assert not killed.exists() and alive.is_dir()
    assert hidden(out) == [] and (out / "models" / "m.json").is_file()


def test_an_external_weight_file_linked_from_outside_the_models_folder_is_refused(tmp_path, capsys, byo):
    onnx = pytest.importorskip("onnx")
    source = tmp_path / "source"
    source.mkdir()
    model = onnx.load(str(byo.Net(size=64).save(source / "big.onnx")))
    onnx.save(model, str(source / "big.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="big.bin", size_threshold=0)
    secret = tmp_path / "private.key"
    secret.write_bytes((source / "big.bin").read_bytes())  # any readable file of the right size
    (source / "big.bin").unlink()
    (source / "big.bin").symlink_to(secret)
    code, _ = run_cli("card", source / "big.onnx", "--out", tmp_path / "proj", "--scale", "1/255")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "lies outside" in err and "big.bin" in err
    assert not (tmp_path / "proj" / "models").exists()


def test_a_replaced_or_damaged_int8_cache_entry_is_made_again_in_one_line(tiny_model_project, small_dataset,
                                                                         tmp_path, capsys):
    pytest.importorskip("onnx")
    cache = tmp_path / "cache"
    args = ["eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json",
            "--precision", "int8", "--precision-cache", cache, "--precision-check", "0"]
    code, first = run_cli(*args)
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    (entry,) = cache.glob("*.onnx")  # (beside it, the note of the run that took it)
    original = entry.read_bytes()
    assert entry.name.endswith(f"-{hashlib.sha256(original).hexdigest()[:16]}.onnx")  # named by its content
    left_by_a_killed_run(cache)
    for damage in (tiny_model_project.onnx.read_bytes(), b"\x08garbage" * 100):  # another valid model; garbage
        entry.write_bytes(damage)
        code, again = run_cli(*args)
        err = capsys.readouterr().err
        assert code == 0 and json.loads(again)["summary"] == json.loads(first)["summary"]
        warnings = [line for line in err.splitlines() if "int8 model" in line]
        assert len(warnings) == 1 and "does not match its hash" in warnings[0] and "making it again" in warnings[0]
        assert "Traceback" not in err and "openvino" not in err.lower().replace("openvino ", ""), err
        assert sorted(cache.glob("*.onnx")) == [entry] and entry.read_bytes() == original  # rebuilt, debris gone
        assert len(list(cache.iterdir())) == 2  # and the note


def test_int8_without_a_cache_leaves_nothing_in_the_temporary_folder(tiny_model_project, small_dataset, tmp_path,
                                                                     monkeypatch):
    pytest.importorskip("onnx")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    left_by_a_killed_run(scratch)
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--precision",
                      "int8", "--precision-check", "0", "--no-cache")  # (else the int8 model goes to the cache)
    assert code == 0 and os.listdir(scratch) == []


def tiled(project, dataset: Path, out_dir: Path, stitched: str, *extra: str) -> list[str]:
    return ["eval", "--dataset", str(dataset), "--pipeline", str(project.pipeline), "--tile", "32", "--export",
            str(out_dir), "--export-kinds", "mask,heatmap", "--stitched-format", stitched, *extra]


def test_an_ome_tiff_export_over_a_png_one_leaves_no_stale_file_nor_scratch(tiny_model_project, small_dataset,
                                                                           tmp_path, monkeypatch):
    out_dir = tmp_path / "out"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert run_cli(*tiled(tiny_model_project, small_dataset, out_dir, "png"))[0] == 0
    assert (out_dir / "1_mask.png").is_file()
    left_by_a_killed_run(out_dir)
    assert run_cli(*tiled(tiny_model_project, small_dataset, out_dir, "ome-tiff", "--overwrite"))[0] == 0
    items = ["1", "2", "3", "10"]
    names = {f"{item}_{kind}" for item in items for kind in ("mask.tif", "heatmap.tif", "provenance.json")}
    assert set(os.listdir(out_dir)) == names | {"metrics.csv", "metrics.json"}  # no PNG of the earlier export
    assert_every_item_described(out_dir, items)
    assert os.listdir(scratch) == []  # the OME-TIFF scratch lived in the (locked) export folder
