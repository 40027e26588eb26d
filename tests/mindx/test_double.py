"""The StreamManagerApi test double keeps the SDK's contract (docs/mindx-sdk-contract.md).

The backend tests are only as good as the double, so its traps are checked here directly.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from segscope.core.stream.loader import load_pipeline

from .conftest import make_image

STREAM = b"unet_mindspore"


def _config(pipeline: Path) -> bytes:
    return load_pipeline(pipeline).with_absolute_paths().encode()


def _input(sdk, data: bytes, *boxes: tuple[float, float, float, float]):
    item = sdk.MxDataInput()
    item.data = data
    vector = sdk.RoiBoxVector()
    for x0, y0, x1, y1 in boxes:
        box = sdk.RoiBox()
        box.x0, box.y0, box.x1, box.y1 = x0, y0, x1, y1
        vector.push_back(box)
    item.roiBoxs = vector
    return item


@pytest.fixture
def api(sdk, project: Path):
    manager = sdk.StreamManagerApi()
    assert manager.InitManager() == 0
    assert manager.CreateMultipleStreams(_config(project)) == 0
    yield manager
    manager.DestroyAllStreams()


def test_strings_must_be_bytes_and_arguments_positional(sdk) -> None:
    manager = sdk.StreamManagerApi()
    item = sdk.MxDataInput()
    with pytest.raises(TypeError, match="std::string"):
        item.data = "image"
    with pytest.raises(TypeError, match="std::string"):
        sdk.StringVector(["mxpi_tensorinfer0"])
    with pytest.raises(TypeError, match="Wrong number or type"):
        manager.SendData("unet_mindspore", 0, item)
    with pytest.raises(TypeError, match="argument 2 of type 'std::string'"):
        manager.CreateMultipleStreams("{}")
    with pytest.raises(TypeError):
        manager.GetResult(STREAM, outPluginId=0)
    with pytest.raises(AttributeError, match="cannot add instance attributes"):
        item.objectList = []
    with pytest.raises(OverflowError, match="unsigned long"):
        manager.GetResultWithUniqueId(STREAM, -1, 100)
    with pytest.raises(TypeError, match="Wrong number or type"):  # the timeout is required
        manager.GetResultWithUniqueId(STREAM, 0)


def test_every_call_returns_minus_one_before_init_manager(sdk, project: Path) -> None:
    manager = sdk.StreamManagerApi()
    assert manager.CreateMultipleStreams(_config(project)) == -1
    assert manager.SendData(STREAM, 0, _input(sdk, b"x")) == -1
    assert manager.SendDataWithUniqueId(STREAM, 0, _input(sdk, b"x")) == -1
    assert manager.GetResult(STREAM, 0).errorCode == -1
    protobuf = manager.GetProtobuf(STREAM, 0, sdk.StringVector([b"mxpi_tensorinfer0"]))
    assert [o.errorCode for o in protobuf] == [-1]
    assert manager.DestroyAllStreams() == -1


def test_stream_and_plugin_id_errors(sdk, api) -> None:
    item = _input(sdk, make_image(64, 48, 0), (0, 0, 64, 48))
    assert api.SendData(b"nope", 0, item) == 6002
    assert api.SendData(STREAM, -1, item) == 1004
    assert api.SendData(STREAM, 1, item) == 6006
    assert api.SendData(STREAM, b"appsrc7", item) == 6006
    assert api.GetResult(b"nope", 0).errorCode == 6002
    assert api.GetResult(STREAM, -1).errorCode == 1004
    assert api.GetResult(STREAM, 3, 100).errorCode == 6006  # an index, not a unique id
    assert len(api.GetProtobuf(b"nope", 0, sdk.StringVector([b"mxpi_tensorinfer0"]))) == 0


def test_get_result_timeout_is_1002_with_the_sdk_payload(api) -> None:
    output = api.GetResult(STREAM, 0, 50)
    assert output.errorCode == 1002
    assert output.data == b' (Code = 1002, Message = "Internal error") '


@pytest.mark.parametrize("first", ["plain", "unique"])
def test_first_send_fixes_the_mode(sdk, api, first: str) -> None:
    item = _input(sdk, make_image(64, 48, 0), (0, 0, 64, 48))
    if first == "plain":
        assert api.SendData(STREAM, 0, item) == 0
        assert api.SendDataWithUniqueId(STREAM, 0, item) == -1
        assert api.GetResultWithUniqueId(STREAM, 0, 100).errorCode == 6008
        assert api.GetResult(STREAM, 0, 5000).errorCode == 0
    else:
        assert api.SendDataWithUniqueId(STREAM, 0, item) == 0
        assert api.SendDataWithUniqueId(STREAM, b"appsrc0", item) == 1
        assert api.SendData(STREAM, 0, item) == 6008
        assert api.GetResult(STREAM, 0, 100).errorCode == 6008
        assert api.GetResultWithUniqueId(STREAM, 1, 5000).errorCode == 0
        assert api.GetResultWithUniqueId(STREAM, 0, 5000).errorCode == 0
        timeout = api.GetResultWithUniqueId(STREAM, 9, 50)
        assert (timeout.errorCode, timeout.data) == (6010, b"Time out, can not get result in time.")


def test_dumpdata_json_follows_proto3_json(sdk, api) -> None:
    assert api.SendData(STREAM, 0, _input(sdk, make_image(320, 240, 1), (10, 20, 300, 200))) == 0
    output = api.GetResult(STREAM, 0, 10000)
    assert output.errorCode == 0
    dump = json.loads(output.data)
    assert dump["buffer"] == {"bufferData": ""}
    (meta,) = dump["metaData"]
    assert (meta["key"], meta["protoDataType"]) == ("mxpi_tensorinfer0", "MxpiTensorPackageList")
    package = json.loads(meta["content"])["tensorPackageVec"][0]
    assert package["headerVec"][0]["dataSource"] == "mxpi_imageresize0"
    softmax, argmax = package["tensorVec"]
    assert softmax["tensorShape"] == [1, 128, 128, 2] and argmax["tensorShape"] == [1, 128, 128]
    assert (softmax["tensorDataType"], argmax["tensorDataType"]) == (0, 3)
    assert softmax["memType"] == "MXPI_MEMORY_HOST_MALLOC"
    assert isinstance(softmax["tensorDataPtr"], str) and isinstance(softmax["freeFunc"], str)  # uint64
    probabilities = np.frombuffer(base64.b64decode(softmax["dataStr"]), "<f4").reshape(softmax["tensorShape"])
    assert softmax["tensorDataSize"] == probabilities.nbytes
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-5)


def test_crop_errors_and_pass_through(sdk, api) -> None:
    image = make_image(320, 240, 2)
    assert api.SendData(STREAM, 0, _input(sdk, image, (400, 300, 500, 400), (5, 5, 5, 50))) == 0
    failed = api.GetResult(STREAM, 0, 10000)
    assert failed.errorCode == 2001 and failed.data.endswith(b"\n") and b"320x240" in failed.data
    assert api.SendData(STREAM, 0, _input(sdk, image)) == 0  # no boxes: nothing is cropped or inferred
    passed = api.GetResult(STREAM, 0, 10000)
    assert passed.errorCode == 0 and json.loads(passed.data)["metaData"] == []
    assert api.SendData(STREAM, 0, _input(sdk, b"not an image", (0, 0, 10, 10))) == 0
    assert api.GetResult(STREAM, 0, 10000).errorCode == 1004


def test_get_protobuf_reads_metadata_only_without_dumpdata(sdk, project: Path) -> None:
    keys = sdk.StringVector([b"mxpi_tensorinfer0"])
    item = _input(sdk, make_image(320, 240, 3), (0, 0, 320, 240))
    manager = sdk.StreamManagerApi()
    assert manager.InitManager() == 0
    config = json.loads(_config(project))
    config["other"] = json.loads(_config(project.with_name("tiny_nodump.pipeline")))["unet_mindspore"]
    assert manager.CreateMultipleStreams(json.dumps(config).encode()) == 0
    assert manager.SendData(STREAM, 0, item) == 0
    assert len(manager.GetProtobuf(STREAM, 0, keys)) == 0  # mxpi_dumpdata replaced the buffer and metadata
    assert manager.SendData(b"other", 0, item) == 0
    (output,) = manager.GetProtobuf(b"other", 0, keys)
    assert (output.errorCode, output.messageName) == (0, b"mxpi_tensorinfer0")
    import MxpiDataType_pb2

    packages = MxpiDataType_pb2.MxpiTensorPackageList()
    packages.ParseFromString(output.messageBuf)
    assert [list(t.tensorShape) for t in packages.tensorPackageVec[0].tensorVec] == [[1, 128, 128, 2], [1, 128, 128]]
    assert manager.DestroyAllStreams() == 0


def test_appsink_holds_at_most_256_results(sdk, api) -> None:
    item = _input(sdk, make_image(16, 16, 4))  # no boxes: a cheap pass-through per buffer
    for _ in range(300):
        assert api.SendData(STREAM, 0, item) == 0
    stream = api._streams["unet_mindspore"]
    deadline = time.monotonic() + 30
    while stream.appsink.qsize() < 256 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert stream.appsink.qsize() == 256
    assert all(api.GetResult(STREAM, 0, 5000).errorCode == 0 for _ in range(300))  # each consumed once
    assert api.GetResult(STREAM, 0, 50).errorCode == 1002


def test_streams_are_created_and_destroyed_once_per_process(sdk, project: Path) -> None:
    manager = sdk.StreamManagerApi()
    assert manager.InitManager() == 0
    assert manager.CreateMultipleStreams(_config(project)) == 0
    assert manager.CreateMultipleStreams(_config(project)) == 6001
    assert manager.DestroyAllStreams() == 0
    assert manager.SendData(STREAM, 0, _input(sdk, b"x")) == 6002
    assert manager.CreateMultipleStreams(_config(project)) == 6004
    assert sdk.StreamManagerApi().InitManager() == 0


def test_model_path_resolves_against_the_working_directory(sdk, project: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    relative = project.read_bytes()  # modelPath "models/tiny.om", as the original pipeline has it
    manager = sdk.StreamManagerApi()
    assert manager.InitManager() == 0
    monkeypatch.chdir(project.parent)  # pipelines/: models/tiny.om is not there
    assert manager.CreateMultipleStreams(relative) == 1013
    assert "does not exist" in sdk.LOG[-1]
    monkeypatch.chdir(project.parent.parent)
    assert os.path.isfile("models/tiny.om")
    assert manager.CreateMultipleStreams(relative) == 0
    assert manager.DestroyAllStreams() == 0
