"""Model card v2: preprocessing, activations and 1-channel outputs on the embedded backend, against an
independent NumPy reference; type checks of every field; the graph reader."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.card.onnx_graph import read_graph
from segscope.core.card.reader import load_model_card
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi
from segscope.core.stream.aipp import apply_aipp, parse_aipp
from segscope.core.stream.preprocess import Preprocess, aipp_text, make_tensor

import byo_helpers as byo


@pytest.mark.parametrize(("net_kwargs", "card_input", "outputs", "classes", "prep", "expect"),
                         [c[1:] for c in byo.CASES], ids=[c[0] for c in byo.CASES])
def test_every_card_kind_matches_a_numpy_reference(tmp_path, net_kwargs, card_input, outputs, classes, prep,
                                                   expect):
    net = byo.Net(**net_kwargs)
    pipeline = byo.write_project(tmp_path / "project", net, card_input, outputs, classes)
    png = byo.slide_png(channels=4 if prep.get("channels") == 4 else 3)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(png, Roi(*byo.BOX))
        names = backend.capabilities.class_names
    assert names == (("background", *classes) if len(classes) == 1 else tuple(classes))
    byo.assert_matches(result, *expect(byo.reference_stream(png, byo.BOX, net, **prep)), outputs)


def test_the_net_sees_what_a_users_onnxruntime_script_feeds_it(tmp_path):
    """The issue's 'done when': RGB, /255, one sigmoid channel, probabilities as a plain onnxruntime run."""
    net = byo.Net(in_channels=3, out_channels=1, size=48)
    pipeline = byo.write_project(tmp_path, net, {"color": "RGB", "scale": 1 / 255},
                                 [{"name": "scores", "layout": "NCHW", "activation": "sigmoid"}], ["crack"])
    png = byo.slide_png(48, 48)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(png)
    import cv2
    rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    x = (rgb.astype(np.float32) / 255).transpose(2, 0, 1)[None]
    logits = ort.InferenceSession(str(tmp_path / "models" / "byo.onnx")).run(None, {"image": x})[0]
    np.testing.assert_allclose(result.probabilities[..., 1], byo.sigmoid(logits[0, 0].astype(np.float64)), atol=1e-6)


def test_the_shipped_card_reads_as_before_and_matches_its_graph():
    card = load_model_card(byo.REPO / "models" / "unet_hw960_bs1.json")
    assert card.graph is not None and card.graph.source_ops == ("Softmax", "ArgMax")
    assert card.aipp is not None and card.preprocess.color == "RGB" and card.preprocess.layout == "NCHW"
    assert [(o.kind, o.activation, o.layout) for o in card.outputs] == [("softmax", "none", "NHWC"),
                                                                        ("argmax", "none", "NHWC")]
    assert card.class_names == ("background", "defect") and card.input_size == (960, 960)


def test_aipp_text_bakes_the_same_math_into_the_om():
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    for prep in (Preprocess(color="RGB", scale=1 / 255, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
                 Preprocess(color="BGR", mean=(127.5,), std=(127.5,)), Preprocess(color="RGB", scale=2.0)):
        config = parse_aipp(aipp_text(prep))
        np.testing.assert_allclose(apply_aipp(image, config), make_tensor(image, prep), rtol=1e-5, atol=1e-5)


def test_scale_mean_std_beside_an_aipp_config_must_agree_with_it(tmp_path):
    (tmp_path / "a.cfg").write_text((byo.REPO / "models" / "aipp_unet_simple_opencv.cfg").read_text())
    card = {**GOOD, "aipp": "a.cfg", "input": {**GOOD["input"], "color": "RGB", "scale": 1 / 127.5, "mean": 1}}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(card))
    assert load_model_card(path).aipp.min_chn == (127.5,) * 3  # (x / 127.5 - 1) is the config's (x - 127.5) / 127.5
    card["input"]["scale"] = 1 / 255
    path.write_text(json.dumps(card))
    with pytest.raises(SegScopeError) as info:
        load_model_card(path)
    assert str(info.value).startswith(f"{path}: input: scale/mean/std and the AIPP config a.cfg describe different "
                                      "math (min_chn_0 127.5 but mean/scale/std give 255)")


def test_outputs_are_checked_at_run_time(tmp_path):
    path = byo.write_project(tmp_path, byo.Net(), {"scale": 1}, [{"name": "scores", "layout": "NCHW",
                                                                  "activation": "none"}], ["crack"])
    card = load_model_card(path.parents[1] / "models" / "byo.json")
    from segscope.core.card.reader import postprocess

    with pytest.raises(SegScopeError) as info:
        postprocess([np.full((1, 1, 4, 4), 2.5, np.float32)], card)
    message = str(info.value)
    assert message.startswith(f"{card.path}: outputs[0] 'scores': values span 2.5..2.5") and "byo.onnx" in message
    assert "activation 'sigmoid'" in message
    legacy = load_model_card(byo.write_project(tmp_path / "v1", byo.Net(), {"scale": 1}, [{"kind": "logits"}],
                                               ["crack"]).parents[1] / "models" / "byo.json", check_graph=False)
    with pytest.raises(SegScopeError, match=r"outputs\[0\] 'output0': softmax over a single channel is always 1"):
        postprocess([np.zeros((1, 4, 4, 1), np.float32)], legacy)  # the v1 report: every probability 1.0
    bad = np.zeros((1, 1, 4, 4), np.float32)
    bad[0, 0, 1, 2] = np.nan
    with pytest.raises(SegScopeError, match=r"holds 1 NaN or infinite values"):
        postprocess([bad], card)


def test_a_card_without_preprocessing_says_so_once(tmp_path, caplog):
    pipeline = byo.write_project(tmp_path, byo.Net(), {}, [{"name": "scores", "layout": "NCHW",
                                                            "activation": "sigmoid"}], ["crack"], stem="raw")
    card_path = pipeline.parents[1] / "models" / "raw.json"
    with caplog.at_level(logging.WARNING, logger="segscope"):
        load_model_card(card_path)
        load_model_card(card_path)
    lines = [r.getMessage() for r in caplog.records if "no preprocessing" in r.getMessage()]
    assert len(lines) == 1 and str(card_path) in lines[0] and "raw 0..255" in lines[0]


# --- every field is type-checked, with one line naming the card and field ---------------------------------

GOOD = {"name": "m", "input": {"name": "image", "width": 32, "height": 32, "scale": 1},
        "outputs": [{"name": "scores", "layout": "NCHW", "activation": "sigmoid"}], "classes": ["crack"]}


@pytest.mark.parametrize(("change", "expected"), [
    ({"training": "long"}, "training: must be a JSON object, got 'long'"),
    ({"training": 3}, "training: must be a JSON object, got 3"),
    ({"name": 7}, "name: must be a non-empty string, got 7"),
    ({"onnx": ["a.onnx"]}, "onnx: must be a non-empty string"),
    ({"classes": ["bg", 2]}, "classes: must be a list of class names"),
    ({"input": {"width": 60000, "height": 60000}}, "input.width: 60000 is outside 1..8192"),
    ({"input": {"width": 32, "height": True}}, "input.height: must be an integer, got True"),
    ({"input": {"width": 32, "height": 32, "channels": 2}}, "input.channels: must be 1, 3 or 4, got 2"),
    ({"input": {"width": 32, "height": 32, "channels": "3"}}, "input.channels: must be an integer, got '3'"),
    ({"input": {"width": 32, "height": 32, "color": "YUV"}}, "input.color: must be one of BGR, RGB, GRAY"),
    ({"input": {"width": 32, "height": 32, "color": "GRAY"}}, "input.color: GRAY does not fit channels 3"),
    ({"input": {"width": 32, "height": 32, "scale": "1/255"}}, "input.scale: must be a number, got '1/255'"),
    ({"input": {"width": 32, "height": 32, "scale": 0}}, "input.scale: must be > 0, got 0"),
    ({"input": {"width": 32, "height": 32, "scale": 10 ** 400}}, "invalid JSON: an integer of 401 digits"),
    ({"input": {"width": 32, "height": 32, "mean": float("nan")}}, "invalid JSON: NaN is not a JSON number"),
    ({"input": {"width": 32, "height": 32, "mean": [1, 2]}}, "input.mean: needs 1 or 3 numbers"),
    ({"input": {"width": 32, "height": 32, "std": [1, 0, 1]}}, "input.std: must be > 0"),
    ({"input": {"width": 32, "height": 32, "colour": "RGB"}}, "input.colour: is not a card field here"),
    ({"input": {"width": 32, "height": 32, "layout": "CHW"}}, "input.layout: must be one of NCHW, NHWC"),
    ({"outputs": [{"activation": "relu"}]}, "outputs[0].activation: must be one of softmax, sigmoid, none"),
    ({"outputs": [{"kind": "logits", "activation": "sigmoid"}]}, "outputs[0].activation: kind 'logits' already"),
    ({"outputs": [{"activation": "sigmoid", "threshold": 1.5}]}, "outputs[0].threshold: 1.5: a threshold is"),
    ({"outputs": [{"activation": "softmax", "threshold": 0.5}]}, "outputs[0].threshold: 0.5: a threshold is"),
    ({"outputs": [{"activation": "sigmoid", "threshold": "0.5"}]}, "outputs[0].threshold: must be a number"),
    ({"outputs": [{"activation": "sigmoid", "treshold": 0.5}]}, "outputs[0].treshold: is not a card field"),
    ({"outputs": ["scores"]}, "outputs[0]: must be a JSON object"),
])
def test_card_fields_are_type_checked(tmp_path, change, expected):
    card = {**GOOD, **change}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(SegScopeError) as info:
        load_model_card(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


@pytest.mark.parametrize("problem", ["folder", "not-utf8", "list", "string", "unreadable", "deep"])
def test_unreadable_card_files_are_one_line_errors(tmp_path, problem):
    path = tmp_path / "m.json"
    if problem == "folder":
        path.mkdir()
    elif problem == "not-utf8":
        path.write_bytes(b'{"name": "\xff\xfe"}')
    elif problem == "list":
        path.write_text("[1, 2]")
    elif problem == "string":
        path.write_text('"card"')
    elif problem == "deep":
        path.write_text("[" * 100000 + "]" * 100000)
    else:
        if os.geteuid() == 0:
            pytest.skip("root reads files whatever their mode")
        path.write_text(json.dumps(GOOD))
        path.chmod(0)
    with pytest.raises(SegScopeError) as info:
        load_model_card(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert {"folder": "is a folder", "not-utf8": "not UTF-8", "list": "must be a JSON object, got a list",
            "string": "must be a JSON object, got a str", "unreadable": "cannot read",
            "deep": "JSON"}[problem] in message


# --- the graph reader, against the onnx package ---------------------------------------------------------------

@pytest.mark.parametrize("net", [byo.Net(), byo.Net(in_channels=4, in_layout="NHWC", out_layout="NHWC",
                                                    out_channels=3, final="Softmax", argmax=True),
                                 byo.Net(dynamic=True, squeeze=True, final="Sigmoid")], ids=["plain", "nhwc", "dyn"])
def test_graph_reader_agrees_with_the_onnx_package(tmp_path, net):
    path = net.save(tmp_path / "m.onnx")
    model = onnx.load(str(path))

    def dims(value_info) -> tuple:
        return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param
                     for d in value_info.type.tensor_type.shape.dim)

    graph = read_graph(path)
    initializers = {i.name for i in model.graph.initializer}
    expected_inputs = [(i.name, i.type.tensor_type.elem_type, dims(i)) for i in model.graph.input
                       if i.name not in initializers]
    assert [(t.name, t.elem_type, t.dims) for t in graph.inputs] == expected_inputs
    assert [(t.name, t.elem_type, t.dims) for t in graph.outputs] == \
        [(o.name, o.type.tensor_type.elem_type, dims(o)) for o in model.graph.output]
    producer = {out: node for node in model.graph.node for out in node.output}
    sources = []
    for output in model.graph.output:  # walk back through the shape-only ops by hand
        node = producer[output.name]
        while node.op_type in ("Identity", "Transpose", "Squeeze"):
            node = producer.get(node.input[0], node)
            if node.op_type in ("Identity", "Transpose", "Squeeze") and node.input[0] not in producer:
                break
        sources.append(node.op_type)
    assert list(graph.source_ops) == sources


@pytest.mark.parametrize("content", [b"", b"not onnx at all", b"\x0a\xff\xff\xff\xff\x0f"])
def test_graph_reader_refuses_what_is_not_onnx(tmp_path, content):
    path = tmp_path / "m.onnx"
    path.write_bytes(content)
    with pytest.raises(SegScopeError) as info:
        read_graph(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


# --- validation against the graph: one line naming the card, the field and both values --------------------

SIG = {"name": "scores", "layout": "NCHW", "activation": "sigmoid"}


@pytest.mark.parametrize(("net", "card_input", "outputs", "classes", "expected"), [
    (byo.Net(), {"name": "input"}, [SIG], ["crack"], "input.name: 'input' is not the graph's input 'image'"),
    (byo.Net(in_layout="NHWC"), {}, [SIG], ["crack"],
     "input.channels: 3 but the graph's input 'image' [1,32,32,3] (NCHW) has 32; the shape reads as NHWC"),
    (byo.Net(in_channels=1), {}, [SIG], ["crack"], "input.channels: 3 but the graph's input 'image' [1,1,32,32]"),
    (byo.Net(), {"width": 64}, [SIG], ["crack"], "input.width: 64 but the graph's input 'image' [1,3,32,32] "
                                                 "(NCHW) has 32"),
    (byo.Net(argmax=True), {}, [SIG], ["crack"], "outputs: the card lists 1 but the graph has 2 ('scores', 'labels')"),
    (byo.Net(), {}, [SIG, {"name": "labels", "kind": "argmax"}], ["crack"],
     "outputs: the card lists 2 but the graph has 1 ('scores')"),
    (byo.Net(out_channels=2, argmax=True), {}, [{"name": "labels", "kind": "argmax"}, {**SIG, "activation": "softmax"}],
     ["a", "b"], "outputs[0].name: 'labels' but the graph's output 0 is 'scores' (it is output 1: list outputs in "
                 "the graph's order)"),
    (byo.Net(out_channels=2), {}, [{**SIG, "layout": "NHWC", "activation": "softmax"}], ["a", "b"],
     "outputs[0].layout: NHWC reads the graph's output 'scores' [1,2,32,32] as 2x32, not the input's 32x32 "
     "(it reads as NCHW: set outputs[0].layout)"),
    (byo.Net(out_channels=2, argmax=True), {}, [{"name": "scores", "kind": "argmax"},
                                                {"name": "labels", "activation": "none"}],
     ["a", "b"], "outputs[0].kind: argmax but the graph's output 'scores' is float32"),
    (byo.Net(out_channels=2, argmax=True), {}, [{**SIG, "activation": "softmax"}, {"name": "labels",
                                                                                   "activation": "none"}],
     ["a", "b"], "outputs[1].kind: the graph's output 'labels' is int64: integer outputs are class indices"),
    (byo.Net(), {}, [{**SIG, "activation": "softmax"}], ["crack"],
     "outputs[0].activation: softmax over the single channel of 'scores' is always 1"),
    (byo.Net(out_channels=3), {}, [{**SIG, "activation": "softmax"}], ["a", "b"],
     "classes: 2 names but the graph's output 'scores' [1,3,32,32] (NCHW) has 3 channel(s)"),
    (byo.Net(), {}, [SIG], ["a", "b", "c"], "classes: 3 names but the graph's output 'scores' [1,1,32,32] (NCHW) has "
                                            "1 channel(s) (a 1-channel output has 2 classes"),
    (byo.Net(out_channels=2), {}, [{**SIG, "threshold": 0.4}], ["a", "b"],
     "outputs[0].threshold: applies to 1-channel outputs; 'scores' has 2 channels"),
    (byo.Net(final="Sigmoid"), {}, [SIG], ["crack"],
     "outputs[0].activation: 'sigmoid' but the graph's output 'scores' already comes from a Sigmoid node"),
    (byo.Net(out_channels=2, final="Softmax"), {}, [{"name": "scores", "kind": "logits", "layout": "NCHW"}],
     ["a", "b"], "outputs[0].activation: 'softmax' but the graph's output 'scores' already comes from a Softmax"),
], ids=lambda v: None)
def test_a_card_that_does_not_fit_its_graph_is_refused_at_load(tmp_path, net, card_input, outputs, classes,
                                                               expected):
    pipeline = byo.write_project(tmp_path, net, {"scale": 1, **card_input}, outputs, classes)
    card = pipeline.parents[1] / "models" / "byo.json"
    with pytest.raises(SegScopeError) as info:
        load_model_card(card)
    message = str(info.value)
    assert message.startswith(f"{card}: ") and message.endswith(" in byo.onnx") and "\n" not in message
    assert expected in message
    with pytest.raises(SegScopeError, match="in byo.onnx"):  # the backend refuses it before any run
        EmbeddedBackend(pipeline, threads=1)


def test_dynamic_sizes_take_the_cards_and_probabilities_from_the_graph_get_a_warning(tmp_path, caplog):
    net = byo.Net(dynamic=True)
    pipeline = byo.write_project(tmp_path, net, {"scale": 1 / 255},
                                 [{"name": "scores", "layout": "NCHW", "activation": "none"}], ["crack"])
    with caplog.at_level(logging.WARNING, logger="segscope"):
        card = load_model_card(pipeline.parents[1] / "models" / "byo.json")
    assert card.input_size == (32, 32) and card.graph.inputs[0].dims == (1, 3, "side", "side")
    assert any("activation 'none' but the graph computes it with a Conv node" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize(("folder", "net_kwargs", "card_input", "prep"), [
    ("magnetic_tile", dict(in_channels=1, out_channels=1, size=64), {"channels": 1, "mean": 127.5, "std": 60},
     dict(channels=1, mean=127.5, std=60)),
    ("pv_el_cells", dict(in_channels=3, out_channels=1, size=64), {"color": "RGB", "scale": 1 / 255},
     dict(color="RGB", scale=1 / 255)),
])
def test_real_grayscale_images_through_a_byo_model(tmp_path, shared_data, folder, net_kwargs, card_input, prep):
    net = byo.Net(**net_kwargs)
    pipeline = byo.write_project(tmp_path, net, card_input, [{"name": "scores", "layout": "NCHW",
                                                              "activation": "sigmoid"}], ["defect"])
    images = sorted((shared_data / folder).glob("*/image.*"))[:3]
    assert images
    with EmbeddedBackend(pipeline, threads=1) as backend:
        for path in images:
            result = backend.infer(path)
            png = path.read_bytes()
            height, width = result.image_size[1], result.image_size[0]
            p = byo.sigmoid(byo.reference_stream(png, (0, 0, width, height), net, **prep)[..., 0])
            np.testing.assert_allclose(result.probabilities, np.stack([1 - p, p], -1), atol=2e-5)


def test_an_aipp_config_that_gives_the_wrong_channel_count_is_named(tmp_path):
    net = byo.Net(in_channels=1)
    pipeline = byo.write_project(tmp_path, net, {"channels": 1},
                                 [{"name": "scores", "layout": "NCHW", "activation": "sigmoid"}], ["crack"],
                                 aipp="aipp.cfg")
    (tmp_path / "models" / "aipp.cfg").write_text((byo.REPO / "models" / "aipp_unet_simple_opencv.cfg").read_text())
    with EmbeddedBackend(pipeline, threads=1) as backend, pytest.raises(SegScopeError) as info:
        backend.infer(byo.slide_png())
    assert "the AIPP config gives 3 channel(s) but the model takes 1 (card input.channels)" in str(info.value)
