"""Static AIPP configs: parsing, and the math checked against a NumPy reference written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.stream.aipp import AippConfig, apply_aipp, load_aipp, parse_aipp

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "aipp_unet_simple_opencv.cfg"


def reference_aipp(bgr: np.ndarray, swap: bool, mean, minimum, var_reci) -> np.ndarray:
    """The AIPP contract: swap channels 0 and 2 if asked, then
    out_c = (in_c - mean_c - min_c) * var_reci_c."""
    x = bgr.astype(np.float64)
    if swap:
        x = x[..., [2, 1, 0]]
    out = np.empty((1, 3) + bgr.shape[:2])
    for c in range(3):
        out[0, c] = (x[..., c] - mean[c] - minimum[c]) * var_reci[c]
    return out


def test_shipped_config():
    config = load_aipp(SHIPPED)
    assert config.input_format == "RGB888_U8"
    assert config.rbuv_swap_switch is True
    assert config.mean_chn == (0.0, 0.0, 0.0)
    assert config.min_chn == (127.5, 127.5, 127.5)
    assert config.var_reci_chn == (0.007843137254902,) * 3


def test_shipped_config_maps_bgr_pixels_to_rgb_in_minus_one_to_one():
    bgr = np.array([[[0, 128, 255], [255, 0, 127]]], np.uint8)  # 1 x 2 pixels
    out = apply_aipp(bgr, load_aipp(SHIPPED))
    assert out.shape == (1, 3, 1, 2) and out.dtype == np.float32
    # Network channel 0 is R (the decoder's channel 2): 255 -> +1, 127 -> -0.5/127.5.
    np.testing.assert_allclose(out[0, :, 0, 0], [1.0, 0.5 / 127.5, -1.0], atol=1e-6)
    np.testing.assert_allclose(out[0, :, 0, 1], [-0.5 / 127.5, -1.0, 1.0], atol=1e-6)


@pytest.mark.parametrize("swap", [False, True])
def test_per_channel_values_match_the_reference(swap):
    mean, minimum, var_reci = (10.0, 60.0, 110.0), (0.5, 1.5, 2.5), (0.5, 0.03125, 0.0078125)
    config = AippConfig(rbuv_swap_switch=swap, mean_chn=mean, min_chn=minimum, var_reci_chn=var_reci)
    rng = np.random.default_rng(3)
    bgr = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    bgr[0, 0] = (1, 2, 250)  # a pixel whose channels differ a lot, checked by hand below
    out = apply_aipp(bgr, config)
    assert out.shape == (1, 3, 5, 7) and out.dtype == np.float32
    np.testing.assert_allclose(out, reference_aipp(bgr, swap, mean, minimum, var_reci), rtol=1e-6, atol=1e-5)
    first = (250, 2, 1) if swap else (1, 2, 250)
    by_hand = [(first[0] - 10.0 - 0.5) * 0.5, (first[1] - 60.0 - 1.5) * 0.03125,
               (first[2] - 110.0 - 2.5) * 0.0078125]
    np.testing.assert_allclose(out[0, :, 0, 0], by_hand, rtol=1e-6)


def test_parsed_per_channel_config_drives_the_math():
    text = """
    # a comment line
    aipp_op {
        aipp_mode : static   # trailing comment
        input_format : "RGB888_U8"
        rbuv_swap_switch : true
        mean_chn_0 : 100
        mean_chn_1 : 50
        mean_chn_2 : 0
        min_chn_0 : 0.25
        var_reci_chn_0 : 2.0
        var_reci_chn_1 : 0.5
        var_reci_chn_2 : 0.25
    }
    """
    config = parse_aipp(text, "custom.cfg")
    assert config.mean_chn == (100.0, 50.0, 0.0)
    assert config.min_chn == (0.25, 0.0, 0.0)  # unset channels default to 0
    assert config.var_reci_chn == (2.0, 0.5, 0.25)
    bgr = np.array([[[10, 20, 200]]], np.uint8)
    # Swapped to (200, 20, 10): ((200-100-0.25)*2, (20-50)*0.5, (10-0)*0.25)
    np.testing.assert_allclose(apply_aipp(bgr, config)[0, :, 0, 0], [199.5, -15.0, 2.5], rtol=1e-6)


def test_defaults_without_switches_are_identity():
    config = parse_aipp("aipp_op {\n aipp_mode: static\n}", "x.cfg")
    bgr = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    np.testing.assert_array_equal(apply_aipp(bgr, config)[0], bgr.transpose(2, 0, 1).astype(np.float32))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("aipp_mode : dynamic", "only static"),
        ("input_format : XRGB8888_U8", "the embedded backend supports RGB888_U8, YUV420SP_U8"),
        ("csc_switch : true", "csc_switch true with RGB888_U8 input (RGB to YUV) is not supported"),
        ("crop : true", "crop true is not supported"),
        ("resize : true", "resize true is not supported"),
        ("padding : true", "padding true is not supported"),
        ("min_chn_0 : abc", "min_chn_N must be numbers"),
        # Line numbers are the file's: the block opens on line 1, the bad line is line 2.
        ("this line has no colon", "x.cfg:2: expected 'key : value'"),
    ],
)
def test_unsupported_or_malformed_configs_give_one_line_errors(body, expected):
    with pytest.raises(SegScopeError) as info:
        parse_aipp(f"aipp_op {{\n{body}\n}}", "models/x.cfg")
    message = str(info.value)
    assert message.startswith("models/x.cfg:") and expected in message and "\n" not in message


def test_syntax_errors_give_the_file_line_after_comments():
    text = "# header\n\n# more\naipp_op {\n    aipp_mode: static\n    broken line\n}\n"
    with pytest.raises(SegScopeError, match=r"^m\.cfg:6: expected 'key : value', got 'broken line'$"):
        parse_aipp(text, "m.cfg")


def test_missing_block_and_missing_file(tmp_path):
    with pytest.raises(SegScopeError, match=r"^y\.cfg: no 'aipp_op \{ \.\.\. \}' block found$"):
        parse_aipp("input_format : RGB888_U8", "y.cfg")
    with pytest.raises(SegScopeError, match="AIPP config not found") as info:
        load_aipp(tmp_path / "absent.cfg")
    assert str(tmp_path / "absent.cfg") in str(info.value)


def test_yuv420sp_csc_needs_its_matrix_and_converts_like_the_cann_formula():
    with pytest.raises(SegScopeError, match="csc_switch true needs its matrix_r0c0..matrix_r2c2"):
        parse_aipp("aipp_op {\n input_format : YUV420SP_U8\n csc_switch : true\n}\n")
    config = parse_aipp("aipp_op {\n input_format : YUV420SP_U8\n csc_switch : true\n rbuv_swap_switch : true\n"
                        " matrix_r0c0 : 256\n matrix_r0c1 : 0\n matrix_r0c2 : 359\n"
                        " matrix_r1c0 : 256\n matrix_r1c1 : -88\n matrix_r1c2 : -183\n"
                        " matrix_r2c0 : 256\n matrix_r2c1 : 454\n matrix_r2c2 : 0\n"
                        " input_bias_1 : 128\n input_bias_2 : 128\n}\n")
    yvu = np.array([[[100, 150, 90], [16, 128, 128]]], np.uint8)  # NV21 order: Y, V, U (swapped to Y, U, V)
    out = apply_aipp(yvu, config)
    # Pixel 0: Y 100, U 90, V 150: R = (256*100 + 359*22) >> 8 = 130, G = (25600 + 88*38 - 183*22) >> 8 = 97,
    # B = (25600 - 454*38) >> 8 = 32; pixel 1 is grey 16.
    assert out.shape == (1, 3, 1, 2)
    assert out[0, :, 0, 0].tolist() == [130, 97, 32] and out[0, :, 0, 1].tolist() == [16, 16, 16]
