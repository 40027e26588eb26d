"""The remote backend against a real sshd on loopback, running the real worker with the embedded backend."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import BackendError, CancelledError
from segscope.core.remote import protocol
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.client import RequestTimeout, WorkerLost
from segscope.core.remote.connection import SshOptions
from segscope.core.roi import Roi

from .sshd import Sshd, processes_mentioning, wait_until

pytestmark = pytest.mark.ssh


def slide_png(width: int = 320, height: int = 240, seed: int = 0) -> bytes:
    """A small light slide with a dark blob, PNG-encoded."""
    rng = np.random.default_rng(seed)
    image = rng.integers(150, 230, (height, width, 3), dtype=np.uint8)
    cv2.circle(image, (width // 2, height // 2), min(width, height) // 5, (30, 40, 50), -1)
    ok, buf = cv2.imencode(".png", image)
    assert ok
    return buf.tobytes()


@pytest.fixture
def open_remote(sshd: Sshd, ssh_options: SshOptions, worker_options: dict):
    """`open_remote(pipeline, **overrides)`: a RemoteBackend closed at the end of the test."""
    opened: list[RemoteBackend] = []

    def factory(pipeline: Path, **overrides: object) -> RemoteBackend:
        backend = RemoteBackend(pipeline, sshd.target, ssh_options, **{**worker_options, **overrides})
        opened.append(backend)
        return backend

    yield factory
    for backend in opened:
        backend.close()


def wait_busy(backend: RemoteBackend) -> None:
    """Return once the request has started to travel to the worker (the slow model then takes ~0.5 s)."""
    assert wait_until(lambda: backend.session is not None and backend.session.bytes_sent > 0, interval=0.001)


def worker_pid(backend: RemoteBackend) -> int:
    pid = backend.hello["pid"]
    assert processes_mentioning(f"{pid}") or Path(f"/proc/{pid}").exists()
    return pid


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("dtype", protocol.PROBABILITY_DTYPES)
def test_results_match_the_local_backend(tiny_model_project, open_remote, dtype: str) -> None:
    image, roi = slide_png(), Roi(40, 30, 300, 220)
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        expected = local.infer(image, roi)
    backend = open_remote(tiny_model_project.pipeline, probabilities=dtype)
    assert backend.capabilities.name == "remote"
    assert backend.capabilities.input_size == (960, 960)
    assert backend.capabilities.class_names == ("background", "defect")
    assert backend.hello["backend"] == "embedded" and backend.hello["versions"]["numpy"] == np.__version__
    for _ in range(2):  # the same worker serves every request
        result = backend.infer(image, roi)
        np.testing.assert_array_equal(result.argmax, expected.argmax)
        assert result.probabilities.shape == expected.probabilities.shape == (960, 960, 2)
        error = np.abs(result.probabilities - expected.probabilities).max()
        assert error <= protocol.quantisation_step(dtype) / 2 + 1e-6
        if dtype == "float32":
            np.testing.assert_array_equal(result.probabilities, expected.probabilities)
        assert result.roi == expected.roi and result.image_size == expected.image_size == (320, 240)
        stages = {"upload", "decode", "crop", "resize", "preprocess", "infer", "postprocess", "download"}
        assert stages <= set(result.timings)
        assert result.backend == "remote:embedded"


def test_an_image_path_is_read_here_or_on_the_host(tiny_model_project, open_remote, tmp_path: Path) -> None:
    path = tmp_path / "slide.png"
    path.write_bytes(slide_png(seed=3))
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        expected = local.infer(path)
    uploaded = open_remote(tiny_model_project.pipeline).infer(path)
    on_host = open_remote(tiny_model_project.pipeline, host_dataset=str(tmp_path)).infer(path)
    np.testing.assert_array_equal(uploaded.argmax, expected.argmax)
    np.testing.assert_array_equal(on_host.argmax, expected.argmax)
    assert on_host.timings["upload"] < uploaded.timings["upload"] + 0.05


def test_a_bad_image_fails_that_request_only(tiny_model_project, open_remote, tmp_path: Path) -> None:
    backend = open_remote(tiny_model_project.pipeline, host_dataset=str(tmp_path))
    with pytest.raises(BackendError, match=r"127\.0\.0\.1.*not a readable image"):
        backend.infer(b"definitely not a png")
    with pytest.raises(BackendError, match="missing.png: file not found"):
        backend.infer(tmp_path / "missing.png")
    pid = backend.hello["pid"]
    assert backend.infer(slide_png()).argmax.shape == (960, 960)
    assert backend.hello["pid"] == pid  # still the same worker


def test_a_pipeline_the_host_lacks_is_named(tiny_model_project, open_remote) -> None:
    with pytest.raises(BackendError, match=r"cannot open the pipeline: .*/nowhere/x.pipeline: pipeline file not found"):
        open_remote(tiny_model_project.pipeline, host_pipeline="/nowhere/x.pipeline")


def test_nothing_is_left_running_after_close(tiny_model_project, sshd: Sshd, open_remote) -> None:
    backend = open_remote(tiny_model_project.pipeline)
    backend.infer(slide_png())
    pid = worker_pid(backend)
    assert alive(pid)
    backend.close()
    backend.close()  # twice is fine
    assert wait_until(lambda: not alive(pid), timeout=5)
    assert processes_mentioning(str(sshd.cache_dir)) == []


def run_in_thread(call) -> tuple[threading.Thread, list[BaseException]]:
    """Start `call()` in a thread; what it raises lands in the returned list."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_close_while_busy_cancels_and_leaves_nothing(slow_project: Path, sshd: Sshd, open_remote) -> None:
    backend = open_remote(slow_project, timeout=30)
    pid = backend.hello["pid"]
    thread, outcome = run_in_thread(lambda: backend.infer(slide_png()))
    wait_busy(backend)
    started = time.monotonic()
    backend.close()
    thread.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], CancelledError), outcome
    assert time.monotonic() - started < 10
    assert wait_until(lambda: not alive(pid), timeout=5)
    assert processes_mentioning(str(sshd.cache_dir)) == []


def test_worker_killed_mid_request_then_a_new_one_serves(slow_project: Path, open_remote) -> None:
    backend = open_remote(slow_project)
    pid = backend.hello["pid"]
    thread, outcome = run_in_thread(lambda: backend.infer(slide_png()))
    wait_busy(backend)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], WorkerLost), outcome
    assert "worker stopped (killed or crashed" in str(outcome[0])
    result = backend.infer(slide_png())
    assert result.argmax.shape == (960, 960)
    assert backend.hello["pid"] != pid


def test_a_dropped_connection_reconnects(tiny_model_project, sshd: Sshd, open_remote) -> None:
    backend = open_remote(tiny_model_project.pipeline)
    first = backend.infer(slide_png())
    pid = backend.hello["pid"]
    for session in sshd.session_pids():
        os.kill(session, signal.SIGKILL)
    assert wait_until(lambda: not backend.connection.alive, timeout=5)
    again = backend.infer(slide_png())
    np.testing.assert_array_equal(again.argmax, first.argmax)
    assert backend.hello["pid"] != pid
    assert wait_until(lambda: not alive(pid), timeout=15)  # the old worker saw its stdin close


def test_a_host_that_stops_answering_is_given_up_and_the_next_request_works(slow_project: Path,
                                                                             open_remote) -> None:
    backend = open_remote(slow_project, timeout=2.0)
    serving = backend.hello["pid"]
    supervisor = parent_of(serving)
    thread, outcome = run_in_thread(lambda: backend.infer(slide_png()))
    wait_busy(backend)
    started = time.monotonic()
    for pid in (supervisor, serving):  # the host freezes: not a byte more, not even a heartbeat
        os.kill(pid, signal.SIGSTOP)
    thread.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], RequestTimeout), outcome
    assert "the host stopped answering: nothing from its worker for 2 s; the worker was stopped" in str(outcome[0])
    assert time.monotonic() - started < 20
    assert wait_until(lambda: not alive(serving) and not alive(supervisor), timeout=20)  # stopped while frozen
    assert backend.infer(slide_png()).argmax.shape == (960, 960)
    assert backend.hello["pid"] != serving


def test_a_connect_timeout_is_reported(sshd: Sshd, ssh_options: SshOptions, worker_options: dict,
                                       tiny_model_project) -> None:
    import socket

    with socket.socket() as silent:  # accepts TCP connections but never speaks SSH
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        ssh_options.connect_timeout = 0.5
        started = time.monotonic()
        with pytest.raises(BackendError, match=r"no SSH answer within 0.5 s"):
            RemoteBackend(tiny_model_project.pipeline, f"{sshd.user}@127.0.0.1:{port}", ssh_options, **worker_options)
        assert time.monotonic() - started < 5


def test_a_request_can_be_cancelled(slow_project: Path, open_remote) -> None:
    backend = open_remote(slow_project)
    with EmbeddedBackend(slow_project) as local:
        expected = local.infer(slide_png(seed=5))
    thread, outcome = run_in_thread(lambda: backend.infer(slide_png()))
    wait_busy(backend)
    started = time.monotonic()
    backend.cancel()
    thread.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], CancelledError), outcome
    assert time.monotonic() - started < 0.5  # the caller is released at once
    result = backend.infer(slide_png(seed=5))  # the cancelled request's late answer is not taken for this one
    np.testing.assert_array_equal(result.argmax, expected.argmax)


def test_nothing_is_uploaded_twice(tiny_model_project, sshd: Sshd, open_remote) -> None:
    open_remote(tiny_model_project.pipeline).close()
    files = {p: p.stat().st_mtime_ns for p in sshd.cache_dir.rglob("*") if p.is_file()}
    assert any(p.name == "worker.py" for p in files) and any(p.name == "tiny.onnx" for p in files)
    assert not any(p.name.endswith(".part") for p in files)
    open_remote(tiny_model_project.pipeline).close()
    assert {p: p.stat().st_mtime_ns for p in sshd.cache_dir.rglob("*") if p.is_file()} == files


def test_a_wrong_remote_python_is_named(tiny_model_project, open_remote) -> None:
    with pytest.raises(BackendError, match=r"cannot check the cache files with /nowhere/python3 on the host "
                                            r"\(exit status 127: .*/nowhere/python3"):
        open_remote(tiny_model_project.pipeline, python="/nowhere/python3")


def test_auto_falls_back_to_the_embedded_backend_and_says_why(tiny_model_project, open_remote) -> None:
    backend = open_remote(tiny_model_project.pipeline, worker_backend="auto")
    assert backend.hello["backend"] == "embedded"
    assert "MindX SDK not found" in backend.capabilities.details["fallback reason"]


def fake_sdk_home(folder: Path) -> Path:
    """An `$MX_SDK_HOME` holding the MindX test double of tests/mindx (it runs the embedded engine)."""
    import importlib.util

    mindx_tests = Path(__file__).resolve().parents[1] / "mindx"
    spec = importlib.util.spec_from_file_location("segscope_tests_remote_protogen", mindx_tests / "protogen.py")
    protogen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(protogen)
    python_dir = folder / "mxVision" / "python"
    python_dir.mkdir(parents=True)
    shutil.copy(mindx_tests / "fake_sdk" / "StreamManagerApi.py", python_dir)
    protogen.write_pb2("MxpiDataType.proto", python_dir)
    protogen.write_pb2("MxpiDumpData.proto", python_dir)
    return python_dir.parent


def test_the_worker_picks_mindx_from_the_sourced_set_env(tiny_model_project, open_remote, tmp_path: Path) -> None:
    home = fake_sdk_home(tmp_path)
    om = tiny_model_project.root / "models" / "unet_hw960_bs1.om"
    om.write_bytes(b"not a real .om: the double runs the card's ONNX export")  # uploaded with the project
    set_env = tmp_path / "set env.sh"  # a space: the remote command must quote it
    set_env.write_text(f"echo 'set_env.sh says hello on stdout'\nexport MX_SDK_HOME='{home}'\n")
    image, roi = slide_png(seed=9), Roi(10, 10, 300, 230)
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        expected = local.infer(image, roi)
    backend = open_remote(tiny_model_project.pipeline, worker_backend="auto", set_env=str(set_env))
    assert backend.hello["backend"] == "mindx" and backend.hello["fallback_reason"] == ""
    result = backend.infer(image, roi)
    assert result.backend == "remote:mindx"
    np.testing.assert_array_equal(result.argmax, expected.argmax)
    assert np.abs(result.probabilities - expected.probabilities).max() <= protocol.quantisation_step("uint8") / 2 + 1e-6


def test_a_model_card_runs_its_om_on_the_host_through_the_model_api(open_remote, tmp_path: Path) -> None:
    """--remote with --model: the card, its .om and .onnx are uploaded; the host's auto finds the Model API."""
    import importlib.util

    mindx_tests = Path(__file__).resolve().parents[1] / "mindx"
    spec = importlib.util.spec_from_file_location("segscope_tests_remote_mindx", mindx_tests / "conftest.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    card = helpers.make_om_project(tmp_path / "project")
    home = tmp_path / "mxVision"
    (home / "python").mkdir(parents=True)
    (home / "python" / "mindx").symlink_to(mindx_tests / "fake_model_api" / "mindx", target_is_directory=True)
    set_env = tmp_path / "set_env.sh"
    set_env.write_text(f"export MX_SDK_HOME='{home}'\n")
    image, roi = slide_png(seed=4), Roi(20, 10, 300, 230)
    with EmbeddedBackend(card) as local:
        expected = local.infer(image, roi)
    backend = open_remote(card, worker_backend="auto", set_env=str(set_env), probabilities="float32")
    assert backend.hello["backend"] == "mindx-model" and backend.hello["details"]["auto"] == "picked mindx-model"
    result = backend.infer(image, roi)
    assert result.backend == "remote:mindx-model" and result.roi == expected.roi
    np.testing.assert_array_equal(result.argmax, expected.argmax)
    np.testing.assert_allclose(result.probabilities, expected.probabilities, rtol=0, atol=1e-6)


def test_infer_many_sends_the_next_request_while_the_host_works(tiny_model_project, open_remote,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEGSCOPE_NO_CACHE", "1")  # every image's bytes go with its request (test_input_cache: by key)
    images = [slide_png(seed=seed) for seed in range(3)]
    backend = open_remote(tiny_model_project.pipeline, probabilities="float32", crop_upload=False)
    results = backend.infer_many([InferenceRequest(image) for image in images])
    first = next(results)
    session = backend.session
    assert session is not None
    # when the first answer is back, the second image has already gone: the worker queued it
    assert session.bytes_sent > len(images[0]) + len(images[1])
    rest = list(results)
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        for image, result in zip(images, [first, *rest]):
            expected = local.infer(image)
            np.testing.assert_array_equal(result.probabilities, expected.probabilities)
            np.testing.assert_array_equal(result.argmax, expected.argmax)


def test_a_batch_closed_early_drops_its_queued_request_and_the_next_answer_is_right(tiny_model_project,
                                                                                   open_remote) -> None:
    first, queued, later = (slide_png(seed=seed) for seed in (1, 2, 3))
    backend = open_remote(tiny_model_project.pipeline, probabilities="float32", crop_upload=False)
    results = backend.infer_many([InferenceRequest(first), InferenceRequest(queued), InferenceRequest(first)])
    next(results)
    results.close()  # `queued` was sent already; the worker drops it or answers it late
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        expected = local.infer(later)
    result = backend.infer(later)  # must be `later`'s answer, not the late one of `queued`
    np.testing.assert_array_equal(result.probabilities, expected.probabilities)
