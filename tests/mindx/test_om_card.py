"""`segscope card MODEL.om`: from the ONNX file it came from (`--from`) or from its shapes (`--input`/`--output`),
a card that records both files and their hashes and runs the .om with the embedded backend's numbers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backend_spec import BackendSpec, open_backend
from segscope.core.roi import Roi

from .conftest import make_image, make_om_project
from helpers import run_cli

ROI = Roi(30, 20, 290, 220)




def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An .om with its AIPP config compiled in, the ONNX file beside it, and the card they were made with."""
    return make_om_project(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def reference(source: Path) -> object:
    with open_backend(BackendSpec("embedded", source)) as backend:
        return backend.infer(make_image(320, 240, 5), ROI)


def _same(result: object, expected: object) -> None:
    np.testing.assert_array_equal(result.argmax, expected.argmax)  # type: ignore[attr-defined]
    np.testing.assert_allclose(result.probabilities, expected.probabilities, rtol=0, atol=1e-6)  # type: ignore


def test_an_om_from_its_onnx_file(model_api_home: Path, source: Path, reference: object, tmp_path: Path) -> None:
    om, onnx = source.with_suffix(".om"), source.with_suffix(".onnx")
    code, text = run_cli("card", om, "--from", onnx, "--aipp", source.parent / "aipp.cfg", "--classes",
                         "background,defect", "--out", tmp_path / "proj")
    assert code == 0, text
    models = tmp_path / "proj" / "models"
    card = json.loads((models / "tiny.json").read_text(encoding="utf-8"))
    assert (card["om"], card["onnx"], card["aipp"]) == ("tiny.om", "tiny.onnx", "aipp_tiny.cfg")
    assert card["sha256"] == {"om": _sha256(om), "onnx": _sha256(onnx)}
    assert (models / "tiny.om").read_bytes() == om.read_bytes() and not (models / "atc_tiny.sh").exists()
    pipeline = tmp_path / "proj" / "pipelines" / "tiny.pipeline"
    assert text.splitlines()[-1] == str(pipeline)  # an .om with its AIPP runs in the stream too
    for kind in ("embedded", "mindx-model"):
        with open_backend(BackendSpec(kind, models / "tiny.json")) as backend:
            _same(backend.infer(make_image(320, 240, 5), ROI), reference)


def test_an_om_from_its_shapes_alone(ais_bench_api: None, source: Path, reference: object, tmp_path: Path) -> None:
    om = source.with_suffix(".om")
    shapes = ("--input", "input:1x3x64x64", "--output", "softmax:1x64x64x2", "--output", "argmax:1x64x64:int32")
    code, _text = run_cli("card", om, *shapes, "--aipp", source.parent / "aipp.cfg", "--out", tmp_path / "no")
    assert code == 2  # without the graph nobody can tell whether the output already went through a softmax
    code, text = run_cli("card", om, *shapes, "--aipp", source.parent / "aipp.cfg", "--activation", "none",
                         "--classes", "background,defect", "--out", tmp_path / "proj")
    assert code == 0, text
    card_path = tmp_path / "proj" / "models" / "tiny.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    assert "onnx" not in card and card["sha256"] == {"om": _sha256(om)}
    assert card["outputs"] == [{"name": "softmax", "layout": "NHWC", "activation": "none"},
                               {"name": "argmax", "kind": "argmax"}]
    # the stand-in .om runs the ONNX file it names beside it (here: copied by hand, as a real .om needs none)
    (card_path.parent / "tiny.onnx").write_bytes(source.with_suffix(".onnx").read_bytes())
    with open_backend(BackendSpec("ais-bench", card_path)) as backend:
        _same(backend.infer(make_image(320, 240, 5), ROI), reference)


def test_an_om_without_aipp_gets_no_pipeline(model_api_home: Path, tmp_path: Path) -> None:
    card = make_om_project(tmp_path / "source", aipp=False)
    code, text = run_cli("card", card.with_suffix(".om"), "--from", card.with_suffix(".onnx"), "--color", "RGB",
                         "--scale", "1/127.5", "--mean", "1", "--classes", "background,defect", "--out", tmp_path / "p")
    assert code == 0, text
    written = tmp_path / "p" / "models" / "tiny.json"
    assert text.splitlines()[-1] == str(written) and not (tmp_path / "p" / "pipelines").exists()
    assert "aipp" not in json.loads(written.read_text(encoding="utf-8"))
    assert any(line.startswith("note: no --aipp: the .om takes the normalised tensor") for line in text.splitlines())
    with open_backend(BackendSpec("embedded", card)) as embedded, \
            open_backend(BackendSpec("mindx-model", written)) as npu:
        _same(npu.infer(make_image(320, 240, 5), ROI), embedded.infer(make_image(320, 240, 5), ROI))


@pytest.mark.parametrize("argv, expected", [
    (("--from", "x.onnx"), "--from, --input and --output describe an .om"),
    (("--input", "image:3x3"), "give NAME:NxCxHxW"),
])
def test_refusals_are_one_line(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               argv: tuple[str, ...], expected: str) -> None:
    code, _ = run_cli("card", source.with_suffix(".onnx"), *argv, "--out", tmp_path / "p")
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and expected in err
