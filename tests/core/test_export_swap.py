"""`eval --export` publishes all or nothing, and the folder is the old export or the new one at every instant.

An overwriting export is stopped at each step of its swap (before and after the exchange of the two
folders, or each of the two renames where the system cannot exchange): at that instant the folder holds
the old export or the new one (or, between the two renames only, nothing: the one step that cannot be
atomic); killed there with SIGKILL it stays so, and the next run puts it right and says what it did. A run
that fails at image 2 (a truncated image, a mask of the wrong size) or is interrupted changes nothing, and
its rerun needs no --overwrite.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
from pathlib import Path

import pytest

from .test_export_safety import assert_every_item_described, cli_run, eval_args, held_export

IDS = ["1", "2", "3", "10"]
OLD_ROI, NEW_ROI = "0,0,32,32", "0,0,64,48"


def version(out_dir: Path) -> dict[str, object] | None:
    """What a reader sees in the folder: every file's content, provenance and metrics by their ROIs (their
    other fields hold times, which differ between runs); None when there is no folder."""
    if not out_dir.exists():
        return None
    seen: dict[str, object] = {}
    for path in sorted(out_dir.iterdir()):
        if path.name.endswith("_provenance.json"):
            seen[path.name] = json.loads(path.read_text())["roi"]
        elif path.name == "metrics.json":
            seen[path.name] = [row["roi"] for row in json.loads(path.read_text())["images"]]
        elif path.name == "metrics.csv":
            seen[path.name] = len(path.read_text().splitlines())
        else:
            seen[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def beside(out_dir: Path) -> list[str]:
    return sorted(p.name for p in out_dir.parent.iterdir() if p.name.startswith(f".{out_dir.name}."))


@pytest.fixture
def versions(tiny_model_project, small_dataset, tmp_path):
    """The old export (ROI 0,0,32,32) in `out`, and what the new one (the images' own ROI) holds, made
    into a folder of its own."""
    out_dir, reference = tmp_path / "out", tmp_path / "reference"
    assert cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--roi", OLD_ROI)).returncode == 0
    assert cli_run(eval_args(tiny_model_project, small_dataset, reference)).returncode == 0
    old, new = version(out_dir), version(reference)
    assert old != new and old["1_provenance.json"] == [0, 0, 32, 32] and new["1_provenance.json"] == [0, 0, 64, 48]
    return out_dir, old, new


#: (exchange available, swap step, before/after it, what the folder holds there): with renameat2 the one
#: exchange; without it, the folder renamed aside (#1) then the new one into place (#2).
STEPS = [(True, 1, "before", "old"), (True, 1, "after", "new"),
         (False, 1, "before", "old"), (False, 1, "after", "none"), (False, 2, "after", "new")]


@pytest.mark.parametrize(("exchange", "step", "when", "holds"), STEPS,
                         ids=[f"{'exchange' if e else 'renames'}-{w}-{s}" for e, s, w, _ in STEPS])
def test_a_kill_at_each_step_of_an_overwriting_export(tiny_model_project, small_dataset, tmp_path, versions,
                                                      exchange, step, when, holds):
    out_dir, old, new = versions
    child, _ = held_export(tmp_path, eval_args(tiny_model_project, small_dataset, out_dir, "--overwrite"),
                           pause_at=step, when=when, exchange=exchange)
    assert version(out_dir) == {"old": old, "new": new, "none": None}[holds]  # a reader, at that instant
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert version(out_dir) == {"old": old, "new": new, "none": None}[holds]
    assert beside(out_dir)  # what the killed run left beside the folder, for the next run to recognise
    if holds == "none":  # killed between the renames: the next run puts the old export back, even one that
        again = cli_run(eval_args(tiny_model_project, small_dataset, out_dir))  # then refuses to overwrite
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already exists" in again.stderr
        assert version(out_dir) == old and beside(out_dir) == []
    again = cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--overwrite"))
    assert again.returncode == 0, again.stderr
    said = [line for line in again.stderr.splitlines() if "interrupted write" in line]
    assert len(said) == (holds != "none") and all(line.startswith("segscope: warning: ") for line in said), \
        again.stderr  # what it found and did, in one line (the run before said it, had it not failed)
    assert version(out_dir) == new and beside(out_dir) == []
    assert_every_item_described(out_dir, IDS)


@pytest.mark.parametrize(("exchange", "step"), [(True, 1), (False, 1), (False, 2)],
                         ids=["after-the-exchange", "folder-aside", "new-folder-in-place"])
def test_ctrl_c_as_the_export_is_published_leaves_the_folder_as_it_was(tiny_model_project, small_dataset,
                                                                      tmp_path, versions, exchange, step):
    out_dir, old, _ = versions
    child, _ = held_export(tmp_path, eval_args(tiny_model_project, small_dataset, out_dir, "--overwrite"),
                           pause_at=step, when="after", exchange=exchange)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130 and err.splitlines()[-1] == "segscope: interrupted", err
    assert version(out_dir) == old and beside(out_dir) == []


def truncate(path: Path) -> bytes:
    """Cut a PNG after its header: its size still reads, its pixels do not."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return data


@pytest.mark.parametrize("earlier", [False, True], ids=["new-folder", "overwriting-an-earlier-export"])
def test_a_failed_eval_at_image_2_changes_nothing_and_the_rerun_needs_no_overwrite(
        tiny_model_project, small_dataset, tmp_path, earlier):
    out_dir = tmp_path / "out"
    extra = ["--overwrite"] if earlier else []
    if earlier:  # an earlier export there stays exactly as it was, though the failed run may overwrite it
        assert cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--roi", OLD_ROI)).returncode == 0
    before = version(out_dir)
    image = small_dataset / "2" / "image.png"
    intact = truncate(image)
    failed = cli_run(eval_args(tiny_model_project, small_dataset, out_dir, "--export-kinds", "mask,softmax,coco",
                               *extra))
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and str(image) in failed.stderr
    assert failed.stdout.startswith("image: ")  # image 1 was run, and its line said, before image 2 failed
    assert version(out_dir) == before and beside(out_dir) == []
    image.write_bytes(intact)
    again = cli_run(eval_args(tiny_model_project, small_dataset, out_dir, *extra))
    assert again.returncode == 0, again.stderr
    assert_every_item_described(out_dir, IDS)


def test_a_mask_of_the_wrong_size_is_refused_before_the_first_image(tiny_model_project, small_dataset, tmp_path):
    out_dir = tmp_path / "out"
    mask = small_dataset / "2" / "mask.png"
    shutil.copyfile(small_dataset / "2" / "mask.png", tmp_path / "mask.png")
    import cv2
    cv2.imwrite(str(mask), cv2.imread(str(mask), cv2.IMREAD_UNCHANGED)[:40])
    failed = cli_run(eval_args(tiny_model_project, small_dataset, out_dir))
    assert failed.returncode == 2 and failed.stdout == ""  # not a line printed: the headers said it all
    assert failed.stderr == (f"segscope: error: {mask}: mask is 64x40 but the image is 64x48; "
                              "save the mask at the image's size, one value a pixel\n")
    assert not out_dir.exists() and beside(out_dir) == []
    shutil.copyfile(tmp_path / "mask.png", mask)
    assert cli_run(eval_args(tiny_model_project, small_dataset, out_dir)).returncode == 0
