"""`segscope card MODEL.onnx --out DIR`: a bare ONNX file becomes a project that `segscope eval --pipeline`
runs, with the numbers of an independent NumPy reference; static and dynamic inputs; refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.roi import Roi
from segscope.core.stream.aipp import apply_aipp, load_aipp

import byo_helpers as byo
from helpers import run_cli


@pytest.fixture
def dataset(tmp_path: Path, write_png) -> Path:
    """Two slides with masks of the disc slide_png() draws."""
    root = tmp_path / "data"
    for item, seed in (("a", 0), ("b", 1)):
        image = cv2.imdecode(np.frombuffer(byo.slide_png(seed=seed), np.uint8), cv2.IMREAD_COLOR)
        mask = np.zeros(image.shape[:2], np.uint8)
        cv2.circle(mask, (45, 35), 17, 255, -1)
        write_png(root / item / "image.png", image)
        write_png(root / item / "mask.png", mask)
    return root


def test_static_round_trip_runs_in_eval_with_the_reference_numbers(tmp_path, dataset):
    net = byo.Net(size=40)
    model = net.save(tmp_path / "crack_seg.onnx")
    code, text = run_cli("card", model, "--out", tmp_path / "proj", "--color", "rgb", "--scale", "1/255",
                         "--classes", "crack", "--threshold", "0.4")
    assert code == 0
    lines = text.splitlines()
    pipeline = tmp_path / "proj" / "pipelines" / "crack_seg.pipeline"
    assert lines[-1] == str(pipeline)
    assert "found: input 'image' [1,3,40,40] float32" in lines
    assert any(line.startswith("assumed: output 'scores' holds raw scores (from Conv): activation 'sigmoid'")
               for line in lines)
    models = tmp_path / "proj" / "models"
    assert (models / "crack_seg.onnx").read_bytes() == model.read_bytes()
    card = json.loads((models / "crack_seg.json").read_text())
    assert card["input"] == {"name": "image", "layout": "NCHW", "width": 40, "height": 40, "channels": 3,
                             "color": "RGB", "scale": 1 / 255}
    assert card["outputs"] == [{"name": "scores", "layout": "NCHW", "activation": "sigmoid", "threshold": 0.4}]
    assert card["aipp"] == "aipp_crack_seg.cfg"  # what the .om gets baked in: the same math, checked on load
    stream = json.loads(pipeline.read_text())["unet_mindspore"]
    assert stream["mxpi_imageresize0"]["props"]["resizeWidth"] == "40"
    assert stream["mxpi_tensorinfer0"]["props"]["modelPath"] == "models/crack_seg.om"
    atc = (models / "atc_crack_seg.sh").read_text()
    assert "--model=crack_seg.onnx" in atc and '--input_shape="image:1,3,40,40"' in atc
    assert "--insert_op_conf=aipp_crack_seg.cfg" in atc
    # The AIPP config for the .om gives the network the tensor the card describes (BGR decoder in).
    crop = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    expected = crop[..., ::-1].astype(np.float64).transpose(2, 0, 1)[None] / 255
    np.testing.assert_allclose(apply_aipp(crop, load_aipp(models / "aipp_crack_seg.cfg")), expected, atol=1e-6)

    code, text = run_cli("eval", "--dataset", dataset, "--pipeline", pipeline, "--json", "--export", tmp_path / "out")
    assert code == 0
    report = json.loads(text)
    assert report["summary"]["images_with_masks"] == 2
    mask = cv2.imread(str(tmp_path / "out" / "a_mask.png"), cv2.IMREAD_UNCHANGED)
    assert mask.shape == (70, 90) and set(np.unique(mask)) <= {0, 255}
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer((dataset / "a" / "image.png").read_bytes(), Roi(*byo.BOX))
    p = byo.sigmoid(byo.reference_stream(byo.slide_png(seed=0), byo.BOX, net, color="RGB", scale=1 / 255)[..., 0])
    byo.assert_matches(result, *byo.two_class(p, 0.4), [{"threshold": 0.4}])


def test_dynamic_input_needs_a_size_and_then_runs(tmp_path, dataset):
    model = byo.Net(in_channels=1, out_channels=2, dynamic=True, final="Softmax").save(tmp_path / "tiles.onnx")
    code, _ = run_cli("card", model, "--out", tmp_path / "proj", "--mean", "127.5", "--std", "127.5")
    assert code == 2 and not (tmp_path / "proj").exists()
    code, text = run_cli("card", model, "--out", tmp_path / "proj", "--size", "48x32", "--mean", "127.5", "--std",
                         "127.5", "--classes", "background,defect")
    assert code == 0
    assert "found: output 'scores' comes from Softmax: activation 'none'" in text
    card = json.loads((tmp_path / "proj" / "models" / "tiles.json").read_text())
    assert card["input"]["channels"] == 1 and card["input"]["color"] == "GRAY" and "aipp" not in card
    assert (card["input"]["width"], card["input"]["height"]) == (48, 32)
    assert card["outputs"][0]["activation"] == "none"
    aipp = (tmp_path / "proj" / "models" / "aipp_tiles.cfg").read_text()
    assert "csc_switch : true" in aipp and "min_chn_0 : 127.5" in aipp
    code, text = run_cli("eval", "--dataset", dataset, "--pipeline", text.splitlines()[-1])
    assert code == 0 and "Hard foreground dice is" in text


def test_missing_size_and_other_refusals_are_one_line(tmp_path, capsys):
    dynamic = byo.Net(dynamic=True).save(tmp_path / "dyn.onnx")
    static = byo.Net(out_channels=2).save(tmp_path / "two.onnx")
    cases = [
        (("card", dynamic, "--out", tmp_path / "p1"), "has a dynamic size: give the input size (--size WxH"),
        (("card", static, "--out", tmp_path / "p2", "--size", "64x64"), "--size 64x64 but the graph's input"),
        (("card", static, "--out", tmp_path / "p3", "--threshold", "0.4"),
         f"{tmp_path / 'p3' / 'models' / 'two.json'}: outputs[0].threshold: 0.4: a threshold is a probability"),
        (("card", static, "--out", tmp_path / "p4", "--scale", "1", "--aipp", byo.REPO / "models" /
          "aipp_unet_simple_opencv.cfg"), "give either --aipp or --scale/--mean/--std"),
        (("card", tmp_path / "absent.onnx", "--out", tmp_path / "p5"), "ONNX model not found"),
        (("card", tmp_path, "--out", tmp_path / "p6"), "is a folder, not an ONNX model"),
    ]
    for argv, expected in cases:
        capsys.readouterr()
        code, text = run_cli(*argv)
        err = capsys.readouterr().err
        assert code == 2 and text == "" and expected in err and err.count("\n") == 1, (argv, err)
    # A refused card leaves no file behind (the project is staged and checked before anything lands).
    assert not list((tmp_path / "p3").rglob("*"))


def test_existing_files_are_kept_without_overwrite(tmp_path):
    model = byo.Net().save(tmp_path / "m.onnx")
    assert run_cli("card", model, "--out", tmp_path / "proj", "--scale", "1/255")[0] == 0
    card = tmp_path / "proj" / "models" / "m.json"
    card.write_text("edited")
    assert run_cli("card", model, "--out", tmp_path / "proj", "--scale", "1/255")[0] == 2
    assert card.read_text() == "edited"
    assert run_cli("card", model, "--out", tmp_path / "proj", "--scale", "1/255", "--overwrite")[0] == 0
    assert json.loads(card.read_text())["input"]["scale"] == 1 / 255
    assert not [p for p in (tmp_path / "proj").iterdir() if p.name.startswith(".")]


def test_the_shipped_model_gets_the_shipped_cards_numbers(tmp_path, small_dataset):
    shipped = byo.REPO / "models"
    code, text = run_cli("card", shipped / "unet_demo.onnx", "--out", tmp_path / "proj", "--aipp",
                         shipped / "aipp_unet_simple_opencv.cfg", "--classes", "background,defect")
    assert code == 0 and "found: color RGB (what the AIPP config hands the network" in text
    card = json.loads((tmp_path / "proj" / "models" / "unet_demo.json").read_text())
    assert card["outputs"] == [{"name": "softmax", "layout": "NHWC", "activation": "none"},
                               {"name": "argmax", "kind": "argmax"}]
    built = run_cli("eval", "--dataset", small_dataset, "--roi", "0,0,64,48", "--json", "--pipeline",
                    text.splitlines()[-1])
    original = run_cli("eval", "--dataset", small_dataset, "--roi", "0,0,64,48", "--json")
    assert built[0] == original[0] == 0
    assert json.loads(built[1])["summary"] == json.loads(original[1])["summary"]


@pytest.mark.parametrize("problem", ["folder", "list", "not-utf8", "training", "huge"])
def test_eval_refuses_a_broken_card_with_exit_2_and_one_line(tiny_model_project, small_dataset, capsys, problem):
    card = tiny_model_project.card
    good = json.loads(card.read_text())
    card.unlink()
    if problem == "folder":
        card.mkdir()
    elif problem == "list":
        card.write_text("[]")
    elif problem == "not-utf8":
        card.write_bytes(b"\xff" + json.dumps(good).encode())
    elif problem == "training":
        card.write_text(json.dumps({**good, "training": "12000 steps"}))
    else:
        card.write_text(json.dumps({**good, "input": {**good["input"], "width": 60000, "height": 60000}}))
    capsys.readouterr()
    code, text = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)
    err = capsys.readouterr().err
    assert code == 2 and text == "" and err.count("\n") == 1 and err.startswith(f"segscope: error: {card}: ")


@pytest.mark.parametrize("how", ["hand-written", "segscope card"])
def test_a_card_without_preprocessing_warns_once_on_stderr(tmp_path, small_dataset, how):
    if how == "segscope card":  # its card names an identity AIPP config: still no preprocessing
        code, text = run_cli("card", byo.Net().save(tmp_path / "byo.onnx"), "--out", tmp_path / "p",
                             "--classes", "crack")
        assert code == 0 and "assumed: no normalisation" in text
        pipeline = Path(text.splitlines()[-1])
    else:
        pipeline = byo.write_project(tmp_path, byo.Net(), {}, [{"name": "scores", "layout": "NCHW",
                                                                "activation": "sigmoid"}], ["crack"])
    done = subprocess.run([sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset),
                           "--pipeline", str(pipeline), "--roi", "0,0,64,48"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "no preprocessing" in line]
    assert len(warnings) == 1 and warnings[0].startswith("segscope: warning: ") and "byo.json" in warnings[0]
    assert warnings[0].count("segscope: warning:") == 1  # one prefix, not two
    assert done.stdout.count("image: ") == 4


def test_external_weights_are_copied_with_the_model(tmp_path, dataset):
    import onnx

    net = byo.Net(size=40)
    source = tmp_path / "src"
    source.mkdir()
    model = onnx.load(str(net.save(source / "big.onnx")))
    onnx.save(model, str(source / "big.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="big.bin", size_threshold=0)
    code, text = run_cli("card", source / "big.onnx", "--out", tmp_path / "proj", "--scale", "1/255")
    assert code == 0 and "found: external weights big.bin (copied with the model)" in text
    assert (tmp_path / "proj" / "models" / "big.bin").read_bytes() == \
        (source / "big.bin").read_bytes()
    import shutil

    shutil.rmtree(source)  # the project runs on its own copy
    code, _ = run_cli("eval", "--dataset", dataset, "--pipeline", text.splitlines()[-1])
    assert code == 0
