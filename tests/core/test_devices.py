"""`--devices`: one stream per device, images to the first free one, results in input order."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.base import Backend, Capabilities, InferenceRequest, InferenceResult
from segscope.core.backends.pool import DevicePool, parse_devices
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi

from helpers import run_cli


@pytest.mark.parametrize("text", ["", "0,,1", "a", "-1", "0,1.5", "1,0,1"])
def test_bad_device_lists_are_one_line_errors(text, small_dataset, capsys):
    with pytest.raises(SegScopeError, match="--devices"):
        parse_devices(text)
    code, _ = run_cli("eval", "--dataset", small_dataset, f"--devices={text}")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("segscope: error: --devices") and err.count("\n") == 1


def test_device_lists_parse_in_order():
    assert parse_devices("3, 0,1") == (3, 0, 1)


class _Device(Backend):
    """A stand-in device: returns a result whose box records the image number; optionally waits for `go`."""

    def __init__(self, name: str, go: threading.Event | None = None):
        self.name, self.go, self.ran = name, go, []
        self.capabilities = Capabilities("fake", name, (4, 4), ("bg", "fg"))

    def infer(self, image, roi=None):  # type: ignore[no-untyped-def]
        if self.go is not None:
            assert self.go.wait(30)
        number = int(Path(image).name)
        self.ran.append(number)
        probabilities = np.full((4, 4, 2), 0.5, np.float32)
        return InferenceResult(probabilities, np.zeros((4, 4), np.int32), Roi(number, 0, number + 1, 1),
                               (8, 8), {}, self.name)

    def close(self) -> None:
        pass


def test_a_busy_device_is_skipped_and_results_stay_in_input_order():
    go = threading.Event()
    slow, fast = _Device("slow", go), _Device("fast")
    original = fast.infer

    def fast_infer(image, roi=None):  # type: ignore[no-untyped-def]
        result = original(image, roi)
        if len(fast.ran) == 2:  # the fast device took both images queued behind the stuck one
            go.set()
        return result

    fast.infer = fast_infer  # type: ignore[method-assign]
    pool = DevicePool([slow, fast], ["slow", "fast"])
    requests = [InferenceRequest(Path(str(n))) for n in range(6)]
    boxes = [result.roi.x0 for result in pool.infer_many(requests)]
    assert boxes == list(range(6))
    assert slow.ran[0] == 0 and fast.ran[:2] == [1, 2]
    assert sorted(slow.ran + fast.ran) == list(range(6))
    usage = {row["name"]: row["images"] for row in pool.usage.as_dicts()}
    assert usage == {"slow": len(slow.ran), "fast": len(fast.ran)}


def test_two_embedded_sessions_give_the_single_session_output(tiny_model_project, small_dataset, capsys):
    pipeline = tiny_model_project.pipeline
    code, single = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--json")
    assert code == 0, capsys.readouterr().err
    code, pooled = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--json", "--devices", "0,1")
    assert code == 0, capsys.readouterr().err
    one, two = json.loads(single), json.loads(pooled)

    def untimed(doc: dict) -> list[dict]:
        return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in doc["images"]]

    assert untimed(one) == untimed(two) and one["summary"] == two["summary"]
    assert "devices" not in one
    assert [d["name"] for d in two["devices"]] == ["session 0", "session 1"]
    assert sum(d["images"] for d in two["devices"]) == 4  # the dataset's four images, each once

    code, lines = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--devices", "0,1")
    _, single_lines = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline)
    assert code == 0 and lines == single_lines
    err = capsys.readouterr().err
    assert "segscope: session 0: " in err and "images/s" in err and "% busy" in err


def test_devices_with_remote_say_what_to_do(small_dataset, capsys):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--remote", "nobody@127.0.0.1", "--devices", "0,1")
    err = capsys.readouterr().err
    assert code == 2 and "--devices with --remote" in err and err.count("\n") == 1
