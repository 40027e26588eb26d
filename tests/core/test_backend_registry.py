"""One registry of backends for the CLI, the remote worker and the viewer's Backend dialog; one spec of what to
open and where, built from the CLI's options."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from segscope.core.backend_spec import HERE, BackendSpec, Cluster, Devices, RemoteHost, SshLogin, open_backend
from segscope.core.backend_spec import spec_from_args as spec_of
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.registry import BACKEND_KINDS, BACKENDS, BackendKind, open_kind
from segscope.core.cli import build_parser
from segscope.core.errors import SegScopeError
from segscope.core.remote.protocol import DEFAULT_PROBABILITIES
from segscope.core.stream.pipeline import DEFAULT_PIPELINE


@pytest.fixture
def no_sdk(monkeypatch, tmp_path):
    monkeypatch.setenv("MX_SDK_HOME", str(tmp_path / "no-sdk"))


def test_kinds_and_the_cli_default():
    assert BACKEND_KINDS == ("auto", "embedded", "mindx", "mindx-model", "ais-bench")
    assert DEFAULT_PROBABILITIES == "float32"
    with pytest.raises(SegScopeError, match=r"unknown backend 'gpu'; choose from auto, embedded, mindx, "
                                            r"mindx-model, ais-bench"):
        open_backend(BackendSpec("gpu", __file__))  # type: ignore[arg-type]


def test_mindx_says_why_it_is_unavailable(no_sdk, tmp_path):
    available, why = BACKENDS["mindx"].available()
    assert not available and "MX_SDK_HOME" in why and str(tmp_path / "no-sdk") in why
    assert BACKENDS["embedded"].available() == (True, "")


def test_the_worker_falls_back_to_embedded_without_the_sdk(no_sdk, tiny_model_project):
    backend, note = open_kind("auto", tiny_model_project.pipeline, None)
    with backend:
        assert isinstance(backend, EmbeddedBackend)
        assert "auto" not in backend.capabilities.details  # no Ascend API here: embedded, as auto always meant
    # every Ascend API auto looks for, in the order it looks, each with why it is not usable here
    parts = note.split(" | ")
    assert [part.split(" not usable here: ")[0] for part in parts] == ["MindX SDK", "MindX Model API", "ais_bench"]
    assert "MX_SDK_HOME" in parts[0] and "mindx.sdk" in parts[1] and "ais_bench" in parts[2]
    backend, note = open_kind("embedded", tiny_model_project.pipeline, 10_000_000)
    backend.close()
    assert note == "embedded backend requested"


def test_locally_auto_is_embedded_without_an_ascend_api(no_sdk, tiny_model_project):
    with open_backend(BackendSpec("auto", tiny_model_project.pipeline)) as backend:
        assert isinstance(backend, EmbeddedBackend)


def _spec(*argv: str) -> BackendSpec:
    return spec_of(build_parser().parse_args(["eval", "--dataset", "d", *argv]))


def test_the_cli_options_make_one_spec():
    assert _spec() == BackendSpec("auto", DEFAULT_PIPELINE)
    assert _spec("--backend", "embedded", "--devices", "0,2", "--max-pixels", "5") == \
        BackendSpec("embedded", DEFAULT_PIPELINE, Devices((0, 2)), max_pixels=5)
    assert _spec("--remote", "hw@h:2222", "--remote-python", "/usr/bin/python3.9", "--set-env", "/sdk/set_env.sh",
                 "--remote-cache", "/tmp/c", "--probabilities", "uint8", "--accept-new-host-key").where == \
        RemoteHost("hw@h:2222", SshLogin(True, "/usr/bin/python3.9", "/sdk/set_env.sh"), "/tmp/c", "uint8")
    assert _spec("--remote", "h").where == RemoteHost("h", SshLogin(), None, DEFAULT_PROBABILITIES)
    assert _spec("--cluster", "tcp://s:8786", "--ship-images", "--task-resources", "NPU=1").where == \
        Cluster("tcp://s:8786", SshLogin(), True, {"NPU": 1.0})
    assert _spec("--sdk-home", "/sdk").sdk_home is not None and _spec().where is HERE


@pytest.mark.parametrize(("argv", "wanted"), [
    (("--cluster", "tcp://s:8786", "--remote", "h"), "--cluster cannot be combined with --remote"),
    (("--devices", "0", "--remote", "h"), "--devices with --remote: not built yet"),
    (("--devices", "0,0"), "--devices: device 0 is listed twice"),
    (("--cluster", "tcp://s:8786", "--task-resources", "NPU"), "--task-resources: expected NAME=AMOUNT")])
def test_options_that_cannot_run_together_are_one_line(argv, wanted):
    with pytest.raises(SegScopeError, match=wanted):
        _spec(*argv)


def test_the_remote_worker_may_open_any_registered_kind(tiny_model_project):
    from segscope.core.remote.backend import RemoteBackend

    with pytest.raises(SegScopeError, match=r"worker backend: unknown backend 'gpu'; choose from auto, embedded"):
        RemoteBackend(tiny_model_project.pipeline, "127.0.0.1:1", worker_backend="gpu")
    with pytest.raises(SegScopeError) as raised:  # taken: it goes on to connect (nothing listens on port 1)
        RemoteBackend(tiny_model_project.pipeline, "127.0.0.1:1", worker_backend="mindx-model")
    assert "127.0.0.1" in str(raised.value) and "worker backend" not in str(raised.value)


def test_a_backend_is_its_module_and_one_registration_line(monkeypatch, tiny_model_project):
    pipeline = tiny_model_project.pipeline
    opened: list[tuple] = []

    def open_here(source, max_pixels, sdk_home):
        opened.append((source, max_pixels, sdk_home))
        return EmbeddedBackend(source, max_pixels=max_pixels)

    module = types.ModuleType("segscope.core.backends.echo")
    module.open_here = open_here  # type: ignore[attr-defined]
    module.unavailable = lambda sdk_home: "" if sdk_home else "no echo API here"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(BACKENDS, "echo", BackendKind("echo", "Echo on this machine", "echo"))
    assert BACKENDS["echo"].available() == (False, "no echo API here")
    assert BACKENDS["echo"].available(Path("/sdk")) == (True, "")
    with open_backend(BackendSpec("echo", pipeline, max_pixels=1234, sdk_home=Path("/sdk"))) as backend:
        assert isinstance(backend, EmbeddedBackend)
    assert opened == [(pipeline, 1234, Path("/sdk"))]
    with pytest.raises(SegScopeError, match="--devices: --backend echo runs one stream; drop --devices"):
        open_backend(BackendSpec("echo", pipeline, Devices((0, 1)), sdk_home=Path("/sdk")))
    for devices in (None, Devices((0, 1))):  # asked for by name without its API: that is said first
        with pytest.raises(SegScopeError, match="^no echo API here$"):
            open_backend(BackendSpec("echo", pipeline, devices))
    assert len(opened) == 1


def test_an_ascend_backend_without_its_api_says_so_before_the_missing_om(monkeypatch, tiny_model_project,
                                                                      small_dataset, capsys):
    """The tests' project has no .om (as on a laptop): each Ascend backend asked for by name names its missing API
    first, as `auto` would, not the .om."""
    from helpers import run_cli

    monkeypatch.delenv("MX_SDK_HOME", raising=False)
    for kind, said in (("mindx", "MindX SDK not found"), ("mindx-model", "MindX Model API (mindx.sdk) not found"),
                       ("ais-bench", "ais_bench not found")):
        if not BACKENDS[kind].problem():  # (a machine with the API: nothing to show)
            continue
        code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                          "--backend", kind)
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"segscope: error: {said}") and ".om" not in err, err
