"""Crop (ExternalObjects) and resize (mxpi_imageresize, opencv) emulation."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi
from segscope.core.stream.imaging import (
    ResizePlan,
    ResizeSpec,
    chain_plans,
    crop,
    expand_box,
    plan_resize,
    resize,
    uncrop_content,
)


def gradient(width: int, height: int) -> np.ndarray:
    """A BGR image whose pixels all differ, so any misplaced pixel shows."""
    y, x = np.mgrid[0:height, 0:width]
    return np.dstack([x * 5 % 256, y * 7 % 256, (x + y) * 3 % 256]).astype(np.uint8)


# --- crop ---------------------------------------------------------------------------------------------


def test_crop_is_half_open_box():
    image = gradient(10, 8)
    out, box = crop(image, Roi(2, 3, 6, 7))
    assert box == Roi(2, 3, 6, 7)
    np.testing.assert_array_equal(out, image[3:7, 2:6])


def test_crop_clips_x1_y1_to_the_image():
    image = gradient(10, 8)
    out, box = crop(image, Roi(5, 4, 20, 30))
    assert box == Roi(5, 4, 10, 8)
    assert out.shape == (4, 5, 3)
    np.testing.assert_array_equal(out, image[4:, 5:])


@pytest.mark.parametrize("roi", [Roi(10, 0, 12, 5), Roi(3, 8, 5, 10), Roi(50, 50, 60, 60)])
def test_crop_outside_the_image_is_an_error(roi):
    with pytest.raises(SegScopeError, match=r"lies outside the 10x8 image") as info:
        crop(gradient(10, 8), roi)
    assert str(roi) in str(info.value)


@pytest.mark.parametrize("roi", [Roi(-10, 0, 20, 20), Roi(0, -1, 20, 20)])
def test_crop_with_negative_origin_is_an_error(roi):
    # MindX truncates coordinates to uint32: a negative origin becomes huge and the box is skipped (2001).
    with pytest.raises(SegScopeError, match="lies outside the 100x100 image"):
        crop(gradient(100, 100), roi)


def test_crop_limit_of_8192_pixels_per_side():
    wide = np.zeros((2, 8200, 3), np.uint8)
    out, box = crop(wide, Roi(0, 0, 8192, 2))
    assert out.shape == (2, 8192, 3)
    with pytest.raises(SegScopeError, match=r"8193x2.*at most 8192 px per side"):
        crop(wide, Roi(0, 0, 8193, 2))
    # The limit applies to the clipped box: a wider request on a smaller image is fine.
    out, box = crop(gradient(30, 20), Roi(0, 0, 9000, 20))
    assert box == Roi(0, 0, 30, 20)


# --- resize props -------------------------------------------------------------------------------------


def test_resize_spec_from_props_defaults_and_values():
    # The plugin's defaults (MxpiImageResize.cpp): Padding_NO, 32 px padding size and scaleValue, 224 dims.
    spec = ResizeSpec.from_props({"resizeWidth": "960", "resizeHeight": "480"}, "e")
    assert spec == ResizeSpec(960, 480, "Resizer_Stretch", "Padding_NO", (0, 0, 0), (32, 32), 32, 224, 224, 0, True)
    spec = ResizeSpec.from_props({"resizeWidth": "30", "resizeHeight": "20", "handleMethod": "opencv",
                                  "resizeType": "Resizer_OnlyPadding", "paddingType": "Padding_Around",
                                  "paddingColorB": "1", "paddingColorG": "2", "paddingColorR": "3.5",
                                  "paddingWidth": "40", "paddingHeight": "50", "scaleValue": "64",
                                  "minDimension": "100", "maxDimension": "200", "interpolation": "2"}, "e")
    assert spec == ResizeSpec(30, 20, "Resizer_OnlyPadding", "Padding_Around", (1, 2, 3.5), (40, 50), 64, 100, 200,
                              2, False)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"resizeType": "Resizer_MS_Yolov4"}, "resizeType 'Resizer_MS_Yolov4' is not emulated by"),
        ({"paddingType": "Padding_Left"}, "paddingType 'Padding_Left' is not one of"),
        ({"paddingColorB": "blue"}, "paddingColorB must be a number"),
    ],
)
def test_resize_spec_errors_name_the_element(props, expected):
    full = {"resizeWidth": "30", "resizeHeight": "20", **props}
    with pytest.raises(SegScopeError) as info:
        ResizeSpec.from_props(full, "p.pipeline: element 'mxpi_imageresize0'")
    message = str(info.value)
    assert message.startswith("p.pipeline: element 'mxpi_imageresize0': ") and expected in message


def test_a_resize_without_size_takes_the_model_input_size():
    spec = ResizeSpec.from_props({}, "e")
    with pytest.raises(SegScopeError, match="needs resizeWidth and resizeHeight"):
        plan_resize(40, 20, spec)
    assert plan_resize(40, 20, spec.with_size((64, 48))) == ResizePlan((64, 48), (0, 0, 64, 48))


# --- resize modes -------------------------------------------------------------------------------------


def test_stretch_equals_cv2_resize_linear():
    image = gradient(40, 20)
    out, plan = resize(image, ResizeSpec(30, 30))
    assert plan == ResizePlan((30, 30), (0, 0, 30, 30))
    np.testing.assert_array_equal(out, cv2.resize(image, (30, 30), interpolation=cv2.INTER_LINEAR))


OPENCV = {"dvpp": False}  # the opencv path
# (resize type, source size, spec fields, the cv::resize sizes in turn, output size, content box) - sizes by
# hand from MxpiImageResize.cpp's formulas.
MODES = [
    ("Resizer_KeepAspectRatio_Fit", (40, 20), dict(width=30, height=30, padding_type="Padding_RightDown"),
     [(30, 15)], (30, 30), (0, 0, 30, 15)),
    ("Resizer_KeepAspectRatio_Fit", (40, 20), dict(width=30, height=30, padding_type="Padding_Around"),
     [(30, 15)], (30, 30), (0, 7, 30, 15)),
    # Padding_NO is turned into Padding_RightDown for Fit/FastRCNN/OnlyPadding (MxpiImageResize::Init).
    ("Resizer_KeepAspectRatio_Fit", (40, 20), dict(width=30, height=30), [(30, 15)], (30, 30), (0, 0, 30, 15)),
    ("Resizer_KeepAspectRatio_Fit", (20, 40), dict(width=60, height=30, padding_type="Padding_Around"),
     [(15, 30)], (60, 30), (22, 0, 15, 30)),
    # _Long scales the long side to scaleValue whatever the resize size; Fit fits the resize size.
    ("Resizer_KeepAspectRatio_Long", (40, 20), dict(width=64, height=16, scale_value=64), [(64, 32)], (64, 32),
     (0, 0, 64, 32)),
    ("Resizer_KeepAspectRatio_Fit", (40, 20), dict(width=64, height=16, scale_value=64), [(32, 16)], (64, 16),
     (0, 0, 32, 16)),
    ("Resizer_KeepAspectRatio_Long", (20, 40), dict(scale_value=64), [(32, 64)], (32, 64), (0, 0, 32, 64)),
    ("Resizer_KeepAspectRatio_Long", (40, 20), dict(scale_value=48, padding_type="Padding_Around",
                                                     padding_size=(64, 64)), [(48, 24)], (64, 64), (8, 20, 48, 24)),
    ("Resizer_KeepAspectRatio_Long", (30, 20), dict(scale_value=50), [(50, 33)], (50, 33), (0, 0, 50, 33)),
    ("Resizer_KeepAspectRatio_Short", (40, 20), dict(scale_value=40), [(80, 40)], (80, 40), (0, 0, 80, 40)),
    ("Resizer_KeepAspectRatio_FastRCNN", (40, 20), dict(min_dimension=32, max_dimension=64), [(64, 32)], (64, 64),
     (0, 0, 64, 32)),
    ("Resizer_Rescale", (40, 20), dict(width=30, height=30), [(30, 15)], (30, 15), (0, 0, 30, 15)),
    ("Resizer_Rescale_Double", (20, 40), dict(width=64, height=16), [(16, 32), (8, 16)], (8, 16), (0, 0, 8, 16)),
    ("Resizer_OnlyPadding", (20, 10), dict(padding_type="Padding_Around"), [], (32, 32), (6, 11, 20, 10)),
    ("Resizer_OnlyPadding", (20, 10), dict(width=30, height=30), [], (32, 32), (0, 0, 20, 10)),
    # The DVPP OnlyPadding path pads to the resize size (MxpiImageResize::CalcPaddingPasteArea).
    ("Resizer_OnlyPadding", (20, 10), dict(width=30, height=30, dvpp=True), [], (30, 30), (0, 0, 20, 10)),
]


@pytest.mark.parametrize(("resize_type", "src", "fields", "steps", "output_size", "content"), MODES)
def test_resize_types_and_padding(resize_type, src, fields, steps, output_size, content):
    image = gradient(*src)
    color = (11, 22, 33)
    spec = ResizeSpec(resize_type=resize_type, padding_color=color, **{**OPENCV, **fields})
    assert plan_resize(*src, spec) == ResizePlan(output_size, content)
    out, plan = resize(image, spec)
    assert plan == ResizePlan(output_size, content)
    assert out.shape == (output_size[1], output_size[0], 3) and out.dtype == np.uint8
    expected_content = image
    for size in steps:
        expected_content = cv2.resize(expected_content, size, interpolation=cv2.INTER_LINEAR)
    x, y, w, h = content
    np.testing.assert_array_equal(out[y : y + h, x : x + w], expected_content)
    padded = np.ones(out.shape[:2], bool)
    padded[y : y + h, x : x + w] = False
    assert padded.sum() == output_size[0] * output_size[1] - w * h
    assert (out[padded] == color).all()


def test_padding_colour_follows_the_image_channel_order():
    image = gradient(20, 10)
    spec = ResizeSpec(resize_type="Resizer_OnlyPadding", padding_color=(1, 2, 3), dvpp=False)  # B, G, R
    assert (resize(image, spec)[0][31, 31] == (1, 2, 3)).all()
    assert (resize(image, spec, rgb=True)[0][31, 31] == (3, 2, 1)).all()


def test_padding_of_a_single_channel_image_uses_the_first_colour():
    gray = gradient(20, 10)[..., 0]
    out, _ = resize(gray, ResizeSpec(resize_type="Resizer_OnlyPadding", padding_color=(9, 200, 201), dvpp=False))
    assert out.shape == (32, 32)
    np.testing.assert_array_equal(out[:10, :20], gray)
    assert (out[10:] == 9).all() and (out[:, 20:] == 9).all()


def test_padding_smaller_than_the_result_is_refused():
    with pytest.raises(SegScopeError, match=r"the 40x20 result is larger than the 32x32 padding size"):
        resize(gradient(40, 20), ResizeSpec(resize_type="Resizer_OnlyPadding"))


def test_interpolation_counts_on_the_dvpp_path_only():
    image = gradient(40, 20)
    nearest = cv2.resize(image, (30, 30), interpolation=cv2.INTER_NEAREST)
    linear = cv2.resize(image, (30, 30), interpolation=cv2.INTER_LINEAR)
    assert not np.array_equal(nearest, linear)
    np.testing.assert_array_equal(resize(image, ResizeSpec(30, 30, interpolation=2, dvpp=True))[0], nearest)
    np.testing.assert_array_equal(resize(image, ResizeSpec(30, 30, interpolation=2, dvpp=False))[0], linear)


def test_crop_expand_ratios_widen_the_box_within_the_image():
    # A 20x10 box at (10, 10): a quarter of 20 px left/right, half of 10 px up/down.
    assert expand_box(Roi(10, 10, 30, 20), (0.25, 0.25, 0.5, 0.5), 100, 100) == Roi(5, 5, 35, 25)
    # 0.5 left = 10 px reaches x 0 (the SDK keeps x0 only when it is larger: 0); x1/y1 clip to the image.
    assert expand_box(Roi(10, 10, 30, 20), (0.5, 0.25, 1.0, 0.5), 32, 24) == Roi(0, 0, 32, 24)


def test_chained_plans_place_the_crop_in_the_last_output():
    first = ResizePlan((64, 32), (0, 0, 64, 32))  # Long 40x20 -> 64x32
    second = ResizePlan((64, 64), (0, 0, 64, 32))  # OnlyPadding to 64x64
    assert chain_plans([first, second], (40, 20)) == ResizePlan((64, 64), (0, 0, 64, 32))
    around = ResizePlan((80, 80), (8, 24, 64, 32))
    assert chain_plans([first, around], (40, 20)) == ResizePlan((80, 80), (8, 24, 64, 32))


# --- mapping outputs back -----------------------------------------------------------------------------


@pytest.mark.parametrize("padding", ["Padding_RightDown", "Padding_Around"])
def test_uncrop_content_round_trip(padding):
    image = gradient(40, 20)
    out, plan = resize(image, ResizeSpec(30, 30, "Resizer_KeepAspectRatio_Fit", padding, (255, 255, 255)))
    expected = cv2.resize(image, (30, 15), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(uncrop_content(out, plan), expected)


def test_uncrop_content_at_another_resolution():
    plan = ResizePlan((30, 30), (0, 7, 30, 15))
    half = np.arange(15 * 15).reshape(15, 15)
    # Rows 7*0.5 = 3.5 -> round 4 to (7+15)*0.5 = 11, every column.
    np.testing.assert_array_equal(uncrop_content(half, plan), half[4:11, :])


def test_uncrop_content_of_a_stretch_is_the_whole_array():
    array = np.arange(12).reshape(3, 4)
    assert uncrop_content(array, ResizePlan((4, 3), (0, 0, 4, 3))) is array
