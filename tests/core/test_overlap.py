"""Overlapped evaluation (read-ahead, scoring beside inference) gives exactly the sequential output."""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import CancelledError, SegScopeError
from segscope.core.evaluate import evaluate_dataset
from segscope.core.roi import Roi

from helpers import run_cli


def without_times(rows: list[dict]) -> list[dict]:
    """Rows minus the stage times (wall-clock figures that differ from run to run)."""
    return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in rows]


@pytest.fixture
def dataset_of_six(small_dataset: Path, tmp_path: Path, write_png) -> Path:
    """The small dataset plus two larger slides, so the read-ahead has images of different sizes in flight."""
    rng = np.random.default_rng(3)
    for item, (w, h) in (("4", (97, 61)), ("5", (80, 80))):
        image = rng.integers(150, 240, (h, w, 3), dtype=np.uint8)
        mask = np.zeros((h, w), np.uint8)
        image[10:30, 20:50] = 20
        mask[10:30, 20:50] = 255
        write_png(small_dataset / item / "image.png", image)
        write_png(small_dataset / item / "mask.png", mask)
    return small_dataset


def test_printed_lines_json_and_exports_are_identical(tiny_model_project, dataset_of_six, tmp_path, capsys):
    pipeline = tiny_model_project.pipeline
    outputs = {}
    for flag in ("", "--no-overlap"):
        extra = [flag] if flag else []
        code, lines = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", pipeline, *extra)
        assert code == 0, capsys.readouterr().err
        code, document = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", pipeline, "--json", *extra)
        assert code == 0
        export = tmp_path / f"export{flag}"
        code, _ = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", pipeline, "--export", export, *extra)
        assert code == 0
        files: dict[str, object] = {p.relative_to(export).as_posix(): p.read_bytes()
                                    for p in export.rglob("*") if p.is_file()}
        for name in [n for n in files if n.endswith("_provenance.json")]:  # all but when it was written
            files[name] = {k: v for k, v in json.loads(files[name]).items() if k != "created"}  # type: ignore[arg-type]
        parsed = json.loads(document)
        with (export / "metrics.csv").open(newline="") as f:
            table = without_times(list(csv.DictReader(f)))
        outputs[flag] = {
            "lines": lines, "json": (without_times(parsed["images"]), parsed["summary"]), "csv": table,
            "metrics.json": without_times(json.loads(files.pop("metrics.json"))["images"]),
            "files": {name: data for name, data in files.items() if name != "metrics.csv"},
        }
    overlapped, sequential = outputs[""], outputs["--no-overlap"]
    assert len(sequential["lines"].splitlines()) == 9  # 6 images + 3 summary lines
    assert [line.split(",")[0] for line in overlapped["lines"].splitlines()[:6]] == \
        [f"image: {dataset_of_six / item / 'image.png'}" for item in ("1", "2", "3", "4", "5", "10")]
    assert len(overlapped["files"]) > 6 and set(overlapped["files"]) == set(sequential["files"])
    for key in ("lines", "json", "csv", "metrics.json", "files"):
        assert overlapped[key] == sequential[key], key


@pytest.mark.parametrize("overlap", [True, False])
def test_an_image_that_cannot_be_decoded_fails_after_the_lines_before_it(tiny_model_project, dataset_of_six,
                                                                         capsys, overlap):
    broken = dataset_of_six / "4" / "image.png"
    broken.write_bytes(broken.read_bytes()[:100])  # its header reads (checked before image 1), its pixels do not
    extra = [] if overlap else ["--no-overlap"]
    code, out = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", tiny_model_project.pipeline, *extra)
    assert code == 2
    assert [line.split(",")[0] for line in out.splitlines()] == \
        [f"image: {dataset_of_six / item / 'image.png'}" for item in ("1", "2", "3")]
    err = capsys.readouterr().err
    assert err.startswith("segscope: error: ") and err.count("\n") == 1 and str(broken) in err


@pytest.mark.parametrize("broken", ["2/mask.png", "4/image.png"])
def test_a_bad_mask_or_the_header_of_its_image_fails_before_any_image(tiny_model_project, dataset_of_six, capsys,
                                                                      broken):
    """Every truth mask, and the size of its image, is checked before the first image runs (core/dataset/
    preflight.py): no line is printed against a truth that cannot be read."""
    bad = dataset_of_six / broken
    bad.write_bytes(b"not an image at all")
    code, out = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", tiny_model_project.pipeline)
    assert code == 2 and out == ""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


@pytest.mark.parametrize("read_ahead", [1, 2])
def test_cancel_stops_within_one_image_and_the_read_ahead_with_it(tiny_model_project, dataset_of_six, read_ahead):
    dataset = Dataset.open(dataset_of_six)
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1, read_ahead=read_ahead) as backend:
        prepared: list[str] = []
        prepare = backend.prepare

        def counting_prepare(image, roi=None):  # type: ignore[no-untyped-def]
            prepared.append(Path(image).parent.name)
            return prepare(image, roi)

        backend.prepare = counting_prepare  # type: ignore[method-assign]
        cancel = threading.Event()
        seen = []
        with pytest.raises(CancelledError, match="cancelled after 2"):
            for evaluation in evaluate_dataset(backend, dataset, cancel=cancel):
                seen.append(evaluation.item.id)
                cancel.set()
    assert seen == ["1"]
    # Image 2 was inferred while 1 was scored, and the next `read_ahead` read while 2 was inferred; no more.
    assert sorted(prepared) == [str(n) for n in range(1, 3 + read_ahead)]


def test_infer_many_matches_infer_and_raises_a_bad_image_in_its_place(tiny_model_project, dataset_of_six):
    paths = [dataset_of_six / item / "image.png" for item in ("1", "4", "5", "2")]
    rois = [None, Roi(5, 5, 90, 60), None, Roi(0, 0, 30, 30)]
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        one_by_one = [backend.infer(p, r) for p, r in zip(paths, rois)]
        many = list(backend.infer_many(InferenceRequest(p, r) for p, r in zip(paths, rois)))
        for a, b in zip(one_by_one, many):
            assert a.roi == b.roi and a.image_size == b.image_size
            np.testing.assert_array_equal(a.probabilities, b.probabilities)
            np.testing.assert_array_equal(a.argmax, b.argmax)
        requests = [InferenceRequest(paths[0]), InferenceRequest(b"garbage"), InferenceRequest(paths[2])]
        results = backend.infer_many(requests)
        assert next(results).roi == one_by_one[0].roi
        with pytest.raises(SegScopeError, match="<image bytes>"):
            next(results)


def exported(folder: Path) -> dict[str, object]:
    """Every file of an export by name: its bytes, a provenance sidecar minus when it was written."""
    files: dict[str, object] = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    for name in [n for n in files if n.endswith("_provenance.json")]:
        files[name] = {k: v for k, v in json.loads(files[name]).items() if k != "created"}  # type: ignore[arg-type]
    files["metrics.json"] = without_times(json.loads(files["metrics.json"])["images"])  # type: ignore[arg-type]
    with (folder / "metrics.csv").open(newline="") as f:
        files["metrics.csv"] = without_times(list(csv.DictReader(f)))
    return files


def test_export_beside_inference_writes_the_same_files_and_lines(tiny_model_project, dataset_of_six, tmp_path):
    outputs = {}
    for flag in ("", "--no-overlap"):
        export = tmp_path / f"export{flag}"
        code, lines = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", tiny_model_project.pipeline,
                              "--export", export, *([flag] if flag else []))
        assert code == 0
        outputs[flag] = (lines, exported(export))
    (lines, files), (lines_sequential, files_sequential) = outputs[""], outputs["--no-overlap"]
    assert lines == lines_sequential and len(lines.splitlines()) == 9
    assert files == files_sequential
    assert {f"{item}_provenance.json" for item in ("1", "2", "3", "4", "5", "10")} <= set(files)


@pytest.mark.parametrize("overlap", [True, False])
def test_a_failed_export_write_stops_the_run_at_its_image_with_nothing_written(
        tiny_model_project, dataset_of_six, tmp_path, capsys, monkeypatch, overlap):
    from segscope.core.files.atomic_folder import StagedFolder

    export = tmp_path / "export"
    create = StagedFolder.create

    def full_disk_at_item_2(self, relative, content, overwrite):  # type: ignore[no-untyped-def]
        if relative == "2_mask.png":
            raise SegScopeError(f"{export / relative}: write failed (No space left on device)")
        return create(self, relative, content, overwrite)

    monkeypatch.setattr(StagedFolder, "create", full_disk_at_item_2)
    code, lines = run_cli("eval", "--dataset", dataset_of_six, "--pipeline", tiny_model_project.pipeline, "--export",
                          export, *([] if overlap else ["--no-overlap"]))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("segscope: error: ") and err.count("\n") == 1 and "2_mask.png: write failed" in err
    assert [line.split(",")[0] for line in lines.splitlines()] == [f"image: {dataset_of_six / '1' / 'image.png'}"]
    assert sorted(p.name for p in tmp_path.iterdir() if "export" in p.name) == []  # all or nothing: nothing
