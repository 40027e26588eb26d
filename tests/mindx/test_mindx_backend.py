"""MindXBackend against the StreamManagerApi test double: results, transports, errors and teardown."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from segscope.core.backends import mindx_sdk
from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.mindx import MindXBackend
from segscope.core.backends.mindx_transports import Pending
from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import BackendError, CancelledError, SegScopeError
from segscope.core.evaluate import evaluate_dataset
from segscope.core.roi import Roi
from segscope.core.stream.input import PRE_CROP_NOTE, StreamInput

from .conftest import make_image, make_project

ROIS = [Roi(10, 20, 300, 200), None, Roi(200, 100, 400, 300), Roi(0, 0, 64, 240)]


def _calls(name: str) -> list[tuple]:
    import StreamManagerApi

    return [args for method, args in StreamManagerApi.CALLS if method == name]


@pytest.fixture(scope="module")
def big_image() -> bytes:
    """A 4000x3000 slide: the double needs tens of milliseconds just to decode it."""
    return make_image(4000, 3000, 9)


@pytest.fixture(scope="module")
def reference(project: Path, images: list[bytes]) -> list:
    """The embedded backend's results for each image with its ROI."""
    with EmbeddedBackend(project) as embedded:
        return [embedded.infer(image, roi) for image, roi in zip(images, ROIS)]


def _assert_same(result, expected) -> None:
    # The double does the stream's math on its own (AIPP in float64), so probabilities agree to float32
    # rounding, not bit for bit.
    np.testing.assert_array_equal(result.argmax, expected.argmax)
    np.testing.assert_allclose(result.probabilities, expected.probabilities, rtol=0, atol=1e-6)
    assert result.probabilities.dtype == np.float32 and result.argmax.dtype == np.uint8
    assert (result.roi, result.image_size, result.backend) == (expected.roi, expected.image_size, "mindx")


@pytest.mark.parametrize("transport", ["protobuf", "json", "unique_id"])
def test_results_equal_the_embedded_backend(project: Path, images: list[bytes], reference: list,
                                            sdk_home: Path, transport: str) -> None:
    with MindXBackend(project, sdk_home, transport=transport, in_flight=3) as backend:
        assert backend.capabilities.name == "mindx" and backend.capabilities.input_size == (128, 128)
        first = backend.infer(images[0], ROIS[0])
        _assert_same(first, reference[0])
        assert set(first.timings) == {"upload", "infer", "postprocess"}
        results = list(backend.infer_many(InferenceRequest(i, r) for i, r in zip(images, ROIS)))
    assert len(results) == len(reference)
    for result, expected in zip(results, reference):
        _assert_same(result, expected)
    sends = _calls("SendDataWithUniqueId" if transport == "unique_id" else "SendData")
    assert len(sends) == 1 + len(images)  # one mode for every request of this backend
    assert not _calls("SendData" if transport == "unique_id" else "SendDataWithUniqueId")
    assert all(args[:2] == (b"unet_mindspore", 0) for args in sends)
    assert len(_calls("DestroyAllStreams")) == 1


def test_fast_path_reads_protobuf_from_a_stream_without_dumpdata(project: Path, images: list[bytes],
                                                                 sdk_home: Path) -> None:
    with MindXBackend(project, sdk_home) as backend:
        backend.infer(images[0], ROIS[0])
    (config,) = _calls("CreateMultipleStreams")
    stream = json.loads(config[0])["unet_mindspore"]
    assert "mxpi_dumpdata0" not in stream and stream["mxpi_tensorinfer0"]["next"] == "appsink0"
    assert Path(stream["mxpi_tensorinfer0"]["props"]["modelPath"]).is_absolute()  # the SDK resolves vs CWD
    ((name, index, keys),) = _calls("GetProtobuf")
    assert (name, index, list(keys)) == (b"unet_mindspore", 0, [b"mxpi_tensorinfer0"])
    assert not _calls("GetResult")


def test_json_fallback_passes_the_appsink_index(project: Path, images: list[bytes], sdk_home: Path) -> None:
    with MindXBackend(project, sdk_home, transport="json") as backend:
        backend.infer(images[0], ROIS[0])
        backend.infer(images[1], ROIS[1])
    assert [args[1] for args in _calls("GetResult")] == [0, 0]  # index 0, never a unique id
    (config,) = _calls("CreateMultipleStreams")
    assert "mxpi_dumpdata0" in json.loads(config[0])["unet_mindspore"]


def test_output_roles_come_from_the_model_card(tmp_path: Path, images: list[bytes], reference: list,
                                               sdk_home: Path) -> None:
    swapped = make_project(tmp_path, argmax_first=True)  # outputs [argmax, softmax], card says so
    with MindXBackend(swapped, sdk_home) as backend:
        _assert_same(backend.infer(images[0], ROIS[0]), reference[0])


def test_output_dtype_comes_from_tensor_data_type(tmp_path: Path, images: list[bytes], reference: list,
                                                  sdk_home: Path) -> None:
    half = make_project(tmp_path, f16=True)  # softmax delivered as float16 (tensorDataType 1)
    with MindXBackend(half, sdk_home, transport="json") as backend:
        result = backend.infer(images[0], ROIS[0])
    assert result.probabilities.dtype == np.float32
    np.testing.assert_allclose(result.probabilities, reference[0].probabilities, atol=1e-3)
    np.testing.assert_array_equal(result.argmax, reference[0].argmax)


@pytest.mark.parametrize("transport", ["protobuf", "json", "unique_id"])
def test_no_valid_roi_is_an_error_and_the_stream_stays_in_step(project: Path, images: list[bytes],
                                                               reference: list, sdk_home: Path,
                                                               transport: str) -> None:
    with MindXBackend(project, sdk_home, transport=transport) as backend:
        with pytest.raises(BackendError) as error:
            backend.infer(images[0], Roi(500, 400, 600, 500))  # outside the 320x240 image
        message = str(error.value)
        assert "500,400,600,500" in message and "320x240" in message and "\n" not in message
        if transport == "protobuf":
            assert "no mxpi_tensorinfer0 result" in message
        else:
            assert "code 2001" in message and "crop failed" in message
        _assert_same(backend.infer(images[1], ROIS[1]), reference[1])


def test_an_error_inside_infer_many_keeps_later_requests_in_step(project: Path, images: list[bytes],
                                                                 reference: list, sdk_home: Path) -> None:
    requests = [InferenceRequest(images[0], ROIS[0]), InferenceRequest(images[1], Roi(900, 900, 950, 950)),
                InferenceRequest(images[2], ROIS[2]), InferenceRequest(images[3], ROIS[3])]
    with MindXBackend(project, sdk_home, in_flight=4) as backend:
        results = backend.infer_many(requests)
        _assert_same(next(results), reference[0])
        with pytest.raises(BackendError, match="no mxpi_tensorinfer0 result"):
            next(results)
        _assert_same(backend.infer(images[3], ROIS[3]), reference[3])  # not the abandoned images' results
        early = backend.infer_many(InferenceRequest(i, r) for i, r in zip(images, ROIS))
        _assert_same(next(early), reference[0])
        early.close()  # abandoned with three images in flight
        _assert_same(backend.infer(images[2], ROIS[2]), reference[2])


def test_a_request_that_cannot_be_sent_fails_in_its_turn_after_the_results_before_it(
        project: Path, images: list[bytes], reference: list, sdk_home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.png"
    requests = [InferenceRequest(images[0], ROIS[0]), InferenceRequest(images[1], ROIS[1]),
                InferenceRequest(missing, ROIS[2]), InferenceRequest(images[3], ROIS[3])]
    with MindXBackend(project, sdk_home, in_flight=4) as backend:
        results = backend.infer_many(requests)
        _assert_same(next(results), reference[0])  # sent before the unreadable file: still come first
        _assert_same(next(results), reference[1])
        with pytest.raises(SegScopeError, match="missing.png"):
            next(results)
        _assert_same(backend.infer(images[3], ROIS[3]), reference[3])


def test_cancel_stops_waiting_and_the_next_request_gets_its_own_result(project: Path, images: list[bytes],
                                                                       reference: list, big_image: bytes,
                                                                       sdk_home: Path, monkeypatch) -> None:
    cancelled = threading.Event()
    with MindXBackend(project, sdk_home) as backend:
        stream_class = sys.modules["StreamManagerApi"]._Stream  # the double, loaded from sdk_home
        process = stream_class._process

        def busy_until_cancelled(stream: Any, data: bytes, boxes: list) -> Any:
            cancelled.wait(10)  # the device is still working when the user cancels (whatever the machine's load)
            return process(stream, data, boxes)

        def cancel() -> None:
            backend.cancel()
            cancelled.set()

        monkeypatch.setattr(stream_class, "_process", busy_until_cancelled)
        threading.Timer(0.02, cancel).start()
        with pytest.raises(CancelledError):
            backend.infer(big_image, Roi(2200, 1000, 4000, 2800))
        _assert_same(backend.infer(images[0], ROIS[0]), reference[0])  # not the cancelled image's late result


def test_sdk_errors_name_the_call_the_code_and_its_meaning(tmp_path: Path, sdk_home: Path) -> None:
    pipeline = make_project(tmp_path)
    config = json.loads(pipeline.read_text())
    config["unet_mindspore"]["mxpi_imageresize0"]["factory"] = "mxpi_fancyresize"
    pipeline.write_text(json.dumps(config))
    with pytest.raises(BackendError) as error:
        MindXBackend(pipeline, sdk_home)
    assert str(error.value).startswith("MindX CreateMultipleStreams failed with code 6014 (unknown plugin factory)")
    assert len(_calls("DestroyAllStreams")) == 1  # torn down although creation failed
    assert mindx_sdk._PROCESS.session is None


def test_get_result_timeout_destroys_the_streams(project: Path, images: list[bytes], big_image: bytes,
                                                 sdk_home: Path) -> None:
    backend = MindXBackend(project, sdk_home, transport="json", timeout_s=0.005)
    with pytest.raises(BackendError, match="timed out.*restart segscope"):
        backend.infer(big_image, Roi(2200, 1000, 4000, 2800))
    assert len(_calls("DestroyAllStreams")) == 1
    with pytest.raises(BackendError, match="closed"):
        backend.infer(images[0], ROIS[0])
    backend.close()
    assert len(_calls("DestroyAllStreams")) == 1


def test_get_protobuf_is_guarded_by_a_timeout(project: Path, sdk_home: Path) -> None:
    backend = MindXBackend(project, sdk_home, timeout_s=0.5)
    api_thread = backend._session.thread._thread
    never_sent = Pending(None, Roi(0, 0, 8, 8), Roi(0, 0, 8, 8), (8, 8), "<never sent>",
                         stream=b"unet_mindspore")  # nothing to wait for
    start = time.monotonic()
    with pytest.raises(BackendError, match="GetProtobuf returned nothing within 0.5 s"):
        backend._collect(never_sent)
    assert time.monotonic() - start < 5
    assert len(_calls("DestroyAllStreams")) == 1  # which also releases the blocked GetProtobuf
    api_thread.join(5)
    assert not api_thread.is_alive()
    backend.close()


def test_streams_are_destroyed_when_the_with_block_raises(project: Path, images: list[bytes],
                                                          sdk_home: Path) -> None:
    with pytest.raises(RuntimeError, match="user code"), MindXBackend(project, sdk_home) as backend:
        backend.infer(images[0], ROIS[0])
        raise RuntimeError("user code")
    assert len(_calls("DestroyAllStreams")) == 1
    backend.close()
    assert len(_calls("DestroyAllStreams")) == 1


def test_one_set_of_streams_per_process(project: Path, sdk_home: Path) -> None:
    first = MindXBackend(project, sdk_home)
    with pytest.raises(BackendError, match="already open in this process"):
        MindXBackend(project, sdk_home)
    first.close()
    with pytest.raises(BackendError, match="restart segscope"):
        MindXBackend(project, sdk_home)
    assert len(_calls("InitManager")) == 1 and len(_calls("CreateMultipleStreams")) == 1


def test_streams_are_destroyed_at_exit(project: Path, sdk_home: Path, tmp_path: Path) -> None:
    script = f"""
import atexit, sys
sys.path.insert(0, {str(sdk_home / "python")!r})
import StreamManagerApi
atexit.register(lambda: print("calls:", [m for m, _ in StreamManagerApi.CALLS]))
from pathlib import Path
from segscope.core.backends.mindx import MindXBackend
from segscope.core.dataset.dataset import Dataset
backend = MindXBackend(Path({str(project)!r}), Path({str(sdk_home)!r}))
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "calls: ['InitManager', 'CreateMultipleStreams', 'DestroyAllStreams']" in done.stdout


def test_configuration_errors_name_what_to_fix(project: Path, tmp_path: Path, sdk_home: Path) -> None:
    nodump = project.with_name("tiny_nodump.pipeline")
    with pytest.raises(BackendError, match="tiny_nodump.pipeline.*no mxpi_dumpdata.*use transport 'protobuf'"):
        MindXBackend(nodump, sdk_home, transport="unique_id")
    with pytest.raises(BackendError, match="in_flight 0: use 1..256"):
        MindXBackend(project, sdk_home, in_flight=0)
    missing = make_project(tmp_path)
    (tmp_path / "models" / "tiny.om").unlink()
    with pytest.raises(BackendError, match=f"modelPath {tmp_path / 'models' / 'tiny.om'} not found"):
        MindXBackend(missing, sdk_home)
    assert not _calls_made()


def _calls_made() -> bool:
    import sys as _sys

    module = _sys.modules.get("StreamManagerApi")
    return bool(module and module.CALLS)


def test_keeping_images_in_flight(tmp_path: Path, sdk_home: Path) -> None:
    """The gain of sending ahead, measured on the double at the real 960x960 size (printed with -s)."""
    pipeline = make_project(tmp_path, size=960)
    requests = [InferenceRequest(make_image(640, 480, seed), Roi(0, 0, 640, 480)) for seed in range(6)]
    timings: dict[str, float] = {}
    outputs: dict[str, list] = {}
    with MindXBackend(pipeline, sdk_home, transport="protobuf", in_flight=4) as backend:
        for window in (1, 4):
            backend.in_flight = window
            start = time.perf_counter()
            outputs[f"protobuf/{window}"] = list(backend.infer_many(requests))
            timings[f"protobuf/{window}"] = time.perf_counter() - start
    mindx_sdk._PROCESS = mindx_sdk._ProcessState(atexit_registered=True)  # the double's "process" is per test
    import StreamManagerApi

    StreamManagerApi._PROCESS["destroyed"] = False
    with MindXBackend(pipeline, sdk_home, transport="unique_id") as backend:
        for window in (1, 4):
            backend.in_flight = window
            start = time.perf_counter()
            outputs[f"unique_id/{window}"] = list(backend.infer_many(requests))
            timings[f"unique_id/{window}"] = time.perf_counter() - start
    for results in outputs.values():
        assert len(results) == len(outputs["protobuf/1"])
        for result, expected in zip(results, outputs["protobuf/1"]):
            np.testing.assert_array_equal(result.argmax, expected.argmax)
            np.testing.assert_array_equal(result.probabilities, expected.probabilities)
    per_image = {k: v / len(requests) * 1000 for k, v in timings.items()}
    print(f"\nMindX double, 960x960, ms/image: {per_image}")
    print(f"in-flight gain (1 -> 4): protobuf x{timings['protobuf/1'] / timings['protobuf/4']:.2f}, "
          f"unique_id JSON x{timings['unique_id/1'] / timings['unique_id/4']:.2f}; "
          f"JSON vs protobuf (in flight 4): x{timings['unique_id/4'] / timings['protobuf/4']:.2f}")


def test_real_grayscale_images_match_the_embedded_backend(project: Path, shared_data: Path,
                                                          sdk_home: Path) -> None:
    """Real 1-channel slides (smaller than the default ROI) through the stream: the decoder expands them."""
    paths = sorted((shared_data / "magnetic_tile").glob("*/image.png"))[:3]
    assert paths, "magnetic_tile images expected in the shared data"
    roi = Roi(2200, 1000, 4000, 2800).clamped(100, 100)
    with EmbeddedBackend(project) as embedded:
        expected = [embedded.infer(path, roi) for path in paths]
    with MindXBackend(project, sdk_home) as backend:
        results = list(backend.infer_many(InferenceRequest(path, roi) for path in paths))
    assert len(results) == len(expected)
    for result, reference in zip(results, expected):
        _assert_same(result, reference)


def test_close_does_not_wait_behind_a_blocked_call(project: Path, sdk_home: Path) -> None:
    backend = MindXBackend(project, sdk_home)
    session = backend._session
    keys = sys.modules["StreamManagerApi"].StringVector([b"mxpi_tensorinfer0"])
    blocked = session.thread.submit(session.api.GetProtobuf, b"unet_mindspore", 0, keys)  # nothing was sent
    start = time.monotonic()
    backend.close()
    assert time.monotonic() - start < 15
    assert len(blocked.result(timeout=5)) == 0  # released by DestroyAllStreams, with no result
    assert len(_calls("DestroyAllStreams")) == 1


def test_crop_expand_ratios_place_the_result_like_the_embedded_backend(project: Path, images: list[bytes],
                                                                        sdk_home: Path, tmp_path: Path) -> None:
    data = json.loads(project.read_text(encoding="utf-8"))
    data["unet_mindspore"]["mxpi_imagecrop0"]["props"].update(leftExpandRatio="0.5", downExpandRatio="0.25")
    expanded = project.with_name("expand.pipeline")
    expanded.write_text(json.dumps(data), encoding="utf-8")
    roi = Roi(100, 40, 200, 120)  # 100 x 80: 50 px more on the left, 20 px more below
    with EmbeddedBackend(expanded) as embedded:
        expected = embedded.infer(images[0], roi)
    with MindXBackend(expanded, sdk_home) as backend:
        result = backend.infer(images[0], roi)
    assert result.roi == expected.roi == Roi(50, 40, 200, 140)
    _assert_same(result, expected)


def test_a_stream_without_a_crop_sees_the_whole_image_and_an_roi_is_cropped_before_it(
        project: Path, images: list[bytes], sdk_home: Path, tmp_path: Path) -> None:
    """The double resizes the whole image of a crop-less stream (it ignores roiBoxs, as MindX does): the
    backend says so and refuses an ROI; SegScope's rule crops the ROI before the stream, the same on both."""
    data = json.loads(project.read_text(encoding="utf-8"))
    stream = data["unet_mindspore"]
    del stream["mxpi_imagecrop0"]
    stream["mxpi_imagedecoder0"]["next"] = "mxpi_imageresize0"
    no_crop = project.with_name("no_crop.pipeline")
    no_crop.write_text(json.dumps(data), encoding="utf-8")
    folder = tmp_path / "data" / "a"
    folder.mkdir(parents=True)
    (folder / "image.png").write_bytes(images[1])
    dataset = Dataset.open(tmp_path / "data")
    roi = Roi(30, 20, 250, 190)
    rule = StreamInput.of(no_crop)
    with EmbeddedBackend(no_crop) as embedded:
        whole = embedded.infer(images[1])
        cropped = next(evaluate_dataset(embedded, dataset, roi, stream=rule)).result
    with MindXBackend(no_crop, sdk_home) as backend:
        result = backend.infer(images[1])
        with pytest.raises(BackendError, match="no mxpi_imagecrop, so MindX ignores an ROI"):
            backend.infer(images[1], roi)
        via_rule = next(evaluate_dataset(backend, dataset, roi, stream=rule)).result
    assert result.roi == whole.roi == Roi(0, 0, 320, 240)
    _assert_same(result, whole)
    assert via_rule.roi == cropped.roi == roi and via_rule.roi_note == cropped.roi_note == PRE_CROP_NOTE
    _assert_same(via_rule, cropped)
