"""Segmentation streams as people ship them, run embedded and checked, against NumPy references by hand."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.cli import main
from segscope.core.dataset.demo import generate_demo_dataset
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi
from segscope.core.stream import dvpp
from segscope.core.stream.emulation import NotEmulated
from segscope.core.stream.pipeline import DEFAULT_PIPELINE

ROI = Roi(30, 20, 100, 80)  # a 70 x 60 crop
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def slide(tmp_path, write_png):
    rng = np.random.default_rng(1)
    image = rng.integers(180, 240, (90, 120, 3), dtype=np.uint8)
    image[30:60, 40:80] = rng.integers(0, 40, (30, 40, 3), dtype=np.uint8)
    return write_png(tmp_path / "slide.png", image), image


def _resize(stream: dict, **props: str) -> None:
    stream["mxpi_imageresize0"]["props"] = {"handleMethod": "opencv", **props}


def two_step(data: dict) -> None:
    """DeepLab-style: Long (scaleValue) then OnlyPadding, then a semantic segmentation post-processor."""
    stream = data["unet_mindspore"]
    _resize(stream, resizeType="Resizer_KeepAspectRatio_Long", scaleValue="960")
    stream["mxpi_imageresize0"]["next"] = "mxpi_imageresize1"
    stream["mxpi_imageresize1"] = {"factory": "mxpi_imageresize", "next": "mxpi_tensorinfer0",
                                   "props": {"handleMethod": "opencv", "resizeType": "Resizer_OnlyPadding",
                                             "paddingHeight": "960", "paddingWidth": "960"}}
    stream["mxpi_tensorinfer0"]["props"]["dataSource"] = "mxpi_imageresize1"  # the padded image
    stream["mxpi_tensorinfer0"]["next"] = "tee0"  # a second branch to appsink1: not on SegScope's way
    stream["tee0"] = {"factory": "tee", "next": ["mxpi_semanticsegpostprocessor0", "queue1"]}
    stream["queue1"] = {"factory": "queue", "next": "appsink1"}
    stream["appsink1"] = {"factory": "appsink"}
    stream["mxpi_semanticsegpostprocessor0"] = {
        "factory": "mxpi_semanticsegpostprocessor", "next": "mxpi_dataserialize0",
        "props": {"dataSource": "mxpi_tensorinfer0", "postProcessConfigPath": "models/seg.cfg",
                  "postProcessLibPath": "libdeeplabv3post.so"}}
    stream["mxpi_dataserialize0"] = {"factory": "mxpi_dataserialize", "next": "appsink0",
                                     "props": {"outputDataKeys": "mxpi_semanticsegpostprocessor0"}}
    del stream["mxpi_dumpdata0"]


def test_two_step_resize_and_semantic_segmentation(tiny_model_project, slide):
    (tiny_model_project.root / "models" / "seg.cfg").write_text("# deeplabv3.cfg\nCLASS_NUM=2\nMODEL_TYPE=0\n")
    path, image = slide
    pipeline = tiny_model_project.write_pipeline("deeplab.pipeline", two_step)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(path, ROI)
    # By hand: Long scales the long side to 960 in float32 and truncates; OnlyPadding pads right/down with 0.
    scale = np.float32(960) / np.float32(70)
    w, h = int(np.float32(70) * scale), int(np.float32(60) * scale)
    padded = np.zeros((960, 960, 3), np.uint8)
    padded[:h, :w] = cv2.resize(image[20:80, 30:100], (w, h), interpolation=cv2.INTER_LINEAR)
    probabilities = tiny_model_project.probabilities(tiny_model_project.network_input(padded))
    np.testing.assert_allclose(result.probabilities, probabilities[:h, :w], atol=2e-6)
    # The post-processor: argmax of the NHWC output, back to the 70x60 crop by src[y*960//60][x*960//70].
    classes = probabilities.argmax(axis=-1)
    rows, cols = np.arange(60) * 960 // 60, np.arange(70) * 960 // 70
    on_crop = classes[rows[:, None], cols[None, :]].astype(np.uint8)
    np.testing.assert_array_equal(result.argmax, cv2.resize(on_crop, (w, h), interpolation=cv2.INTER_NEAREST))


def normalize_no_aipp(data: dict) -> None:
    stream = data["unet_mindspore"]
    stream["mxpi_imagedecoder0"]["props"]["outputDataFormat"] = "RGB"
    stream["mxpi_imageresize0"]["next"] = "mxpi_imagenormalize0"
    stream["mxpi_imagenormalize0"] = {"factory": "mxpi_imagenormalize", "next": "queue0",
                                      "props": {"alpha": "127.5, 127.5, 127.5", "beta": "127.5,127.5,127.5",
                                                "dataType": "FLOAT32"}}
    stream["queue0"] = {"factory": "queue", "next": "mxpi_tensorinfer0", "props": {"max-size-buffers": "50"}}
    stream["mxpi_tensorinfer0"]["props"].update(modelPath="models/plain.om", dataSource="mxpi_imagenormalize0")


def test_image_normalize_then_a_model_without_aipp(tiny_model_project, slide):
    card = json.loads(tiny_model_project.card.read_text())
    del card["aipp"]
    (tiny_model_project.root / "models" / "plain.json").write_text(json.dumps(card))
    path, image = slide
    pipeline = tiny_model_project.write_pipeline("norm.pipeline", normalize_no_aipp)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(path, ROI)
    rgb = cv2.resize(image[20:80, 30:100], (960, 960), interpolation=cv2.INTER_LINEAR)[..., ::-1]
    tensor = ((rgb.astype(np.float64) - 127.5) / 127.5).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(result.probabilities, tiny_model_project.probabilities(tensor), atol=1e-5)


def crop_expand_float(data: dict) -> None:
    """The crop widens the ROI and resizes it itself (Fit into 960x480); the decoder gives float32; a second
    resize pads to the model's 960x960 (OnlyPadding, Around)."""
    stream = data["unet_mindspore"]
    stream["mxpi_imagedecoder0"]["props"]["dataType"] = "float32"
    stream["mxpi_imagecrop0"]["props"].update(leftExpandRatio="0.5", upExpandRatio="0.25", resizeWidth="960",
                                              resizeHeight="480", resizeType="Resizer_KeepAspectRatio_Fit")
    _resize(stream, resizeType="Resizer_OnlyPadding", paddingType="Padding_Around", paddingWidth="960",
            paddingHeight="960", paddingColorR="255")
    stream["mxpi_tensorinfer0"]["props"]["modelPath"] = "models/plain.om"  # float32 pixels: no uint8 AIPP


def test_crop_expand_ratios_own_resize_and_float32_decode(tiny_model_project, slide):
    path, image = slide
    pipeline = tiny_model_project.write_pipeline("expand.pipeline", crop_expand_float)
    tiny_model_project.plain_card()
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(path, ROI)
    # By hand: the 70x60 box widened by 35 px left and 15 px up -> (0, 5)-(100, 80), 100x75; Fit into 960x480:
    # 480 * 100 > 75 * 960, so height 480 and width lround(100 * 480 / 75) = 640, padded right (the crop's
    # Padding_NO becomes RightDown) to 960x480; then centred in 960x960 with R = 255 (B, G = 0).
    assert result.roi == Roi(0, 5, 100, 80)
    fit = cv2.resize(image[5:80, 0:100].astype(np.float32), (640, 480), interpolation=cv2.INTER_LINEAR)
    canvas = np.zeros((960, 960, 3), np.float64)
    canvas[..., 2] = 255
    canvas[240:720] = 0
    canvas[240:720, :640] = fit
    expected = tiny_model_project.probabilities(tiny_model_project.network_input(canvas))
    np.testing.assert_allclose(result.probabilities, expected[240:720, :640], atol=2e-6)


def test_float32_pixels_into_a_uint8_aipp_model_cannot_run(tiny_model_project):
    """MxpiTensorInfer::CheckTensorDatasize: a float32 image is 4x the .om's uint8 AIPP input."""
    pipeline = tiny_model_project.write_pipeline(
        "float_aipp.pipeline", lambda data: data["unet_mindspore"]["mxpi_imagedecoder0"]["props"].update(
            dataType="float32"))
    with pytest.raises(SegScopeError, match="gives the model float32 pixels .* takes uint8"):
        EmbeddedBackend(pipeline, threads=1)


def modelinfer(library: str):
    def edit(data: dict) -> None:
        stream = data["unet_mindspore"]
        stream["mxpi_tensorinfer0"]["factory"] = "mxpi_modelinfer"
        stream["mxpi_tensorinfer0"]["props"].update(postProcessLibPath=library,
                                                    postProcessConfigPath="models/seg.cfg")
    return edit


def test_modelinfer_with_a_segmentation_post_processor(tiny_model_project, slide):
    (tiny_model_project.root / "models" / "seg.cfg").write_text("CLASS_NUM=2\nMODEL_TYPE=0\n")
    path, image = slide
    pipeline = tiny_model_project.write_pipeline("fcn.pipeline", modelinfer("libdeeplabv3post.so"))
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(path, ROI)
    resized = cv2.resize(image[20:80, 30:100], (960, 960), interpolation=cv2.INTER_LINEAR)
    classes = tiny_model_project.probabilities(tiny_model_project.network_input(resized)).argmax(axis=-1)
    rows, cols = np.arange(60) * 960 // 60, np.arange(70) * 960 // 70
    on_crop = classes[rows[:, None], cols[None, :]].astype(np.uint8)
    np.testing.assert_array_equal(result.argmax, cv2.resize(on_crop, (960, 960), interpolation=cv2.INTER_NEAREST))


def test_shipped_pipeline_results_are_unchanged(tiny_model_project, slide):
    path, image = slide
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        result = backend.infer(path, ROI)
    resized = cv2.resize(image[20:80, 30:100], (960, 960), interpolation=cv2.INTER_LINEAR)
    expected = tiny_model_project.probabilities(tiny_model_project.network_input(resized))
    np.testing.assert_allclose(result.probabilities, expected, atol=2e-6)


def test_a_resize_without_size_takes_the_model_input_size(tiny_model_project, slide):
    path, image = slide

    def edit(data: dict) -> None:
        _resize(data["unet_mindspore"], resizeType="Resizer_Stretch")

    with EmbeddedBackend(tiny_model_project.write_pipeline("nosize.pipeline", edit), threads=1) as backend:
        result = backend.infer(path, ROI)
    resized = cv2.resize(image[20:80, 30:100], (960, 960), interpolation=cv2.INTER_LINEAR)
    expected = tiny_model_project.probabilities(tiny_model_project.network_input(resized))
    np.testing.assert_allclose(result.probabilities, expected, atol=2e-6)


# --- segscope check -----------------------------------------------------------------------------------


def tensor_input(data: dict) -> None:
    stream = data["unet_mindspore"]
    for name in ("mxpi_imagedecoder0", "mxpi_imagecrop0", "mxpi_imageresize0"):
        del stream[name]
    stream["appsrc0"]["next"] = "mxpi_tensorinfer0:0"
    stream["appsrc1"] = {"factory": "appsrc", "next": "mxpi_tensorinfer0:1"}


def dvpp_decoder(data: dict) -> None:
    data["unet_mindspore"]["mxpi_imagedecoder0"]["props"] = {}


def ascend_resize(data: dict) -> None:
    del data["unet_mindspore"]["mxpi_imageresize0"]["props"]["handleMethod"]  # ascend, the default


def number_prop(data: dict) -> None:
    data["unet_mindspore"]["appsrc0"]["props"]["blocksize"] = 4096000


def custom(data: dict) -> None:
    stream = data["unet_mindspore"]
    stream["mxpi_tensorinfer0"]["next"] = "my_filter0"
    stream["my_filter0"] = {"factory": "my_filter", "next": "mxpi_dumpdata0"}


@pytest.mark.parametrize(("edit", "verdict"), [
    (lambda data: None, "valid for MindX; embedded backend: runs"),
    (tensor_input, "valid for MindX; embedded backend: cannot run (stream 'unet_mindspore' takes tensors, not "
                   "images (its input 'appsrc0' reaches no mxpi_imagedecoder))"),
    (dvpp_decoder, "valid for MindX; embedded backend: cannot run (mxpi_imagecrop0 (mxpi_imagecrop): an opencv "
           "mxpi_imagecrop after a DVPP decoder (MindX fails: the image is in the other memory); give the decoder, "
           "crop and resize the same cvProcessor)"),
    (custom, "valid for MindX; embedded backend: cannot run (my_filter0 (my_filter): a custom plugin)"),
    (ascend_resize, "valid for MindX; embedded backend: cannot run (mxpi_imageresize0 (mxpi_imageresize): an "
                    "ascend (DVPP) mxpi_imageresize after an opencv decoder (MindX fails: the image is in the other "
                    "memory); give the decoder, crop and resize the same cvProcessor)"),
    (modelinfer("libyolov3postprocess.so"), "valid for MindX; embedded backend: cannot run (mxpi_tensorinfer0 "
     "(mxpi_modelinfer): post-processing library 'libyolov3postprocess.so' is not one SegScope emulates "
     "(libdeeplabv3post.so, libunetmindsporepostprocess.so))"),
    (number_prop, "invalid: stream 'unet_mindspore', element 'appsrc0': prop 'blocksize' is 4096000, not a string "
                  "or object: MindX refuses it; write it as a string, e.g. \"blocksize\": \"4096000\""),
], ids=["shipped", "tensor-input", "dvpp", "custom", "ascend-resize", "yolo-modelinfer", "number-prop"])
def test_check_line_and_exit_code(tiny_model_project, capsys, edit, verdict):
    path = tiny_model_project.write_pipeline("p.pipeline", edit)
    (tiny_model_project.root / "models" / "seg.cfg").write_text("CLASS_NUM=2\n")
    code = main(["check", str(path)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    om = tiny_model_project.root / "models" / "unet_hw960_bs1.om"
    roi = ("; ROI: mxpi_imagecrop0 crops it (without --roi or a picked ROI: the dataset's default ROI where it "
           "fits, else the whole image)")
    note = f"; note: modelPath {om} is not here: MindX needs it on the Ascend host"
    notes = {"custom": roi + "; note: my_filter0 is a custom plugin (my_filter): valid if installed on the host" + note,
             "number-prop": "",
             "tensor-input": "; note: SegScope drives stream 'unet_mindspore', input 'appsrc0', output 'appsink0'"
                             + note,
             "dvpp": roi + f"; note: {dvpp.NOTE}" + note}
    key = {custom: "custom", number_prop: "number-prop", tensor_input: "tensor-input", all_dvpp: "dvpp"}.get(edit)
    assert lines[0] == f"{path}: {verdict}{notes[key] if key else roi + note}"
    assert code == (2 if verdict.startswith("invalid") else 0)


def test_check_says_which_stream_input_and_output_it_drives(tiny_model_project, capsys):
    (tiny_model_project.root / "models" / "seg.cfg").write_text("CLASS_NUM=2\nMODEL_TYPE=0\n")

    def edit(data: dict) -> None:
        two_step(data)
        streams = dict(data)
        data.clear()  # a model-less stream first in the file
        data["a_side_stream"] = {"appsrc0": {"factory": "appsrc", "next": "fakesink0"},
                                 "fakesink0": {"factory": "fakesink"}}
        data.update(streams)

    path = tiny_model_project.write_pipeline("two.pipeline", edit)
    assert main(["check", str(path)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{path}: valid for MindX; embedded backend: runs; ")
    assert "; note: SegScope drives stream 'unet_mindspore', input 'appsrc0', output 'appsink0'" in line


def test_a_stream_fed_by_no_appsrc_is_named(tiny_model_project, capsys):
    def edit(data: dict) -> None:
        stream = data["unet_mindspore"]
        stream["rtsp0"] = stream.pop("appsrc0")
        stream["rtsp0"].update(factory="mxpi_rtspsrc", props={"rtspUrl": "rtsp://camera/stream"})

    path = tiny_model_project.write_pipeline("rtsp.pipeline", edit)
    assert main(["check", str(path)]) == 0
    assert ("embedded backend: cannot run (stream 'unet_mindspore' has no appsrc that reaches its model "
            "'mxpi_tensorinfer0' (SegScope sends images to an appsrc))") in capsys.readouterr().out


def test_a_stream_without_appsink_is_named(tiny_model_project, capsys):
    def edit(data: dict) -> None:
        data["unet_mindspore"]["appsink0"]["factory"] = "fakesink"

    path = tiny_model_project.write_pipeline("fake.pipeline", edit)
    assert main(["check", str(path)]) == 0
    assert ("embedded backend: cannot run (stream 'unet_mindspore' has no appsink after its model "
            "'mxpi_tensorinfer0' (it ends in 'appsink0', a fakesink; SegScope reads results from an appsink))"
            ) in capsys.readouterr().out


def test_check_several_files_exits_2_if_any_is_invalid(tiny_model_project, tmp_path, capsys):
    bad = tmp_path / "bad.pipeline"
    bad.write_bytes(b"\xff\xfe")
    comma = tmp_path / "comma.pipeline"
    comma.write_text('{"s": {"a": {"factory": "appsrc",}}}')
    code = main(["check", str(tiny_model_project.pipeline), str(bad), str(tmp_path), str(comma)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 2 and len(lines) == 4
    assert lines[0].startswith(f"{tiny_model_project.pipeline}: valid for MindX; embedded backend: runs")
    assert lines[1].startswith(f"{bad}: invalid: the pipeline file is not UTF-8 text")
    assert lines[2] == f"{tmp_path}: invalid: is a model project folder, not a .pipeline file or a model card"
    assert lines[3].startswith(f"{comma}: invalid: invalid JSON: ")
    assert re.search(r" \(line 1, column 3[34]\)$", lines[3])  # the comma (Python 3.13) or the '}' after it


def test_the_backend_refuses_a_tensor_input_stream_with_the_checks_reason(tiny_model_project):
    path = tiny_model_project.write_pipeline("t.pipeline", tensor_input)
    with pytest.raises(NotEmulated, match="takes tensors, not images") as info:
        EmbeddedBackend(path)
    assert "\n" not in str(info.value)


# --- the DVPP path ----------------------------------------------------------------------------------------

JPEG_CSC = """aipp_op {
    aipp_mode : static
    input_format : YUV420SP_U8
    csc_switch : true
    rbuv_swap_switch : false
    matrix_r0c0 : 256
    matrix_r0c1 : 0
    matrix_r0c2 : 359
    matrix_r1c0 : 256
    matrix_r1c1 : -88
    matrix_r1c2 : -183
    matrix_r2c0 : 256
    matrix_r2c1 : 454
    matrix_r2c2 : 0
    input_bias_0 : 0
    input_bias_1 : 128
    input_bias_2 : 128
    min_chn_0 : 127.5
    min_chn_1 : 127.5
    min_chn_2 : 127.5
    var_reci_chn_0 : 0.007843137254902
    var_reci_chn_1 : 0.007843137254902
    var_reci_chn_2 : 0.007843137254902
}
"""


def all_dvpp(data: dict) -> None:
    stream = data["unet_mindspore"]
    stream["mxpi_imagedecoder0"]["props"] = {}  # cvProcessor ascend, the SDK default
    stream["mxpi_imagecrop0"]["props"] = {"dataSource": "ExternalObjects"}
    stream["mxpi_imageresize0"]["props"] = {"resizeHeight": "960", "resizeWidth": "960"}
    stream["mxpi_tensorinfer0"]["props"]["modelPath"] = "models/yuv.om"


def test_dvpp_decode_crop_resize_and_aipp_csc(tiny_model_project, slide):
    card = json.loads(tiny_model_project.card.read_text())
    card["aipp"] = "yuv.cfg"
    (tiny_model_project.root / "models" / "yuv.json").write_text(json.dumps(card))
    (tiny_model_project.root / "models" / "yuv.cfg").write_text(JPEG_CSC)
    path, image = slide
    pipeline = tiny_model_project.write_pipeline("dvpp.pipeline", all_dvpp)
    with EmbeddedBackend(pipeline, threads=1) as backend:
        result = backend.infer(path, Roi(31, 21, 100, 80))
    # By hand: full-range BT.601 YUV, chroma averaged over 2x2 (the 120x90 slide: strides 128 x 90), the crop
    # from the even corner (30, 20) with even sizes (70 x 60), each plane resized, chroma repeated 2x2, the
    # JPEG CSC matrix (>> 8), then (x - 127.5) / 127.5.
    b, g, r = (image[20:80, 30:100, c].astype(np.float64) for c in range(3))
    y = 0.299 * r + 0.587 * g + 0.114 * b
    u, v = (b - y) * 0.564 + 128, (r - y) * 0.713 + 128
    half = [(np.rint(c).clip(0, 255).reshape(30, 2, 35, 2).sum(axis=(1, 3)) + 2) // 4 for c in (u, v)]
    y960 = cv2.resize(np.rint(y).clip(0, 255).astype(np.uint8), (960, 960), interpolation=cv2.INTER_LINEAR)
    uv480 = [cv2.resize(np.rint(c).astype(np.uint8), (480, 480), interpolation=cv2.INTER_LINEAR) for c in half]
    yy, uu, vv = y960.astype(np.int64), *(c.repeat(2, 0).repeat(2, 1).astype(np.int64) - 128 for c in uv480)
    rgb = np.dstack([(256 * yy + 359 * vv) >> 8, (256 * yy - 88 * uu - 183 * vv) >> 8, (256 * yy + 454 * uu) >> 8])
    tensor = ((rgb.clip(0, 255) - 127.5) / 127.5).transpose(2, 0, 1)[None]
    expected = tiny_model_project.probabilities(tensor)
    assert result.roi == Roi(30, 20, 100, 80)
    # Rounding of the chroma averages and of OpenCV's own YUV conversion differ by at most 1 level.
    np.testing.assert_allclose(result.probabilities, expected, atol=0.01)
    assert np.mean(np.abs(result.probabilities - expected)) < 1e-3


def test_dvpp_stream_against_an_rgb_model_is_refused(tiny_model_project):
    card = json.loads(tiny_model_project.card.read_text())
    (tiny_model_project.root / "models" / "yuv.json").write_text(json.dumps(card))
    pipeline = tiny_model_project.write_pipeline("dvpp.pipeline", all_dvpp)
    with pytest.raises(SegScopeError, match="gives the model NV12 .DVPP decode. but its card yuv.json expects "
                                            "RGB888_U8"):
        EmbeddedBackend(pipeline)


def test_dvpp_approximation_on_a_demo_slide_is_what_the_note_says(tmp_path):
    """The figures core/stream/dvpp.py quotes for the demo model, re-measured on the first demo slide (the note itself
    quotes no model's figures: it shows for every stream)."""
    project = tmp_path / "project"
    (project / "pipelines").mkdir(parents=True)
    shutil.copytree(REPO / "models", project / "models", ignore=shutil.ignore_patterns("*.py", "*.md", "*.sh"))
    card = json.loads((project / "models" / "unet_hw960_bs1.json").read_text())
    card["aipp"] = "yuv.cfg"
    (project / "models" / "yuv.json").write_text(json.dumps(card))
    (project / "models" / "yuv.cfg").write_text(JPEG_CSC)
    data = json.loads(DEFAULT_PIPELINE.read_text())
    all_dvpp(data)
    (project / "pipelines" / "dvpp.pipeline").write_text(json.dumps(data))
    shutil.copy(DEFAULT_PIPELINE, project / "pipelines" / "opencv.pipeline")
    slide = generate_demo_dataset(tmp_path / "demo", count=1)[0] / "image.png"
    roi = Roi(2200, 1000, 4000, 2800)
    with EmbeddedBackend(project / "pipelines" / "opencv.pipeline") as opencv, \
            EmbeddedBackend(project / "pipelines" / "dvpp.pipeline") as dvpp_path:
        assert dvpp_path.capabilities.details["note"] == dvpp.NOTE and "note" not in opencv.capabilities.details
        assert "demo" not in dvpp.NOTE and "%" not in dvpp.NOTE
        a, b = opencv.infer(slide, roi), dvpp_path.infer(slide, roi)
    difference = np.abs(a.probabilities - b.probabilities)
    assert difference.mean() < 1e-4 and difference.max() < 0.25 and (a.argmax == b.argmax).mean() > 0.9999


@pytest.mark.parametrize("kind", ["folder", "not-utf8", "array"])
def test_eval_with_a_bad_pipeline_file_exits_2_with_one_line(small_dataset, tmp_path, capsys, kind):
    path = tmp_path / "bad.pipeline"
    if kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"\xff\xfe{}" if kind == "not-utf8" else b"[1, 2]")
    assert main(["eval", "--dataset", str(small_dataset), "--pipeline", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"segscope: error: {path}: ")


def test_check_without_the_onnx_export_cannot_run_embedded(tiny_model_project, capsys):
    tiny_model_project.onnx.unlink()
    assert main(["check", str(tiny_model_project.pipeline)]) == 0
    out = capsys.readouterr().out
    assert (f"{tiny_model_project.pipeline}: valid for MindX; embedded backend: cannot run "
            f"({tiny_model_project.onnx}: ONNX model named by unet_hw960_bs1.json not found)") in out
