"""The Python API (`segscope.open`, core/api.py): the README's example run as written, and every number it gives
equal to `segscope eval --json` on the same data (real ONNX Runtime with the tiny model, real files)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import types
from pathlib import Path

import cv2
import numpy as np
import pytest

import segscope
from segscope.core.errors import SegScopeError
from segscope.core.metrics.scores import argmax_at_roi

from helpers import run_cli, same_numbers

README = Path(__file__).resolve().parents[2] / "README.md"


def _measured(row: dict[str, object]) -> dict[str, object]:
    """A row without its stage times (each run measures its own)."""
    return {key: value for key, value in row.items() if not key.startswith("time_")}


def _same_rows(api: list[dict[str, object]], cli: list[dict[str, object]]) -> None:
    assert [row.keys() for row in api] == [row.keys() for row in cli]  # the time keys included
    assert len(api) == len(cli)
    for ours, theirs in zip(api, cli):
        assert same_numbers(_measured(ours), _measured(theirs)), (ours, theirs)


def _eval_json(dataset: Path, model: Path, *options: str) -> dict:
    code, out = run_cli("eval", "--dataset", dataset, "--model", model, "--json", *options)
    assert code == 0
    return json.loads(out)


def _project(tiny_model_project, small_dataset: Path, folder: Path) -> Path:
    """`folder` holding data/ (the small dataset) and models/ (the tiny model as the shipped card's name)."""
    shutil.copytree(tiny_model_project.root / "models", folder / "models")
    shutil.copytree(small_dataset, folder / "data")
    return folder


def test_readme_example_runs_as_written_and_gives_evals_numbers(tiny_model_project, small_dataset, tmp_path,
                                                                 monkeypatch, capsys):
    folder = _project(tiny_model_project, small_dataset, tmp_path / "work")
    model = folder / "models" / "unet_hw960_bs1.json"
    before = _eval_json(folder / "data", model)
    section = README.read_text(encoding="utf-8").split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(folder)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)

    _same_rows(namespace["rows"], before["images"])  # type: ignore[arg-type]
    worst = namespace["worst"]["id"]  # type: ignore[index]
    dices = {row["id"]: dice for row in before["images"] if (dice := row.get("foreground_dice")) is not None}
    assert dices[worst] == min(dices.values())
    assert f"worst {worst}: foreground Dice {dices[worst]:.4f}" in capsys.readouterr().out
    # The saved correction is the prediction under the ROI: eval now reads it (--truth auto) and scores 1 there.
    assert (folder / "data" / worst / "mask_corrected.png").is_file()
    after = _eval_json(folder / "data", model)
    assert {row["id"]: row.get("foreground_dice") for row in after["images"]}[worst] == 1.0
    # The export's metric table is of the new truth, as eval gives it now; the files it lists exist.
    exported = json.loads((folder / "out" / "metrics.json").read_text(encoding="utf-8"))
    _same_rows(exported["images"], after["images"])
    written = sorted(p.name for p in namespace["written"])  # type: ignore[attr-defined]
    ids = [row["id"] for row in after["images"]]
    assert written == sorted([f"{i}_{k}" for i in ids for k in ("mask.png", "heatmap.png", "provenance.json")]
                             + ["metrics.csv", "metrics.json"])
    assert sorted(p.name for p in (folder / "out").iterdir()) == written


def test_metrics_with_eval_options_equal_eval_json(tiny_model_project, small_dataset):
    """The same eval options by their Python names (QA metrics, a truth choice) give eval's rows and means."""
    model = tiny_model_project.card
    cli = _eval_json(small_dataset, model, "--metrics", "all", "--truth", "original", "--backend", "embedded")
    with segscope.open(small_dataset, model=model, metrics="all", truth="original", backend="embedded") as s:
        s.run_all(progress=lambda done, total: None)
        _same_rows(s.metrics(), cli["images"])
        means = s.summary()
    assert means and all(same_numbers(value, cli["summary"][key]) for key, value in means.items())


def test_progress_is_called_per_image_and_tqdm_follows_when_no_callback(tiny_model_project, small_dataset,
                                                                       monkeypatch):
    bars: list[list[object]] = []

    class FakeTqdm:  # what tqdm.auto.tqdm is asked: total, then updates, then close
        def __init__(self, total: int, unit: str) -> None:
            self.calls: list[object] = [("total", total)]
            bars.append(self.calls)

        def update(self, n: int) -> None:
            self.calls.append(n)

        def close(self) -> None:
            self.calls.append("closed")

    monkeypatch.setitem(sys.modules, "tqdm.auto", types.SimpleNamespace(tqdm=FakeTqdm))
    seen: list[tuple[int, int]] = []
    with segscope.open(small_dataset, model=tiny_model_project.card) as s:
        s.run(["1", "2"], progress=lambda done, total: seen.append((done, total)))
        assert seen == [(1, 2), (2, 2)] and bars == []
        s.run_all()
    assert bars == [[("total", 4), 1, 1, 1, 1, "closed"]]


def test_roi_set_by_a_script_is_the_datasets_and_evals(tiny_model_project, small_dataset):
    """An ROI set from a script is kept in the sidecar: the run uses it and eval, reading the sidecar, agrees."""
    model = tiny_model_project.card
    with segscope.open(small_dataset, model=model) as s:
        assert s.images == ["1", "2", "3", "10"]
        s.select("2")
        assert s.current == "2" and s.roi is not None and s.roi.as_tuple() == (0, 0, 64, 48)  # the whole image
        assert s.set_roi("8,4,40,36").as_tuple() == (8, 4, 40, 36)
        # moved into the 64x48 image, keeping its 40 px width; its 50 px height cut to the image's 48
        assert s.set_roi((50, 40, 90, 90), "1").as_tuple() == (24, 0, 64, 48)
        s.run(["1", "2"])
        result = s.result("2")
        assert result is not None and result.roi.as_tuple() == (8, 4, 40, 36)
        rows = s.metrics()
        assert [row["roi"] for row in rows] == [str(s.dataset.roi_for(s.dataset.item(i))) for i in ("1", "2")]
        assert s.undo_roi() == "1"
    cli = _eval_json(small_dataset, model)
    by_id = {row["id"]: row for row in cli["images"]}
    assert same_numbers(_measured(rows[1]), _measured(by_id["2"]))


def test_mask_edits_change_the_truth_scored(tiny_model_project, small_dataset):
    with segscope.open(small_dataset, model=tiny_model_project.card) as s:
        with pytest.raises(SegScopeError, match="select"):
            s.accept_prediction()
        s.select("3")  # no mask: nothing scored, until one is painted
        with pytest.raises(SegScopeError, match="run it first"):
            s.fill((0, 0))
        s.run(["3"])
        assert s.mask is None and s.metrics()[0].get("foreground_dice") is None
        s.paint_polygon([(0, 0), (31, 0), (31, 47), (0, 47)])  # the left half (x 0..31) painted defect
        mask = s.mask
        assert mask is not None and (mask[:, :32] == 255).all() and (mask[:, 32:] == 0).all()
        result = s.result("3")
        assert result is not None
        predicted = argmax_at_roi(result) == 1  # the prediction at ROI size, as the tests' references take it
        truth = np.zeros(predicted.shape, bool)
        truth[:, :32] = True
        expected = 2 * (predicted & truth).sum() / (predicted.sum() + truth.sum())  # by hand, in NumPy
        assert s.metrics()[0]["foreground_dice"] == pytest.approx(expected, abs=1e-12)
        s.undo_edit()
        assert s.metrics()[0].get("foreground_dice") is None
        s.paint_polygon([(0, 0), (31, 0), (31, 47), (0, 47)])
        s.save_mask("replace")
    saved = cv2.imread(str(small_dataset / "3" / "mask.png"), cv2.IMREAD_UNCHANGED)
    assert (saved[:, :32] == 255).all() and (saved[:, 32:] == 0).all()


def test_a_mask_the_models_rule_refuses_is_that_images_error(tiny_model_project, small_dataset, write_png):
    mask = cv2.imread(str(small_dataset / "2" / "mask.png"), cv2.IMREAD_UNCHANGED)
    mask[0, :5] = 7  # neither 0 nor 255: the binary model's rule refuses it
    write_png(small_dataset / "2" / "mask.png", mask)
    code, _ = run_cli("eval", "--dataset", small_dataset, "--model", tiny_model_project.card)
    assert code == 2
    with segscope.open(small_dataset, model=tiny_model_project.card) as s:
        errors = [m.text for m in s.messages if m.level == "error"]
        assert len(errors) == 1 and "2" in errors[0] and "mask.png" in errors[0]


@pytest.mark.parametrize(("options", "said"), [
    ({"roi": "0,0,8,8"}, "roi: not an option of segscope.open; call .set_roi"),
    ({"export": "out"}, "export: not an option of segscope.open"),
    ({"max_pixels": -1}, "--max-pixels"),
    ({"backend": "nonsense"}, "--backend"),
    ({"colour": "red"}, "colour: not an option of segscope eval"),
    ({"overlap": "yes"}, "overlap: expected False (--no-overlap) or True"),
])
def test_options_are_evals_and_refused_in_one_line(tiny_model_project, small_dataset, options, said):
    with pytest.raises(SegScopeError) as refused:
        segscope.open(small_dataset, model=tiny_model_project.card, **options)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_export_takes_one_string_as_evals_option_and_one_id(tiny_model_project, small_dataset, tmp_path):
    """kinds="mask" was read letter by letter ("unknown kind(s) ['a', 'k', 'm', 's']"), images="2" as ids 2."""
    with segscope.open(small_dataset, model=tiny_model_project.card) as s:
        s.run_all(progress=lambda done, total: None)
        written = s.export(tmp_path / "one", kinds="mask,heatmap", images="2", metrics=False)
        assert sorted(p.name for p in written) == ["2_heatmap.png", "2_mask.png", "2_provenance.json"]
        written = s.export(tmp_path / "two", kinds="mask", images=["1", "2"], metrics=False)
        assert sorted(p.name for p in written) == ["1_mask.png", "1_provenance.json", "2_mask.png",
                                                   "2_provenance.json"]
        with pytest.raises(SegScopeError, match=r"unknown kind\(s\) or format\(s\) \['masks'\]"):
            s.export(tmp_path / "three", kinds="masks")


def test_public_names():
    assert segscope.__all__ == ["Analysis", "open"]
    assert all(hasattr(segscope, name) for name in segscope.__all__)


def test_a_save_that_cannot_write_raises_and_keeps_the_edits(tiny_model_project, small_dataset, monkeypatch):
    from segscope.core.editing import document as document_module

    def full_disk(*_args: object) -> None:
        raise SegScopeError("mask_corrected.png: no space left on the device")

    with segscope.open(small_dataset, model=tiny_model_project.card) as s:
        with pytest.raises(SegScopeError, match="no mask edits"):
            s.save_mask()
        s.select("1")
        s.run(["1"])
        s.paint_polygon([(0, 0), (63, 0), (63, 47), (0, 47)])  # the whole image painted defect
        monkeypatch.setattr(document_module, "save_mask", full_disk)
        with pytest.raises(SegScopeError, match="no space left"):
            s.save_mask()
        assert s.session.document is not None and s.session.document.dirty
    assert not (small_dataset / "1" / "mask_corrected.png").exists()
