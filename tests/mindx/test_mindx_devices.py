"""`--devices` on MindX: one stream per chip in one process, against the double's several devices."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from segscope.core import cli
from segscope.core.backends import mindx_sdk
from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.mindx import MindXBackend
from segscope.core.errors import BackendError
from segscope.core.roi import Roi

from .conftest import SDK_MODULES

ROIS = [Roi(10, 20, 300, 200), None, Roi(200, 100, 400, 300), Roi(0, 0, 64, 240)]


@pytest.fixture
def two_chips(sdk_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_ASCEND_DEVICES", "2")
    return sdk_home


@pytest.mark.parametrize("transport", ["protobuf", "json", "unique_id"])
def test_each_chip_gets_a_stream_and_results_stay_in_order(project, images, two_chips, transport):
    with EmbeddedBackend(project) as embedded:
        expected = [embedded.infer(image, roi) for image, roi in zip(images, ROIS)]
    with MindXBackend(project, two_chips, transport=transport, devices=(0, 1)) as backend:
        results = list(backend.infer_many(InferenceRequest(i, r) for i, r in zip(images, ROIS)))
        assert backend.capabilities.device.startswith("Ascend devices 0,1")
        import StreamManagerApi as sdk

        (config,), = [args for method, args in sdk.CALLS if method == "CreateMultipleStreams"]
        streams = json.loads(config)
        assert {name: s["stream_config"]["deviceId"] for name, s in streams.items()} == \
            {"unet_mindspore_device0": "0", "unet_mindspore_device1": "1"}
        assert sorted(device for device, _ in sdk.DEVICE_RUNS) == [0, 0, 1, 1]  # dealt to both, each image once
        usage = {row["name"]: row["images"] for row in backend.usage.as_dicts()}
        assert usage == {"device 0": 2, "device 1": 2}
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got.argmax, want.argmax)
        np.testing.assert_allclose(got.probabilities, want.probabilities, rtol=0, atol=1e-6)
        assert (got.roi, got.image_size) == (want.roi, want.image_size)


def test_a_chip_the_host_lacks_fails_to_open(project, two_chips):
    with pytest.raises(BackendError, match="CreateMultipleStreams"):
        MindXBackend(project, two_chips, devices=(0, 2))


def test_cli_devices_on_mindx_match_one_chip(project, two_chips, tmp_path, write_png, capsys, monkeypatch):
    rng = np.random.default_rng(5)
    for n in range(3):
        write_png(tmp_path / "data" / str(n) / "image.png", rng.integers(0, 255, (60, 80, 3), dtype=np.uint8))
    outputs = []
    for extra in ([], ["--devices", "0,1"]):
        out = io.StringIO()
        code = cli.main(["eval", "--dataset", str(tmp_path / "data"), "--pipeline", str(project), "--backend",
                         "mindx", "--sdk-home", str(two_chips), *extra], out)
        assert code == 0, capsys.readouterr().err
        outputs.append(out.getvalue())
        monkeypatch.setattr(mindx_sdk, "_PROCESS", mindx_sdk._ProcessState(atexit_registered=True))  # a fresh process
        for name in SDK_MODULES:
            sys.modules.pop(name, None)
    assert outputs[0] == outputs[1] and outputs[0].count("image: ") == 3
    err = capsys.readouterr().err
    assert "segscope: device 0: " in err and "segscope: device 1: " in err
