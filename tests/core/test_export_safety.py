"""Exports under races, kills and bad targets: never a mixed, half-described or clobbered folder.

A child `segscope eval --export` is held at a step of the swap that publishes its export (a rename, or the
exchange of the two folders: `core.files.atomic_folder`) by a small wrapper that waits for a go-file, so the
tests order events by files, not by timing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import InferenceResult
from segscope.core.errors import SegScopeError
from segscope.core.export.files import ExportFolder, export_result
from segscope.core.export.provenance import Source
from segscope.core.files.atomic_folder import lock_path
from segscope.core.roi import Roi

#: Runs the CLI with the swap's Nth step (`atomic_folder.rename` or `.exchange`) paused, BEFORE or AFTER it
#: runs, until GO exists; with EXCHANGE=0 the system is taken to have no renameat2(RENAME_EXCHANGE).
HELD_EXPORT = """
import os, sys, time
from segscope.core import cli
from segscope.core.files import atomic_folder
calls = []
def pause():
    open(os.environ["PAUSED"], "w").close()
    while not os.path.exists(os.environ["GO"]):
        time.sleep(0.02)
def holding(real):
    def held(*args):
        calls.append(args)
        at = len(calls) == int(os.environ["PAUSE_AT"])
        if at and os.environ["WHEN"] == "before":
            pause()
        done = real(*args)
        if at and os.environ["WHEN"] == "after":
            pause()
        return done
    return held
if os.environ["EXCHANGE"] == "0":
    atomic_folder.exchange = lambda a, b: False
else:
    atomic_folder.exchange = holding(atomic_folder.exchange)
atomic_folder.rename = holding(atomic_folder.rename)
sys.exit(cli.main(sys.argv[1:]))
"""


def wait_for(path: Path, child: subprocess.Popen, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not path.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < end, "the held export never reached its pause"
        time.sleep(0.02)


def held_export(tmp_path: Path, args: list[str], pause_at: int, when: str = "before", exchange: bool = True
                ) -> tuple[subprocess.Popen, Path]:
    """A child running `segscope ARGS`, paused at the swap's step `pause_at`; touch the returned go-file to
    let it go on."""
    script = tmp_path / "held_export.py"
    script.write_text(HELD_EXPORT)
    paused, go = tmp_path / "paused", tmp_path / "go"
    for flag in (paused, go):
        flag.unlink(missing_ok=True)
    env = {**os.environ, "PAUSE_AT": str(pause_at), "WHEN": when, "PAUSED": str(paused), "GO": str(go),
           "EXCHANGE": "1" if exchange else "0"}
    child = subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_for(paused, child)
    return child, go


def cli_run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "segscope.core.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def assert_every_item_described(out_dir: Path, ids: list[str]) -> None:
    """Each item's files are exactly those its provenance hashes, byte for byte; no temp file is left, in the
    folder or beside it."""
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")], sorted(os.listdir(out_dir))
    assert not [p for p in out_dir.parent.iterdir() if p.name.startswith(f".{out_dir.name}.")]
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
    first, go = held_export(tmp_path, eval_args(tiny_model_project, small_dataset, out_dir), pause_at=1)
    # Held at its one rename (the new folder into place): a second run with the same ids, with and without
    # --overwrite, must not write a byte there, nor see a half export.
    assert not out_dir.exists()
    for extra in ([], ["--overwrite"]):
        second = cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--roi", "0,0,32,32", *extra))
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1 and f"{out_dir}: another export (process {first.pid})" in second.stderr
        assert not out_dir.exists()
    go.touch()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert_every_item_described(out_dir, ["1", "2", "3", "10"])
    rows = json.loads((out_dir / "metrics.json").read_text())["images"]
    assert {row["roi"] for row in rows} == {"0,0,64,48"}  # the first run's, not the second's 0,0,32,32
    assert not lock_path(out_dir).exists()


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
    out = tmp_path / "out"
    old_umask = os.umask(0o027)
    try:
        export_result(result, out, Source("s", tmp_path / "s.png"), kinds=["mask"])
        assert (out / "s_mask.png").stat().st_mode & 0o777 == 0o640
        assert (out / "s_provenance.json").stat().st_mode & 0o777 == 0o640
        assert out.stat().st_mode & 0o777 == 0o750  # the folder too
        os.chmod(out / "s_mask.png", 0o664)
        os.chmod(out, 0o755)
        export_result(result, out, Source("s", tmp_path / "s.png"), kinds=["mask"], overwrite=True)
        assert (out / "s_mask.png").stat().st_mode & 0o777 == 0o664
        assert (out / "s_provenance.json").stat().st_mode & 0o777 == 0o640
        assert out.stat().st_mode & 0o777 == 0o755  # the new version of the folder keeps the old one's mode
    finally:
        os.umask(old_umask)


def test_a_file_another_program_writes_during_an_export_is_never_lost(tmp_path, result, monkeypatch, caplog):
    """The export replaces the folder as a whole: what appeared in it meanwhile is kept, not deleted."""
    from segscope.core.export import files as export_module

    out = tmp_path / "out"
    export_result(result, out, Source("a", tmp_path / "a.png"), kinds=["mask"])
    real = export_module.sha256_file

    def racing_hash(path):  # another program writes into the folder while the export runs
        (out / "s_softmax.npy").write_bytes(b"theirs")
        (out / "a_mask.png").write_bytes(b"changed by them")
        return real(path)

    monkeypatch.setattr(export_module, "sha256_file", racing_hash)
    export_result(result, out, Source("s", tmp_path / "s.png"), kinds=["mask", "softmax"])
    assert sorted(os.listdir(out)) == ["a_mask.png", "a_provenance.json", "s_mask.png", "s_provenance.json",
                                       "s_softmax.npy"]
    (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith("out.segscope-kept-")]
    assert (kept / "s_softmax.npy").read_bytes() == b"theirs"  # beside the export, with a warning
    assert (kept / "a_mask.png").read_bytes() == b"changed by them"
    assert [r.getMessage() for r in caplog.records if "kept in" in r.getMessage()] == [
        f"{out}: 2 file(s) another program added or changed there while it was being written are kept in "
        f"{kept.name} beside it"]


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
    export_result(result, tmp_path / "out", Source("s", tmp_path / "s.png"), kinds=["mask"])
    mask = cv2.imread(str(tmp_path / "out" / "s_mask.png"), cv2.IMREAD_UNCHANGED)
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
