"""What a stream is sent for an ROI (core.stream.input): a stream without a crop sees the whole image unless the
user picked an ROI, which SegScope then crops before the stream and says so; an ROI of a tiled slide is read
region by region (the pixel limit on what is decoded); and the small lies: check's model line, the ROI past
the image. References: NumPy/OpenCV from the VisionSDK plugin sources, not SegScope's code."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.stream.input import PRE_CROP_NOTE

from helpers import run_cli

SIZE = 32
A, B = 1 / 400, 0.1  # output = A * fed + B: uint8 pixels 0..255 land in [0.1, 0.74]

#: mindspore-ai/models research/cv/FCN8s/infer/sdk/config/FCN8s.pipeline (commit eab643f5): opencv decode ->
#: resize Long -> resize OnlyPadding RightDown -> mxpi_modelinfer + libdeeplabv3post, and no mxpi_imagecrop.
#: Adapted: 512 -> 32, the model, its config path.
FCN8S = {
    "stream_config": {"deviceId": "0"},
    "appsrc0": {"props": {"blocksize": "409600"}, "factory": "appsrc", "next": "mxpi_imagedecoder0"},
    "mxpi_imagedecoder0": {"props": {"handleMethod": "opencv"}, "factory": "mxpi_imagedecoder",
                           "next": "mxpi_imageresize0"},
    "mxpi_imageresize0": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_KeepAspectRatio_Long",
                                    "scaleValue": str(SIZE)}, "factory": "mxpi_imageresize",
                          "next": "mxpi_imageresize1"},
    "mxpi_imageresize1": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_OnlyPadding",
                                    "scaleValue": str(SIZE), "paddingType": "Padding_RightDown",
                                    "paddingHeight": str(SIZE), "paddingWidth": str(SIZE), "paddingColorB": "0",
                                    "paddingColorG": "0", "paddingColorR": "0"},
                          "factory": "mxpi_imageresize", "next": "mxpi_tensorinfer0"},
    "mxpi_tensorinfer0": {"props": {"dataSource": "mxpi_imageresize1", "modelPath": "models/affine.om",
                                    "postProcessConfigPath": "models/fcn8s.cfg",
                                    "postProcessLibPath": "libdeeplabv3post.so"},
                          "factory": "mxpi_modelinfer", "next": "mxpi_dataserialize0"},
    "mxpi_dataserialize0": {"props": {"outputDataKeys": "mxpi_tensorinfer0"}, "factory": "mxpi_dataserialize",
                            "next": "appsink0"},
    "appsink0": {"props": {"blocksize": "4096000"}, "factory": "appsink"},
}




def affine_project(root: Path, stream: dict) -> Path:
    """models/affine: a 1x1 convolution A·I + B (the fed tensor shows in the output), activation none."""
    (root / "models").mkdir(parents=True)
    (root / "pipelines").mkdir()
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "W", "B"], ["scores"], kernel_shape=[1, 1])], "affine",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        initializer=[numpy_helper.from_array((A * np.eye(3, dtype=np.float32)).reshape(3, 3, 1, 1), "W"),
                     numpy_helper.from_array(np.full(3, B, np.float32), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(root / "models" / "affine.onnx"))
    card = {"onnx": "affine.onnx", "om": "affine.om",
            "input": {"name": "image", "width": SIZE, "height": SIZE, "scale": 1},
            "outputs": [{"name": "scores", "layout": "NCHW", "activation": "none"}], "classes": ["a", "b", "c"]}
    (root / "models" / "affine.json").write_text(json.dumps(card))
    (root / "models" / "fcn8s.cfg").write_text("CLASS_NUM=3\nMODEL_TYPE=1\n")
    path = root / "pipelines" / "fcn8s.pipeline"
    path.write_text(json.dumps({"segmentation": stream}))
    return path


def fed_long_padded(image: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """MxpiImageResize Long then OnlyPadding (opencv): the content's (w, h) and the padded model input."""
    height, width = image.shape[:2]
    scale = np.float32(SIZE) / np.float32(max(width, height))
    size = (int(np.float32(width) * scale), int(np.float32(height) * scale))
    padded = np.zeros((SIZE, SIZE, 3), np.float64)
    padded[: size[1], : size[0]] = cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)
    return padded, size


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """One 120 x 90 slide; the sidecar's default ROI 10,10,60,50 fits it (as the original 2200,1000,4000,2800
    fits a 4096 x 3072 slide), so a stream with a crop would crop it."""
    root = tmp_path_factory.mktemp("no_crop_data")
    rng = np.random.default_rng(4)
    image = cv2.resize(rng.integers(0, 256, (5, 7, 3), dtype=np.uint8), (120, 90), interpolation=cv2.INTER_CUBIC)
    (root / "a").mkdir()
    cv2.imwrite(str(root / "a" / "image.png"), image)
    (root / "segscope.json").write_text(json.dumps({"default_roi": [10, 10, 60, 50], "rois": {}}))
    return root, image


@pytest.fixture(scope="module")
def fcn8s(tmp_path_factory) -> Path:
    return affine_project(tmp_path_factory.mktemp("fcn8s"), FCN8S)


def test_without_an_roi_a_stream_without_a_crop_sees_the_whole_image(dataset, fcn8s, tmp_path):
    root, image = dataset
    code, out = run_cli("eval", "--dataset", root, "--pipeline", fcn8s, "--json", "--export", tmp_path / "out",
                        "--export-kinds", "softmax")
    assert code == 0, out
    row = json.loads(out)["images"][0]
    assert row["roi"] == "0,0,120,90" and "roi_note" not in row  # not the default ROI 10,10,60,50
    padded, (w, h) = fed_long_padded(image)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "a_softmax.npy"), A * padded[:h, :w] + B, atol=1e-5)


def test_with_an_roi_it_is_cropped_before_the_stream_and_said_everywhere(dataset, fcn8s, tmp_path):
    root, image = dataset
    code, out = run_cli("eval", "--dataset", root, "--pipeline", fcn8s, "--roi", "15,5,95,70", "--export",
                        tmp_path / "out", "--export-kinds", "softmax,mask")
    assert code == 0, out
    line = out.splitlines()[0]
    assert line.endswith(f"(no mask) [{PRE_CROP_NOTE}]")
    provenance = json.loads((tmp_path / "out" / "a_provenance.json").read_text())
    assert provenance["roi"] == [15, 5, 95, 70] and provenance["roi_note"] == PRE_CROP_NOTE
    padded, (w, h) = fed_long_padded(image[5:70, 15:95])
    np.testing.assert_allclose(np.load(tmp_path / "out" / "a_softmax.npy"), A * padded[:h, :w] + B, atol=1e-5)
    code, out = run_cli("eval", "--dataset", root, "--pipeline", fcn8s, "--roi", "15,5,95,70", "--json")
    assert json.loads(out)["images"][0]["roi_note"] == PRE_CROP_NOTE


def test_an_roi_picked_for_the_image_counts_as_the_users(dataset, fcn8s, tmp_path):
    root, _ = dataset
    picked = tmp_path / "picked"
    (picked / "a").mkdir(parents=True)
    (picked / "a" / "image.png").write_bytes((root / "a" / "image.png").read_bytes())
    (picked / "segscope.json").write_text(json.dumps({"rois": {"a": [20, 10, 70, 60]}}))
    code, out = run_cli("eval", "--dataset", picked, "--pipeline", fcn8s, "--json")
    row = json.loads(out)["images"][0]
    assert code == 0 and row["roi"] == "20,10,70,60" and row["roi_note"] == PRE_CROP_NOTE


def test_check_says_which_rule_applies(fcn8s, tiny_model_project):
    code, out = run_cli("check", fcn8s, tiny_model_project.pipeline)
    no_crop, crop = out.splitlines()
    assert code == 0 and "embedded backend: runs; ROI: the stream has no mxpi_imagecrop, so without --roi it " \
                         "resizes the whole image (as on MindX); with --roi or in the viewer SegScope crops the ROI " \
                         "before the stream" in no_crop
    assert "; ROI: mxpi_imagecrop0 crops it" in crop


def test_check_of_a_missing_model_does_not_call_it_fine(tiny_model_project):
    pipeline = tiny_model_project.write_pipeline(
        "gone.pipeline", lambda d: d["unet_mindspore"]["mxpi_tensorinfer0"]["props"].update(modelPath="models/x.om"))
    code, out = run_cli("check", pipeline)
    om = tiny_model_project.root / "models" / "x.om"
    assert code == 0 and f"embedded backend: cannot run (no model card {om.with_suffix('.json')}" in out
    assert f"note: modelPath {om} is not here: MindX needs it on the Ascend host" in out and "fine" not in out


def test_an_roi_past_the_image_is_clipped_and_said_once(tiny_model_project, small_dataset, capsys):
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--roi",
                        "10,8,500,40", "--json")
    rows = json.loads(out)["images"]
    assert code == 0 and {r["roi"] for r in rows} == {"10,8,64,40"}  # the crop plugin clips x1 (64x48 slides)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "reaches past the image" in line]
    assert len(warnings) == 1 and warnings[0].startswith("segscope: warning: ") and "10,8,64,40" in warnings[0]


def test_an_roi_of_a_40000_pixel_tiled_slide_is_read_region_by_region(tiny_model_project, tmp_path):
    """The issue's case 6: eval --roi (no --tile) of a 40000 x 40000 tiled TIFF runs in well under 1 GB, with the
    pixel limit on the region read; the stream sees the same pixels as the region read by hand."""
    tifffile = pytest.importorskip("tifffile")
    side, tile = 40000, 1024
    plain = np.full((tile, tile, 3), (200, 190, 180), np.uint8)
    marked = plain.copy()
    marked[200:600, 300:700] = (20, 30, 40)  # a dark patch inside the ROI's tile
    encoded = {False: zlib.compress(plain.tobytes(), 1), True: zlib.compress(marked.tobytes(), 1)}

    def tiles():  # rows of tiles, each already zlib-encoded (tifffile writes encoded tiles as they are)
        for y in range(0, side, tile):
            for x in range(0, side, tile):
                yield encoded[(x, y) == (19456, 19456)]

    folder = tmp_path / "slides" / "big"
    folder.mkdir(parents=True)
    tifffile.imwrite(folder / "image.tif", tiles(), shape=(side, side, 3), dtype=np.uint8, tile=(tile, tile),
                     photometric="rgb", compression="zlib")
    assert (folder / "image.tif").stat().st_size < 50_000_000
    roi = "19500,19500,21300,21300"  # 1800 x 1800
    # VmHWM: this process's own peak (getrusage's ru_maxrss would carry the forking pytest process's over exec).
    script = ("import re, sys; from segscope.core.cli import main; code = main(sys.argv[1:]); "
              "peak = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1); "
              "print('RSS', peak, file=sys.stderr); sys.exit(code)")
    args = [sys.executable, "-c", script, "eval", "--dataset", str(tmp_path / "slides"), "--pipeline",
            str(tiny_model_project.pipeline), "--roi", roi]
    done = subprocess.run([*args, "--json", "--export", str(tmp_path / "out"), "--export-kinds", "softmax"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stderr.rsplit("RSS ", 1)[1])
    assert peak_kib < 1_000_000, peak_kib  # kB: under 1 GB
    row = json.loads(done.stdout)["images"][0]
    assert row["roi"] == roi and "roi_note" not in row  # the stream's own crop: nothing to say
    # The region by hand (tifffile stores RGB, the decoder gives BGR): the patch at slide (19756, 19656).
    region = np.full((1800, 1800, 3), (180, 190, 200), np.uint8)
    region[156:556, 256:656] = (40, 30, 20)
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        expected = backend.infer(region)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "big_softmax.npy"), expected.probabilities)
    # The limit applies to what is decoded: the region, not the 1.6 gigapixel file.
    done = subprocess.run([*args, "--max-pixels", "3000000"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "1800x1800 = 3,240,000 pixels, more than the limit 3,000,000" in done.stderr
