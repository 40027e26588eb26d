"""Model cards and turning model outputs into probabilities + argmax."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from segscope.core.card.reader import card_path_for, load_model_card, postprocess
from segscope.core.errors import SegScopeError

SHIPPED_AIPP = Path(__file__).resolve().parents[2] / "models" / "aipp_unet_simple_opencv.cfg"


def write_card(folder: Path, **fields) -> Path:
    card = {
        "name": "unet", "onnx": "unet.onnx", "om": "unet.om",
        "input": {"name": "x", "layout": "NCHW", "width": 4, "height": 3},
        "outputs": [{"name": "softmax", "kind": "softmax", "layout": "NHWC"},
                    {"name": "argmax", "kind": "argmax"}],
        "classes": ["background", "defect"],
    }
    card.update(fields)
    card = {k: v for k, v in card.items() if v is not None}
    path = folder / "unet.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    return path


def test_card_fields(tmp_path):
    (tmp_path / "aipp.cfg").write_text(SHIPPED_AIPP.read_text())
    path = write_card(tmp_path, aipp="aipp.cfg", training={"held_out_dice": 0.93})
    card = load_model_card(tmp_path / "unet.om")  # the .om's card is the .json beside it
    assert card.path == path
    assert card.name == "unet"
    assert card.onnx == tmp_path / "unet.onnx" and card.om == tmp_path / "unet.om"
    assert card.aipp is not None and card.aipp.rbuv_swap_switch and card.aipp.min_chn == (127.5,) * 3
    assert (card.input_name, card.input_layout, card.input_size) == ("x", "NCHW", (4, 3))
    assert [(o.name, o.kind, o.layout) for o in card.outputs] == [("softmax", "softmax", "NHWC"),
                                                                  ("argmax", "argmax", "NHWC")]
    assert card.class_names == ("background", "defect")
    assert card.training == {"held_out_dice": 0.93}
    assert card.output_index("argmax") == 1 and card.output_index("logits") is None
    assert card.probability_index() == 0


def test_card_path_for():
    assert card_path_for(Path("models/a.om")) == Path("models/a.json")
    assert card_path_for(Path("models/a.onnx")) == Path("models/a.json")
    assert card_path_for(Path("models/a.json")) == Path("models/a.json")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"input": None}, "input: missing"),
        ({"input": {"width": "wide", "height": 3}}, "input.width: must be an integer, got 'wide'"),
        ({"input": {"width": 4}}, "input.height: must be an integer, got None"),
        ({"outputs": "softmax"}, "outputs: must be a non-empty list"),
        ({"outputs": [{"kind": "softmax"}, {"kind": "probabilities"}]}, "outputs[1].kind: must be one of"),
        ({"outputs": [{"kind": "softmax", "layout": "HWC"}]}, "outputs[0].layout: must be one of NCHW, NHWC"),
        ({"outputs": [{"kind": "argmax"}]}, "outputs: needs a score output"),
        ({"classes": None}, "classes: must be a list of class names"),
        ({"aipp": "missing.cfg"}, "missing.cfg: AIPP config not found"),
    ],
)
def test_bad_cards_name_the_card_and_field(tmp_path, fields, expected):
    path = write_card(tmp_path, **fields)
    with pytest.raises(SegScopeError) as info:
        load_model_card(path)
    message = str(info.value)
    assert str(path.parent) in message and expected in message and "\n" not in message
    if "AIPP" not in expected:
        assert message.startswith(f"{path}: ")


def test_missing_and_malformed_cards(tmp_path):
    with pytest.raises(SegScopeError) as info:  # neither the model nor its card: the file given is named
        load_model_card(tmp_path / "gone.onnx")
    assert str(info.value) == (f"{tmp_path / 'gone.onnx'}: file not found (nor its model card gone.json); give an "
                               "existing .onnx, .om or model card (.json)")
    (tmp_path / "present.onnx").write_bytes(b"")  # a model without its card: the card is named, for that model
    with pytest.raises(SegScopeError, match="model card not found") as info:
        load_model_card(tmp_path / "present.onnx")
    assert str(info.value).startswith(f"{tmp_path / 'present.json'}: model card not found (needed for present.onnx:")
    with pytest.raises(SegScopeError, match="model card not found") as info:
        load_model_card(tmp_path / "absent.json")
    assert str(tmp_path / "absent.json") in str(info.value)
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n "input": }')
    with pytest.raises(SegScopeError, match="invalid JSON") as info:
        load_model_card(bad)
    assert str(info.value).startswith(f"{bad}:2:11: ")
    bad.write_text("[1, 2]")
    with pytest.raises(SegScopeError, match="must be a JSON object"):
        load_model_card(bad)


# --- postprocess --------------------------------------------------------------------------------------

P1 = np.array([[0.9, 0.2, 0.6], [0.1, 0.5, 0.7]], np.float32)  # foreground probability, 2 x 3 pixels
PROBS = np.stack([1 - P1, P1], axis=-1)  # H x W x 2


def card_with(tmp_path: Path, outputs: list[dict], classes: list[str] | None = None):
    return load_model_card(write_card(tmp_path, outputs=outputs, classes=classes or ["background", "defect"]))


def test_softmax_nhwc_with_argmax_output_used_as_given(tmp_path):
    card = card_with(tmp_path, [{"kind": "softmax", "layout": "NHWC"}, {"kind": "argmax"}])
    # An argmax output that disagrees with the probabilities at one pixel proves the output is used.
    given = np.array([[[1, 0, 1], [0, 0, 0]]], np.int32)
    probabilities, argmax, _ = postprocess([PROBS[None], given], card)
    assert probabilities.dtype == np.float32 and probabilities.shape == (2, 3, 2)
    np.testing.assert_array_equal(probabilities, PROBS)
    assert argmax.dtype == np.uint8
    np.testing.assert_array_equal(argmax, [[1, 0, 1], [0, 0, 0]])


def test_softmax_nchw_without_argmax(tmp_path):
    card = card_with(tmp_path, [{"kind": "softmax", "layout": "NCHW"}])
    probabilities, argmax, _ = postprocess([PROBS.transpose(2, 0, 1)[None]], card)
    np.testing.assert_array_equal(probabilities, PROBS)
    np.testing.assert_array_equal(argmax, [[1, 0, 1], [0, 0, 1]])


def test_argmax_output_listed_first(tmp_path):
    card = card_with(tmp_path, [{"kind": "argmax"}, {"kind": "softmax", "layout": "NHWC"}])
    given = np.array([[[0, 1, 1], [0, 1, 1]]], np.int64)
    probabilities, argmax, _ = postprocess([given, PROBS[None]], card)
    np.testing.assert_array_equal(probabilities, PROBS)
    np.testing.assert_array_equal(argmax, given[0])


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_logits_get_a_softmax(tmp_path, layout):
    card = card_with(tmp_path, [{"kind": "logits", "layout": layout}], ["background", "scratch", "crack"])
    logits = np.array([[[0.0, 1.0, 3.0], [2.0, 2.0, -1.0]]], np.float32)  # 1 x 2 pixels x 3 classes, NHWC
    tensor = logits[None] if layout == "NHWC" else logits.transpose(2, 0, 1)[None]
    probabilities, argmax, _ = postprocess([tensor], card)
    e = np.exp([0.0, 1.0, 3.0])
    np.testing.assert_allclose(probabilities[0, 0], e / e.sum(), rtol=1e-6)
    t = np.exp(-3.0)  # [2, 2, -1]: e^2 / (2e^2 + e^-1) = 1 / (2 + e^-3)
    np.testing.assert_allclose(probabilities[0, 1], [1 / (2 + t), 1 / (2 + t), t / (2 + t)], rtol=1e-6)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(argmax, [[2, 0]])


@pytest.mark.parametrize("shape", ["N1HW", "NHW1", "NHW"])
def test_sigmoid_one_channel(tmp_path, shape):
    layout = "NCHW" if shape == "N1HW" else "NHWC"
    card = card_with(tmp_path, [{"kind": "sigmoid", "layout": layout}])
    tensor = {"N1HW": P1[None, None], "NHW1": P1[None, ..., None], "NHW": P1[None]}[shape]
    probabilities, argmax, _ = postprocess([tensor], card)
    np.testing.assert_allclose(probabilities, PROBS, rtol=1e-6)
    np.testing.assert_array_equal(argmax, [[1, 0, 1], [0, 0, 1]])


def test_unexpected_output_rank_is_an_error(tmp_path):
    card = card_with(tmp_path, [{"kind": "softmax", "layout": "NHWC"}])
    with pytest.raises(SegScopeError, match=r"outputs\[0\] 'output0': has shape \(6,\)"):
        postprocess([np.zeros(6, np.float32)], card)
