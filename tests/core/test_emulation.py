"""The plugin emulations on small arrays, against references written out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.stream.emulation import Normalize, SemanticSeg, read_config
from segscope.core.stream.imaging import ResizePlan
from segscope.core.stream.loader import parse_pipeline


def test_normalize_standardises_per_channel_with_alpha_beta_in_rgb_order():
    image = np.array([[[10, 20, 30], [250, 0, 128]]], np.uint8)  # BGR
    norm = Normalize.from_props({"alpha": "1, 2, 3", "beta": "2,4,8", "dataType": "FLOAT32"}, "e")
    out = norm.apply(image, rgb=False)
    # alpha/beta are R,G,B: on a BGR image channel 0 (B) uses alpha 3 / beta 8.
    expected = np.array([[[(10 - 3) / 8, (20 - 2) / 4, (30 - 1) / 2], [(250 - 3) / 8, (0 - 2) / 4, (128 - 1) / 2]]])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(norm.apply(image[..., ::-1], rgb=True), expected[..., ::-1], rtol=1e-6)


def test_normalize_to_uint8_rounds_and_saturates_and_converts_the_format():
    image = np.array([[[10, 100, 255]]], np.uint8)  # RGB
    norm = Normalize.from_props({"alpha": "20,0,0", "beta": "1,0.4,1", "format": "BGR888"}, "e")
    out = norm.apply(image, rgb=True)  # auto dataType keeps uint8: 10 - 20 -> 0, 100 / 0.4 = 250, 255
    assert out.dtype == np.uint8 and out.tolist() == [[[255, 250, 0]]]  # then RGB -> BGR888
    half = Normalize.from_props({"beta": "2,2,2"}, "e").apply(np.array([[[5, 7, 3]]], np.uint8), rgb=True)
    assert half.tolist() == [[[2, 4, 2]]]  # 2.5 -> 2, 3.5 -> 4, 1.5 -> 2: OpenCV rounds half to even


@pytest.mark.parametrize(("props", "expected"), [
    ({"alpha": "1,2"}, "alpha must be three numbers"),
    ({"beta": "1,0,1"}, "beta must not be 0"),
    ({"processType": "0"}, "min-max normalisation) is not emulated"),
    ({"dataType": "INT8"}, "dataType must be auto|UINT8|FLOAT32"),
])
def test_normalize_props_errors(props, expected):
    with pytest.raises(SegScopeError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        Normalize.from_props(props, "e")


def test_post_process_config_reads_key_value_lines(tmp_path):
    path = tmp_path / "seg.cfg"
    path.write_text("# DeepLab\nCLASS_NUM = 3  # classes\n\nMODEL_TYPE=0\nnot a pair\n", encoding="utf-8")
    assert read_config(path, "e") == {"CLASS_NUM": "3", "MODEL_TYPE": "0"}
    with pytest.raises(SegScopeError, match="postProcessConfigPath .* not found"):
        read_config(tmp_path / "absent.cfg", "e")


def test_class_map_of_nchw_nhwc_and_argmax_outputs():
    scores = np.random.default_rng(0).random((1, 3, 4, 5)).astype(np.float32)
    expected = np.argmax(scores[0], axis=0)
    np.testing.assert_array_equal(SemanticSeg(3, nchw=True).class_map(scores), expected)
    np.testing.assert_array_equal(SemanticSeg(3, nchw=False).class_map(scores.transpose(0, 2, 3, 1)), expected)
    np.testing.assert_array_equal(SemanticSeg(3, argmax_input=True).class_map(expected[None].astype(np.int32)),
                                  expected)
    with pytest.raises(SegScopeError, match="gives 3 classes but the post-process config's CLASS_NUM is 21"):
        SemanticSeg().class_map(scores)
    with pytest.raises(SegScopeError, match=r"shape \[1, 3, 4, 5\] but the post-process config expects an N x H x W"):
        SemanticSeg(3, argmax_input=True).class_map(scores)


@pytest.mark.parametrize(("library", "config", "expected"), [
    ("libdeeplabv3post.so", "", SemanticSeg(21, nchw=True)),
    ("/usr/lib/libunetmindsporepostprocess.so", "", SemanticSeg(2, nchw=False, argmax_input=True)),
    ("libunetmindsporepostprocess.so", "POST_TYPE=0\nRESIZE_TYPE=0\n",
     SemanticSeg(2, nchw=False, resize_back=False)),
])
def test_post_processor_defaults_follow_the_library(tmp_path, library, config, expected):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "seg.cfg").write_text(config, encoding="utf-8")
    text = json.dumps({"s": {"seg": {"factory": "mxpi_semanticsegpostprocessor", "props": {
        "postProcessLibPath": library, "postProcessConfigPath": "models/seg.cfg"}}}})
    pipeline = parse_pipeline(text, tmp_path / "pipelines" / "p.pipeline")
    assert SemanticSeg.from_element(pipeline.stream.elements["seg"], pipeline, "e") == expected


def test_class_map_back_to_the_crop_by_the_sdks_integer_mapping():
    classes = np.arange(8 * 8, dtype=np.uint8).reshape(8, 8)
    seg = SemanticSeg(2)
    # A 4x2 crop stretched to 8x8: out[y][x] = classes[y * 8 // 2][x * 8 // 4].
    out = seg.to_crop(classes, (4, 2), ResizePlan((8, 8), (0, 0, 8, 8)), keep_aspect=False)
    assert out.tolist() == [[0, 2, 4, 6], [32, 34, 36, 38]]
    # After a Fit resize the content is 8x4 at the top: rows use 4 of the 8, columns all 8.
    out = seg.to_crop(classes, (4, 2), ResizePlan((8, 8), (0, 0, 8, 4)), keep_aspect=True)
    assert out.tolist() == [[0, 2, 4, 6], [16, 18, 20, 22]]
    assert SemanticSeg(2, resize_back=False).to_crop(classes, (4, 2), ResizePlan((8, 8), (0, 0, 8, 8)),
                                                     False) is classes
