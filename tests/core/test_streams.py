"""Segmentation streams as people ship them, run embedded and checked, against NumPy references by hand."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.cli import main
from segscope.core.emulation import NotEmulated
from segscope.core.roi import Roi

ROI = Roi(30, 20, 100, 80)  # a 70 x 60 crop


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
    stream["mxpi_tensorinfer0"]["next"] = "mxpi_semanticsegpostprocessor0"
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
    stream["mxpi_tensorinfer0"]["props"]["modelPath"] = "models/plain.om"


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


# --- segscope check -----------------------------------------------------------------------------------


def tensor_input(data: dict) -> None:
    stream = data["unet_mindspore"]
    for name in ("mxpi_imagedecoder0", "mxpi_imagecrop0", "mxpi_imageresize0"):
        del stream[name]
    stream["appsrc0"]["next"] = "mxpi_tensorinfer0:0"
    stream["appsrc1"] = {"factory": "appsrc", "next": "mxpi_tensorinfer0:1"}


def dvpp(data: dict) -> None:
    data["unet_mindspore"]["mxpi_imagedecoder0"]["props"] = {}


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
    (dvpp, "valid for MindX; embedded backend: cannot run (mxpi_imagedecoder0 (mxpi_imagedecoder): DVPP decode "
           "(cvProcessor 'ascend', the SDK default: YUV420SP output) is not emulated; set cvProcessor to opencv "
           "to run it here)"),
    (custom, "valid for MindX; embedded backend: cannot run (my_filter0 (my_filter): a custom plugin)"),
    (modelinfer("libyolov3postprocess.so"), "valid for MindX; embedded backend: cannot run (mxpi_tensorinfer0 "
     "(mxpi_modelinfer): post-processing library 'libyolov3postprocess.so' is not a segmentation one)"),
    (number_prop, "invalid: stream 'unet_mindspore', element 'appsrc0': prop 'blocksize' is 4096000, not a string "
                  "or object: MindX refuses it; write it as a string, e.g. \"blocksize\": \"4096000\""),
], ids=["shipped", "tensor-input", "dvpp", "custom", "yolo-modelinfer", "number-prop"])
def test_check_line_and_exit_code(tiny_model_project, capsys, edit, verdict):
    path = tiny_model_project.write_pipeline("p.pipeline", edit)
    (tiny_model_project.root / "models" / "seg.cfg").write_text("CLASS_NUM=2\n")
    code = main(["check", str(path)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    om = tiny_model_project.root / "models" / "unet_hw960_bs1.om"
    note = f"; note: modelPath {om} is not here (fine if it is on the Ascend host)"
    notes = {"custom": "; note: my_filter0 is a custom plugin (my_filter): valid if installed on the host" + note,
             "number-prop": "",
             "tensor-input": "; note: SegScope drives stream 'unet_mindspore', input 'appsrc0', output 'appsink0'"
                             + note}
    key = {custom: "custom", number_prop: "number-prop", tensor_input: "tensor-input"}.get(edit)
    assert lines[0] == f"{path}: {verdict}{notes[key] if key else note}"
    assert code == (2 if verdict.startswith("invalid") else 0)


def test_check_several_files_exits_2_if_any_is_invalid(tiny_model_project, tmp_path, capsys):
    bad = tmp_path / "bad.pipeline"
    bad.write_bytes(b"\xff\xfe")
    code = main(["check", str(tiny_model_project.pipeline), str(bad), str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 2 and len(lines) == 3
    assert lines[0].startswith(f"{tiny_model_project.pipeline}: valid for MindX; embedded backend: runs")
    assert lines[1].startswith(f"{bad}: invalid: not a UTF-8 text file")
    assert lines[2] == f"{tmp_path}: invalid: is a folder, not a pipeline file: give the .pipeline file's path"


def test_the_backend_refuses_a_tensor_input_stream_with_the_checks_reason(tiny_model_project):
    path = tiny_model_project.write_pipeline("t.pipeline", tensor_input)
    with pytest.raises(NotEmulated, match="takes tensors, not images") as info:
        EmbeddedBackend(path)
    assert "\n" not in str(info.value)
