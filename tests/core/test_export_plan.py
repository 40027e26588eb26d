"""What the export offers is what it writes: for an ROI run and a whole-slide run, every planned file (its
name, pixel size, channels, dtype) is the file written, and its size is within the estimate's stated
accuracy (exact for .npy and copies, an upper bound for compressed images). Unknown kinds are refused, and
each image's provenance is among the targets."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.export.files import ExportFolder
from segscope.core.export.job import ROI_KINDS, Exportable, ExportChoices
from segscope.core.export.plan import CONFIRM_BYTES, TILED_KINDS, plan_item, plan_run
from segscope.core.export.provenance import Source
from segscope.core.export.writer import ExportRun
from segscope.core.roi import Roi
from segscope.core.wholeslide.export import export_stitched

from export_helpers import FakeSession, check_written, roi_result, shaped_run, slide_run, write_image


@pytest.fixture
def dataset(tmp_path):
    """Three images: 001 (2600x2400, with a mask and a saved correction), 002 (300x200), 003 (9000x64)."""
    root = tmp_path / "data"
    write_image(root / "001" / "image.png", 2600, 2400)
    mask = np.zeros((2400, 2600), np.uint8)
    cv2.circle(mask, (1300, 1200), 400, 255, -1)
    assert cv2.imwrite(str(root / "001" / "mask.png"), mask)
    cv2.circle(mask, (600, 600), 100, 255, -1)
    assert cv2.imwrite(str(root / "001" / "mask_corrected.png"), mask)
    write_image(root / "002" / "image.png", 300, 200)
    write_image(root / "003" / "image.png", 9000, 64)
    return Dataset.open(root)


def choices(out, kinds, ids, stitched=False, metrics=True, overwrite=False):
    return ExportChoices(tuple(kinds), metrics, out, "all", tuple(ids), overwrite, stitched)


def export(exportable, chosen):
    *_, last = exportable.steps(chosen)()
    return last.written


def test_an_roi_run_writes_what_is_offered(dataset, tmp_path):
    results = {"001": roi_result(Roi(100, 200, 2402, 2301), (2600, 2400)),
               "002": roi_result(Roi(0, 0, 300, 200), (300, 200), model=64, seed=2)}
    session = FakeSession(dataset, results, current="001")
    exportable = Exportable(session)
    assert exportable.ids(False) == ("001", "002") and exportable.kinds(False) == ROI_KINDS
    offered = {kind: exportable.offer(kind, False, ["001", "002"]) for kind in ROI_KINDS}
    assert offered["mask"][1].startswith("PNG 300×200 to 2302×2101 (ROI size), uint8, 0/255 — up to ")
    assert offered["heatmap"][1].startswith("PNG 300×200 to 2302×2101×3 (ROI size), uint8, colour map — up to ")
    # (96 x 96 + 64 x 64) x 2 classes x 4 bytes = 106,752 bytes, + two 128-byte .npy headers: 107,008
    assert offered["softmax"][1] == "NumPy .npy 64×64 to 96×96×2 (model resolution), float32, probabilities — 107 KB"
    assert offered["canvas"][1].startswith("PNG 300×200 to 2600×2400 (slide size)")
    corrected = (tmp_path / "data" / "001" / "mask_corrected.png").stat().st_size
    assert offered["corrected"][1] == (f"PNG 2600×2400 (slide size), as saved for 1 of 2 images — "
                                       f"{corrected / 1e3:.3g} KB")
    out = tmp_path / "out"
    chosen = choices(out, ROI_KINDS, ["001", "002"])
    plan = exportable.plan(chosen)
    written = export(exportable, chosen)
    assert sorted(written) == sorted(plan.targets()) == sorted(out.iterdir())  # nothing else
    for planned in plan.files():
        check_written(out, planned)
    saved = tmp_path / "data" / "001" / "mask_corrected.png"
    assert (out / "001_corrected_truth.png").read_bytes() == saved.read_bytes()
    provenance = json.loads((out / "001_provenance.json").read_text())
    assert provenance["corrected_source"] == str(tmp_path / "data" / "001" / "mask_corrected.png")
    assert {f["kind"] for f in provenance["files"]} == {"mask", "canvas", "softmax", "heatmap", "geojson", "corrected"}


def test_a_whole_slide_run_writes_what_is_offered(dataset, tmp_path):
    runs = {"002": slide_run(dataset, "002", 300, 200), "003": slide_run(dataset, "003", 9000, 64)}
    exportable = Exportable(FakeSession(dataset, {}, runs, current="003"))
    assert exportable.ids(True) == ("002", "003") and exportable.ids(False) == ()
    assert exportable.offer("mask", True, ["003"])[1].startswith(
        "pyramidal OME-TIFF (zlib) 9000×64 (output scale), uint8, 0/255 — up to ")  # over 8192 px: a pyramid
    assert exportable.offer("heatmap", True, ["002"])[1].startswith("PNG 300×200×3 (output scale), uint8, colour map")
    out = tmp_path / "out"
    chosen = choices(out, TILED_KINDS, ["002", "003"], stitched=True)
    plan = exportable.plan(chosen)
    assert [f.name for f in plan.items["003"]] == ["003_mask.tif", "003_softmax.npy", "003_heatmap.tif",
                                                   "003_provenance.json"]  # no corrected mask: 003 has none
    written = export(exportable, chosen)
    assert sorted(written) == sorted(plan.targets()) == sorted(out.iterdir())
    for planned in plan.files():
        check_written(out, planned)


def test_a_large_whole_slide_run_is_named_and_sized_before_anything_is_written(dataset, tmp_path):
    """The viewer's 12800x10667 whole-slide run: its softmax is 1.09 GB, its mask a pyramidal OME-TIFF."""
    exportable = Exportable(FakeSession(dataset, {}, {"001": shaped_run(dataset, "001", 12800, 10667)}))
    title, details = exportable.offer("softmax", True, ["001"])
    assert details == "NumPy .npy 12800×10667×2 (output scale), float32, probabilities — 1.09 GB"
    assert exportable.offer("mask", True, ["001"])[1].startswith("pyramidal OME-TIFF (zlib) 12800×10667 (output")
    plan = exportable.plan(choices(tmp_path / "out", ["mask", "softmax"], ["001"], stitched=True, metrics=False))
    assert plan.estimate().exact_bytes == 12800 * 10667 * 2 * 4 + 128
    assert plan.estimate().bytes >= CONFIRM_BYTES  # the dialog asks first
    roi = Exportable(FakeSession(dataset, {"001": roi_result(Roi(0, 0, 2302, 2101), (2600, 2400), model=960)}))
    assert roi.offer("heatmap", False, ["001"])[1].startswith("PNG 2302×2101×3 (ROI size)")  # not 960x960


def test_unknown_kinds_are_refused_before_anything_is_written(dataset, tmp_path):
    session = FakeSession(dataset, {"002": roi_result(Roi(0, 0, 300, 200), (300, 200))},
                          {"003": slide_run(dataset, "003", 90, 64)})
    exportable, out = Exportable(session), tmp_path / "out"
    for kind, stitched, ids in (("bogus", False, ["002"]), ("canvas", True, ["003"]), ("geojson", True, ["003"])):
        with pytest.raises(SegScopeError, match=rf"unknown kind\(s\) or format\(s\) \['{kind}'\]"):
            exportable.plan(choices(out, ["mask", kind], ids, stitched))
        with pytest.raises(SegScopeError, match="unknown kind"):
            list(exportable.steps(choices(out, ["mask", kind], ids, stitched))())
    with pytest.raises(SegScopeError, match=r"\['heatmaps'\]"), ExportFolder(out) as folder:
        folder.export_result(session.result("002"), Source("002", dataset.item("002").image_path), ["heatmaps"])
    with pytest.raises(SegScopeError, match=r"\['geojson'\]"), ExportFolder(out) as folder:
        export_stitched(folder, session.slide_run_of("003"), None, ["mask", "geojson"])
    assert not out.exists()


def test_each_images_provenance_is_a_target_so_another_kind_into_an_earlier_export_is_caught(dataset, tmp_path):
    exportable = Exportable(FakeSession(dataset, {"002": roi_result(Roi(0, 0, 300, 200), (300, 200))}))
    out = tmp_path / "out"
    export(exportable, choices(out, ["mask"], ["002"], metrics=False))
    heatmap = choices(out, ["heatmap"], ["002"], metrics=False)
    plan = exportable.plan(heatmap)
    assert plan.targets() == [out / "002_heatmap.png", out / "002_provenance.json"]
    assert [p for p in plan.targets() if p.exists()] == [out / "002_provenance.json"]  # the dialog's check
    with pytest.raises(SegScopeError, match="002_provenance.json: already exists"):
        export(exportable, heatmap)
    assert sorted(p.name for p in out.iterdir()) == ["002_mask.png", "002_provenance.json"]
    replacing = choices(out, ["heatmap"], ["002"], metrics=False, overwrite=True)
    assert exportable.plan(replacing).removed() == [out / "002_mask.png"]  # said before: the item is replaced whole
    export(exportable, replacing)
    assert sorted(p.name for p in out.iterdir()) == ["002_heatmap.png", "002_provenance.json"]


@pytest.mark.parametrize("tile", [[], ["--tile", "32"]], ids=["roi", "tiled"])
def test_the_cli_exports_the_saved_corrections_as_they_are(tiny_model_project, small_dataset, tmp_path, tile):
    from helpers import run_cli

    corrected = small_dataset / "2" / "mask_corrected.png"
    mask = cv2.imread(str(small_dataset / "2" / "mask.png"), cv2.IMREAD_UNCHANGED)
    mask[:8, :8] = 255  # a saved correction
    assert cv2.imwrite(str(corrected), mask)
    out = tmp_path / "out"
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, *tile,
                      "--export", out, "--export-kinds", "mask,corrected")
    assert code == 0
    assert sorted(p.name for p in out.iterdir() if "corrected" in p.name) == ["2_corrected_truth.png"]
    assert (out / "2_corrected_truth.png").read_bytes() == corrected.read_bytes()
    document = json.loads((out / "2_provenance.json").read_text())
    assert document["corrected_source"] == str(corrected)
    assert [f["kind"] for f in document["files"]] == ["mask", "corrected"]
    assert "corrected_source" not in json.loads((out / "1_provenance.json").read_text())  # 1 has none


def test_a_viewer_export_failing_at_image_2_leaves_the_folder_as_it_was(dataset, tmp_path, monkeypatch):
    results = {"001": roi_result(Roi(0, 0, 400, 300), (2600, 2400)), "002": roi_result(Roi(0, 0, 300, 200), (300, 200))}
    exportable, out = Exportable(FakeSession(dataset, results)), tmp_path / "out"
    export(exportable, choices(out, ["mask"], ["002"]))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = ExportFolder.export_result

    def full_disk_at_002(self, result, source, kinds, mask_formats=("png",)):
        if source.item_id == "002":
            raise SegScopeError(f"{out / '002_heatmap.png'}: write failed (No space left on device)")
        return real(self, result, source, kinds, mask_formats)

    monkeypatch.setattr(ExportFolder, "export_result", full_disk_at_002)
    steps = exportable.steps(choices(out, ["mask", "heatmap"], ["001", "002"], overwrite=True))()
    assert next(steps).done == 0 and next(steps).done == 1  # image 1 written (into the next version)
    with pytest.raises(SegScopeError, match="No space left"):
        next(steps)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_before_a_run_the_plan_names_every_file_the_run_may_write(dataset, tmp_path):
    """The one plan, given no run yet (eval refuses existing files with it before the first image): every name,
    by hand; with the run, the names written are among them."""
    kinds = ["mask", "canvas", "softmax", "heatmap", "geojson", "corrected"]
    assert [f.name for f in plan_item("a", kinds, mask_formats=("png", "npy"))] == [
        "a_mask.png", "a_mask.npy", "a_mask_full.png", "a_mask_full.npy", "a_softmax.npy", "a_heatmap.png",
        "a_mask.geojson", "a_corrected_truth.png"]
    assert [f.name for f in plan_item("s", TILED_KINDS, tiled=True)] == [
        "s_mask.png", "s_mask.tif", "s_softmax.npy", "s_heatmap.png", "s_heatmap.tif", "s_corrected_truth.png"]
    assert [f.name for f in plan_item("s", ["mask", "heatmap"], tiled=True, stitched_format="png")] == [
        "s_mask.png", "s_heatmap.png"]
    assert [f.name for f in plan_run(["mask", "coco"])] == [
        "annotations.coco.json", "truth.coco.json", "predictions.coco.json", "metrics.csv", "metrics.json"]
    with pytest.raises(SegScopeError, match=r"\['canvas'\]"):
        plan_item("s", ["canvas"], tiled=True)

    session = FakeSession(dataset, {"001": roi_result(Roi(100, 200, 2402, 2301), (2600, 2400))},
                          {"003": shaped_run(dataset, "003", 9000, 64)})
    written = export(Exportable(session), choices(tmp_path / "roi", ROI_KINDS, ["001"]))
    may = {f.name for f in plan_item("001", ROI_KINDS)} | {f.name for f in plan_run(ROI_KINDS)}
    assert {p.name for p in written} - may == {"001_provenance.json"}
    written = export(Exportable(session), choices(tmp_path / "tiled", TILED_KINDS, ["003"], stitched=True))
    assert {p.name for p in written} - {f.name for f in plan_item("003", TILED_KINDS, tiled=True)} == {
        "003_provenance.json", "metrics.csv", "metrics.json"}


@pytest.mark.parametrize("background", [False, True])
def test_an_export_run_writes_each_image_before_what_follows_it_and_publishes_at_the_end(dataset, tmp_path,
                                                                                      background):
    """`ExportRun` (eval's, the viewer's): each image's files are in the new version before its `then` runs (on
    the writer thread or not), the folder shows nothing until the run ends, then every file and the table."""
    out = tmp_path / "out"
    results = {"001": roi_result(Roi(0, 0, 200, 100), (2600, 2400)), "002": roi_result(Roi(0, 0, 300, 200), (300, 200))}
    followed: list[str] = []
    with ExportRun(out, dataset_root=dataset.root, background=background) as run:
        for item_id, result in results.items():
            source = Source(item_id, dataset.item(item_id).image_path)
            run.write(lambda folder, r=result, s=source: folder.export_result(r, s, ["mask"]),
                      lambda i=item_id: followed.append(i))
            run.add_row({"id": item_id, "soft_dice": 0.5})
        run.flush()
        assert followed == ["001", "002"]
        assert not out.exists() or list(out.iterdir()) == []  # staged beside it until the run ends
        run.finish({"images_with_masks": 0})
    assert sorted(p.name for p in out.iterdir()) == ["001_mask.png", "001_provenance.json", "002_mask.png",
                                                    "002_provenance.json", "metrics.csv", "metrics.json"]
    assert [row["id"] for row in json.loads((out / "metrics.json").read_text())["images"]] == ["001", "002"]
