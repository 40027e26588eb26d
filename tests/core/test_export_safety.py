"""Exports under races, kills and bad targets: never a mixed, half-described or clobbered file.

A child `segscope eval --export` is held inside a file move (the "slow rename") by a small wrapper that
waits for a go-file, so the tests order events by files, not by timing.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import InferenceResult
from segscope.core.errors import SegScopeError
from segscope.core.export.files import LOCK_NAME, ExportFolder, export_result
from segscope.core.export.provenance import Source
from segscope.core.roi import Roi

from helpers import without_cache_note

#: Runs the CLI with a file move pausing after its Nth call until GO exists: `file_group.publish` (the
#: no-clobber moves) or, with HOLD=replace, `os.replace` (the moves of an --overwrite export).
HELD_EXPORT = """
import os, sys, time
from segscope.core import cli
from segscope.core.files import file_group
calls = []
def holding(real):
    def held(*args, **kwargs):
        done = real(*args, **kwargs)
        calls.append(args)
        if len(calls) == int(os.environ["PAUSE_AT"]):
            open(os.environ["PAUSED"], "w").close()
            while not os.path.exists(os.environ["GO"]):
                time.sleep(0.02)
        return done
    return held
if os.environ.get("HOLD") == "replace":
    file_group.os.replace = holding(os.replace)
else:
    file_group.publish = holding(file_group.publish)
sys.exit(cli.main(sys.argv[1:]))
"""


def wait_for(path: Path, child: subprocess.Popen, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not path.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < end, "the held export never reached its pause"
        time.sleep(0.02)


def held_export(tmp_path: Path, args: list[str], pause_at: int, hold: str = "publish"
                ) -> tuple[subprocess.Popen, Path, Path]:
    script = tmp_path / "held_export.py"
    script.write_text(HELD_EXPORT)
    paused, go = tmp_path / "paused", tmp_path / "go"
    env = {**os.environ, "PAUSE_AT": str(pause_at), "PAUSED": str(paused), "GO": str(go), "HOLD": hold}
    child = subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_for(paused, child)
    return child, paused, go


def cli_run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "segscope.core.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def assert_every_item_described(out_dir: Path, ids: list[str]) -> None:
    """Each item's files are exactly those its provenance hashes, byte for byte; no temp file is left."""
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")], sorted(os.listdir(out_dir))
    for item in ids:
        document = json.loads((out_dir / f"{item}_provenance.json").read_text())
        for entry in document["files"]:
            data = (out_dir / entry["name"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["name"]


def eval_args(project, dataset: Path, out_dir: Path, *extra: str) -> list[str]:
    return ["eval", "--dataset", str(dataset), "--pipeline", str(project.pipeline), "--export", str(out_dir),
            "--export-kinds", "mask,softmax", *extra]


def test_a_second_export_into_the_folder_is_refused_while_one_runs(tiny_model_project, small_dataset, tmp_path):
    out_dir = tmp_path / "out"
    first, _, go = held_export(tmp_path, eval_args(tiny_model_project, small_dataset, out_dir), pause_at=2)
    # Held inside its moves, after item 1's mask: a second run with the same ids, with and without
    # --overwrite, must not write a byte there.
    before = sorted(os.listdir(out_dir))
    for extra in ([], ["--overwrite"]):
        second = cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--roi", "0,0,32,32", *extra))
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1 and f"{out_dir}: another export (process {first.pid})" in second.stderr
        assert sorted(os.listdir(out_dir)) == before
    go.touch()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert_every_item_described(out_dir, ["1", "2", "3", "10"])
    rows = json.loads((out_dir / "metrics.json").read_text())["images"]
    assert {row["roi"] for row in rows} == {"0,0,64,48"}  # the first run's, not the second's 0,0,32,32
    assert not (out_dir / LOCK_NAME).exists()


def test_a_kill_during_the_moves_is_cleaned_up_by_the_next_run(tiny_model_project, small_dataset, tmp_path):
    out_dir = tmp_path / "out"
    child, _, _ = held_export(tmp_path, eval_args(tiny_model_project, small_dataset, out_dir), pause_at=1)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    # Killed between item 1's mask and its provenance: the softmax and the sidecar are still temp files.
    leftovers = sorted(p.name for p in out_dir.iterdir() if p.name.startswith(".") and p.name != LOCK_NAME)
    assert len(leftovers) == 2 and all(name.endswith(".tmp") for name in leftovers)
    assert not (out_dir / "1_provenance.json").exists()
    again = cli_run(eval_args(tiny_model_project, small_dataset, out_dir))
    assert again.returncode == 2 and again.stderr.count("\n") == 1  # the error line alone: no warning before it
    assert "1_mask.png: already exists" in again.stderr  # never silently replaced
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".tmp")]  # the killed run's temp files went
    again = cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--overwrite"))
    assert again.returncode == 0 and without_cache_note(again.stderr) == ""
    assert_every_item_described(out_dir, ["1", "2", "3", "10"])


@pytest.fixture
def result() -> InferenceResult:
    p1 = np.zeros((4, 6), np.float32)
    p1[:, :3] = 0.9
    return InferenceResult(np.stack([1 - p1, p1], axis=-1), (p1 > 0.5).astype(np.uint8), Roi(0, 0, 6, 4), (6, 4))


def test_an_export_inside_the_dataset_is_refused(tmp_path, result, write_png):
    flat = tmp_path / "flat"
    image = write_png(flat / "a.png", np.zeros((4, 6, 3), np.uint8))
    truth = write_png(flat / "a_mask.png", np.zeros((4, 6), np.uint8))
    before = truth.read_bytes()
    for out_dir in (flat, flat / "exports"):
        with pytest.raises(SegScopeError, match="choose a folder outside it"):
            with ExportFolder(out_dir, overwrite=True, dataset_root=flat) as folder:
                folder.export_result(result, Source("a", image))
    # Without the dataset named (the viewer's one-shot export), the image's own folder is refused too.
    with pytest.raises(SegScopeError, match=f"{flat}: lies in the folder of the image"):
        export_result(result, flat, Source("a", image), overwrite=True)
    assert truth.read_bytes() == before and sorted(os.listdir(flat)) == ["a.png", "a_mask.png"]


def test_exports_are_never_taken_for_images_or_ground_truth(tmp_path, result, write_png):
    from segscope.core.dataset.dataset import Dataset

    flat = tmp_path / "flat"
    write_png(flat / "a.png", np.zeros((4, 6, 3), np.uint8))
    export_result(result, tmp_path / "elsewhere", Source("a", flat / "a.png"), kinds=["mask", "canvas", "heatmap"])
    for name in os.listdir(tmp_path / "elsewhere"):  # an older export copied into the dataset
        (flat / name).write_bytes((tmp_path / "elsewhere" / name).read_bytes())
    dataset = Dataset.open(flat)
    assert [(i.id, i.mask_path) for i in dataset.items] == [("a", None)]


def test_modes_new_files_get_the_umask_default_and_replaced_files_keep_theirs(tmp_path, result):
    old_umask = os.umask(0o027)
    try:
        export_result(result, tmp_path, Source("s", tmp_path / "s.png"), kinds=["mask"])
        assert (tmp_path / "s_mask.png").stat().st_mode & 0o777 == 0o640
        assert (tmp_path / "s_provenance.json").stat().st_mode & 0o777 == 0o640
        os.chmod(tmp_path / "s_mask.png", 0o664)
        export_result(result, tmp_path, Source("s", tmp_path / "s.png"), kinds=["mask"], overwrite=True)
        assert (tmp_path / "s_mask.png").stat().st_mode & 0o777 == 0o664
        assert (tmp_path / "s_provenance.json").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old_umask)


def test_a_file_appearing_during_an_export_is_never_overwritten(tmp_path, result, monkeypatch):
    """The check before writing and the move are not one step: the move itself must refuse a clash."""
    from segscope.core.export import files as export_module

    real = export_module.write_temp

    def racing_write_temp(path, data):
        if path.name == "s_softmax.npy":  # another program creates it between the check and the move
            path.write_bytes(b"theirs")
        return real(path, data)

    monkeypatch.setattr(export_module, "write_temp", racing_write_temp)
    with pytest.raises(SegScopeError, match="s_softmax.npy: already exists"):
        export_result(result, tmp_path, Source("s", tmp_path / "s.png"), kinds=["mask", "softmax"])
    assert (tmp_path / "s_softmax.npy").read_bytes() == b"theirs"
    assert sorted(os.listdir(tmp_path)) == ["s_softmax.npy"]  # our mask was taken back: no half item


@pytest.mark.parametrize("writer", ["annotation replace", "ROI sidecar"])
def test_other_replacing_writers_keep_the_mode(tmp_path, write_png, writer):
    from segscope.core.dataset.dataset import Dataset
    from segscope.core.editing.files import save_mask
    from segscope.core.roi import Roi as Box

    write_png(tmp_path / "a" / "image.png", np.zeros((4, 6, 3), np.uint8))
    target = write_png(tmp_path / "a" / "mask.png", np.zeros((4, 6), np.uint8))
    if writer == "ROI sidecar":
        target = tmp_path / "segscope.json"
        target.write_text('{"rois": {}}')
    os.chmod(target, 0o644)
    old_umask = os.umask(0o077)
    try:
        if writer == "annotation replace":
            save_mask(np.full((4, 6), 255, np.uint8), target, "replace")
        else:
            dataset = Dataset.open(tmp_path)
            dataset.set_roi(dataset.items[0], Box(0, 0, 2, 2))
    finally:
        os.umask(old_umask)
    assert target.stat().st_mode & 0o777 == 0o644


def test_mask_exports_stay_readable_masks(tmp_path, result):
    export_result(result, tmp_path, Source("s", tmp_path / "s.png"), kinds=["mask"])
    mask = cv2.imread(str(tmp_path / "s_mask.png"), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(mask, np.where(np.arange(6) < 3, 255, 0)[None].repeat(4, 0))


def test_the_campaign_case_export_into_a_flat_dataset_with_overwrite(tiny_model_project, small_dataset, tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.png").write_bytes((small_dataset / "1" / "image.png").read_bytes())
    (flat / "a_mask.png").write_bytes((small_dataset / "1" / "mask.png").read_bytes())
    before = sorted(os.listdir(flat)), (flat / "a_mask.png").read_bytes()
    done = cli_run(["eval", "--dataset", str(flat), "--pipeline", str(tiny_model_project.pipeline), "--export",
                    str(flat), "--overwrite"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "choose a folder outside it" in done.stderr
    assert (sorted(os.listdir(flat)), (flat / "a_mask.png").read_bytes()) == before
