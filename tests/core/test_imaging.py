"""Crop (ExternalObjects) and resize (mxpi_imageresize, opencv) emulation."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.imaging import ResizePlan, ResizeSpec, crop, plan_resize, resize, uncrop_content
from segscope.core.roi import Roi


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
    spec = ResizeSpec.from_props({"resizeWidth": "960", "resizeHeight": "480"}, "e")
    assert spec == ResizeSpec(960, 480, "Resizer_Stretch", "Padding_RightDown", (0, 0, 0))
    spec = ResizeSpec.from_props({"resizeWidth": "30", "resizeHeight": "20",
                                  "resizeType": "Resizer_OnlyPadding", "paddingType": "Padding_Around",
                                  "paddingColorB": "1", "paddingColorG": "2", "paddingColorR": "3"}, "e")
    assert spec == ResizeSpec(30, 20, "Resizer_OnlyPadding", "Padding_Around", (1, 2, 3))


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"resizeType": "Resizer_MS_Yolov4"}, "resizeType 'Resizer_MS_Yolov4' is not supported"),
        ({"paddingType": "Padding_Left"}, "paddingType 'Padding_Left' is not one of"),
        ({"paddingColorB": "blue"}, "paddingColorB/G/R must be integers"),
        ({"resizeWidth": None}, "missing prop 'resizeWidth'"),
    ],
)
def test_resize_spec_errors_name_the_element(props, expected):
    full = {"resizeWidth": "30", "resizeHeight": "20", **props}
    full = {k: v for k, v in full.items() if v is not None}
    with pytest.raises(SegScopeError) as info:
        ResizeSpec.from_props(full, "p.pipeline: element 'mxpi_imageresize0'")
    message = str(info.value)
    assert message.startswith("p.pipeline: element 'mxpi_imageresize0': ") and expected in message


# --- resize modes -------------------------------------------------------------------------------------


def test_stretch_equals_cv2_resize_linear():
    image = gradient(40, 20)
    out, plan = resize(image, ResizeSpec(30, 30))
    assert plan == ResizePlan((30, 30), (0, 0, 30, 30))
    np.testing.assert_array_equal(out, cv2.resize(image, (30, 30), interpolation=cv2.INTER_LINEAR))


@pytest.mark.parametrize(
    ("resize_type", "src", "target", "padding", "output_size", "content"),
    [
        # 40x20 into 30x30: scale min(30/40, 30/20) = 0.75 -> 30x15.
        ("Resizer_KeepAspectRatio_Fit", (40, 20), (30, 30), "Padding_RightDown", (30, 30), (0, 0, 30, 15)),
        ("Resizer_KeepAspectRatio_Fit", (40, 20), (30, 30), "Padding_Around", (30, 30), (0, 7, 30, 15)),
        ("Resizer_KeepAspectRatio_Fit", (40, 20), (30, 30), "Padding_NO", (30, 15), (0, 0, 30, 15)),
        # 20x40 into 60x30: scale min(60/20, 30/40) = 0.75 -> 15x30, padded on the right / both sides.
        ("Resizer_KeepAspectRatio_Fit", (20, 40), (60, 30), "Padding_RightDown", (60, 30), (0, 0, 15, 30)),
        ("Resizer_KeepAspectRatio_Fit", (20, 40), (60, 30), "Padding_Around", (60, 30), (22, 0, 15, 30)),
        # Upscaling keeps the aspect too: 10x5 into 30x30 -> 30x15.
        ("Resizer_KeepAspectRatio_Fit", (10, 5), (30, 30), "Padding_Around", (30, 30), (0, 7, 30, 15)),
        # Long: the long side is scaled to the target's, bounded so the result fits (here the same as Fit).
        ("Resizer_KeepAspectRatio_Long", (40, 20), (30, 30), "Padding_RightDown", (30, 30), (0, 0, 30, 15)),
        ("Resizer_KeepAspectRatio_Long", (20, 40), (60, 30), "Padding_Around", (60, 30), (22, 0, 15, 30)),
        # OnlyPadding: no scaling at all.
        ("Resizer_OnlyPadding", (20, 10), (30, 30), "Padding_RightDown", (30, 30), (0, 0, 20, 10)),
        ("Resizer_OnlyPadding", (20, 10), (30, 30), "Padding_Around", (30, 30), (5, 10, 20, 10)),
        ("Resizer_OnlyPadding", (20, 10), (30, 30), "Padding_NO", (20, 10), (0, 0, 20, 10)),
    ],
)
def test_keep_aspect_and_padding_modes(resize_type, src, target, padding, output_size, content):
    image = gradient(*src)
    color = (11, 22, 33)
    spec = ResizeSpec(*target, resize_type, padding, color)
    assert plan_resize(*src, spec) == ResizePlan(output_size, content)
    out, plan = resize(image, spec)
    assert plan == ResizePlan(output_size, content)
    assert out.shape == (output_size[1], output_size[0], 3) and out.dtype == np.uint8
    x, y, w, h = content
    expected_content = image if (w, h) == src else cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(out[y : y + h, x : x + w], expected_content)
    padded = np.ones(out.shape[:2], bool)
    padded[y : y + h, x : x + w] = False
    assert padded.sum() == output_size[0] * output_size[1] - w * h
    assert (out[padded] == color).all()


def test_padding_of_a_single_channel_image_uses_the_first_colour():
    gray = gradient(20, 10)[..., 0]
    out, _ = resize(gray, ResizeSpec(30, 30, "Resizer_OnlyPadding", "Padding_RightDown", (9, 200, 201)))
    assert out.shape == (30, 30)
    np.testing.assert_array_equal(out[:10, :20], gray)
    assert (out[10:] == 9).all() and (out[:, 20:] == 9).all()


def test_only_padding_refuses_a_crop_larger_than_the_output():
    with pytest.raises(SegScopeError, match=r"Resizer_OnlyPadding: the 40x20 crop is larger than 30x30"):
        resize(gradient(40, 20), ResizeSpec(30, 30, "Resizer_OnlyPadding"))


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
