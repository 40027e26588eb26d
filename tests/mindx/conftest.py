"""Fixtures for the MindX backend tests: tiny ONNX models with cards, pipelines, and a fake SDK home.

`sdk_home` installs the test double as `$SDK/python/StreamManagerApi.py` next to an `MxpiDataType_pb2.py`
built from `proto/` and gives each test a fresh "process" (fresh modules, fresh backend process state).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from segscope.core.backends import mindx_sdk

HERE = Path(__file__).parent
SDK_MODULES = ("StreamManagerApi", "MxpiDataType_pb2", "MxpiDumpData_pb2")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


protogen = _load("segscope_tests_mindx_protogen", HERE / "protogen.py")

AIPP_CFG = """aipp_op {
    aipp_mode : static
    input_format : RGB888_U8
    csc_switch : false
    rbuv_swap_switch : true
    min_chn_0 : 127.5
    min_chn_1 : 127.5
    min_chn_2 : 127.5
    var_reci_chn_0 : 0.007843137254902
    var_reci_chn_1 : 0.007843137254902
    var_reci_chn_2 : 0.007843137254902
}
"""


def build_model(path: Path, size: int, *, f16: bool = False, argmax_first: bool = False) -> None:
    """input [1,3,S,S] -> 1x1 conv to 2 classes -> NHWC -> softmax (+ argmax as int32)."""
    weights = np.array([[0.9, -0.6, 0.3], [-0.7, 0.8, -0.2]], np.float32).reshape(2, 3, 1, 1)
    nodes = [
        helper.make_node("Conv", ["input", "w", "b"], ["logits"]),
        helper.make_node("Transpose", ["logits"], ["nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Softmax", ["nhwc"], ["probs"], axis=-1),
        helper.make_node("ArgMax", ["probs"], ["argmax64"], axis=-1, keepdims=0),
        helper.make_node("Cast", ["argmax64"], ["argmax"], to=TensorProto.INT32),
        helper.make_node("Cast", ["probs"], ["softmax"], to=TensorProto.FLOAT16 if f16 else TensorProto.FLOAT),
    ]
    softmax = helper.make_tensor_value_info("softmax", TensorProto.FLOAT16 if f16 else TensorProto.FLOAT,
                                            [1, size, size, 2])
    argmax = helper.make_tensor_value_info("argmax", TensorProto.INT32, [1, size, size])
    graph = helper.make_graph(
        nodes, "tiny_unet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [argmax, softmax] if argmax_first else [softmax, argmax],
        [helper.make_tensor("w", TensorProto.FLOAT, [2, 3, 1, 1], weights.ravel()),
         helper.make_tensor("b", TensorProto.FLOAT, [2], [0.1, -0.1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def make_project(root: Path, size: int = 128, *, dumpdata: bool = True, f16: bool = False,
                 argmax_first: bool = False) -> Path:
    """A project folder (models/ + pipelines/) in the original layout; returns the .pipeline path."""
    models = root / "models"
    models.mkdir(parents=True, exist_ok=True)
    build_model(models / "tiny.onnx", size, f16=f16, argmax_first=argmax_first)
    (models / "tiny.om").write_bytes(b"not a real .om: the double runs the card's ONNX export")
    (models / "aipp.cfg").write_text(AIPP_CFG, encoding="utf-8")
    outputs = [{"name": "softmax", "kind": "softmax", "layout": "NHWC"}, {"name": "argmax", "kind": "argmax"}]
    card = {"name": "tiny", "onnx": "tiny.onnx", "om": "tiny.om", "aipp": "aipp.cfg",
            "input": {"name": "input", "layout": "NCHW", "width": size, "height": size},
            "outputs": outputs[::-1] if argmax_first else outputs, "classes": ["background", "defect"]}
    (models / "tiny.json").write_text(json.dumps(card), encoding="utf-8")
    stream = {
        "stream_config": {"deviceId": "0"},
        "appsrc0": {"props": {"blocksize": "4096000"}, "factory": "appsrc", "next": "mxpi_imagedecoder0"},
        "mxpi_imagedecoder0": {"props": {"cvProcessor": "opencv", "outputDataFormat": "BGR"},
                               "factory": "mxpi_imagedecoder", "next": "mxpi_imagecrop0"},
        "mxpi_imagecrop0": {"props": {"cvProcessor": "opencv", "dataSource": "ExternalObjects"},
                            "factory": "mxpi_imagecrop", "next": "mxpi_imageresize0"},
        "mxpi_imageresize0": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_Stretch",
                                        "resizeHeight": str(size), "resizeWidth": str(size)},
                              "factory": "mxpi_imageresize", "next": "mxpi_tensorinfer0"},
        "mxpi_tensorinfer0": {"props": {"dataSource": "mxpi_imageresize0", "modelPath": "models/tiny.om"},
                              "factory": "mxpi_tensorinfer", "next": "mxpi_dumpdata0" if dumpdata else "appsink0"},
        "appsink0": {"props": {"blocksize": "4096000"}, "factory": "appsink"},
    }
    if dumpdata:
        stream["mxpi_dumpdata0"] = {"props": {"requiredMetaDataKeys": "mxpi_tensorinfer0"},
                                    "factory": "mxpi_dumpdata", "next": "appsink0"}
    pipelines = root / "pipelines"
    pipelines.mkdir(exist_ok=True)
    path = pipelines / ("tiny.pipeline" if dumpdata else "tiny_nodump.pipeline")
    path.write_text(json.dumps({"unet_mindspore": stream}, indent=4), encoding="utf-8")
    return path


def make_image(width: int, height: int, seed: int) -> bytes:
    """A PNG slide with smooth structure and a bright blob, so both classes appear."""
    rng = np.random.default_rng(seed)
    base = cv2.resize(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8), (width, height),
                      interpolation=cv2.INTER_CUBIC)
    cv2.circle(base, (width // 2, height // 2), min(width, height) // 4, (250, 40, 200), -1)
    ok, png = cv2.imencode(".png", base)
    assert ok
    return png.tobytes()


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pipeline that ends in mxpi_dumpdata (the original layout); its folder also has a no-dump one."""
    root = tmp_path_factory.mktemp("project")
    make_project(root, dumpdata=False)
    return make_project(root)


@pytest.fixture(scope="session")
def images() -> list[bytes]:
    return [make_image(320, 240, seed) for seed in range(4)]


def _forget_sdk_modules() -> None:
    for name in SDK_MODULES:
        sys.modules.pop(name, None)


@pytest.fixture
def sdk_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake `$MX_SDK_HOME` holding the double, in a fresh process state."""
    home = tmp_path / "mxVision"
    python_dir = home / "python"
    python_dir.mkdir(parents=True)
    shutil.copy(HERE / "fake_sdk" / "StreamManagerApi.py", python_dir / "StreamManagerApi.py")
    protogen.write_pb2("MxpiDataType.proto", python_dir)
    protogen.write_pb2("MxpiDumpData.proto", python_dir)
    (home / "version.info").write_text("test-double 1.0\n", encoding="utf-8")
    _forget_sdk_modules()
    monkeypatch.delenv("MX_SDK_HOME", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(mindx_sdk, "_PROCESS", mindx_sdk._ProcessState(atexit_registered=True))
    yield home
    if mindx_sdk._PROCESS.session is not None:  # a test that failed before closing its backend
        mindx_sdk._PROCESS.session.destroy(quiet=True)
    _forget_sdk_modules()


@pytest.fixture
def sdk(sdk_home: Path):
    """The double's module itself, imported from the fake home (for tests of the double)."""
    sys.path.insert(0, str(sdk_home / "python"))
    import StreamManagerApi

    return StreamManagerApi


# -- the Ascend APIs that run a bare .om: the mindx.sdk and ais_bench doubles on one fake host ---------------

ASCEND_MODULES = ("mindx", "mindx.sdk", "mindx.sdk.base", "ais_bench", "ais_bench.infer", "ais_bench.infer.interface",
                  "aclruntime", "ascend_om")
#: The AIPP config's math as a card's own preprocessing: RGB, x / 127.5 - 1.
NORMALISED = {"color": "RGB", "scale": 1 / 127.5, "mean": 1.0}


def make_om_project(root: Path, size: int = 64, *, aipp: bool = True, **standin: object) -> Path:
    """models/tiny.{onnx,om,json} + aipp.cfg: the .om a stand-in for the ONNX file as ATC would compile it
    (tests/mindx/fake_host/ascend_om.py), with the AIPP config compiled in when `aipp`; returns the card's path.
    `standin` sets the stand-in's other fields (dynamic_batch, input_fp16, output_fp16, onnx, aipp)."""
    models = root / "models"
    models.mkdir(parents=True, exist_ok=True)
    build_model(models / "tiny.onnx", size)
    (models / "aipp.cfg").write_text(AIPP_CFG, encoding="utf-8")
    fields = {"fake_om": 1, "onnx": "tiny.onnx", "input_format": "NCHW", "aipp": AIPP_CFG if aipp else None,
              **standin}
    (models / "tiny.om").write_text(json.dumps(fields), encoding="utf-8")
    card = {"name": "tiny", "onnx": "tiny.onnx", "om": "tiny.om", **({"aipp": "aipp.cfg"} if aipp else {}),
            "input": {"name": "input", "layout": "NCHW", "width": size, "height": size,
                      **({"color": "RGB"} if aipp else NORMALISED)},
            "outputs": [{"name": "softmax", "kind": "softmax", "layout": "NHWC"}, {"name": "argmax", "kind": "argmax"}],
            "classes": ["background", "defect"]}
    path = models / "tiny.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    return path


def _forget_ascend_modules() -> None:
    for name in ASCEND_MODULES:
        sys.modules.pop(name, None)


@pytest.fixture
def npu_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh fake process for the Ascend doubles: fresh modules, no SDK found yet, fresh Model API state."""
    from segscope.core.backends import mindx_model

    _forget_ascend_modules()
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("MX_SDK_HOME", raising=False)
    monkeypatch.setattr(mindx_model, "_PROCESS", mindx_model._ProcessState())
    yield
    mindx_model.deinitialise()  # closes what a failing test left open
    _forget_ascend_modules()


@pytest.fixture
def model_api_home(npu_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`$MX_SDK_HOME` with `python/mindx` the Model API double (as MindX SDK 3.0/5.0 lay it out)."""
    home = tmp_path / "mxVision"
    (home / "python").mkdir(parents=True)
    (home / "python" / "mindx").symlink_to(HERE / "fake_model_api" / "mindx", target_is_directory=True)
    (home / "version.info").write_text("MindX SDK mxVision:test-double\n", encoding="utf-8")
    monkeypatch.setenv("MX_SDK_HOME", str(home))
    return home


@pytest.fixture
def ais_bench_api(npu_host: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The aclruntime and ais_bench doubles importable, as their wheels install them."""
    monkeypatch.syspath_prepend(str(HERE / "fake_ais_bench"))
