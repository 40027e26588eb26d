"""One registry of backends for the CLI, the remote worker and the viewer's Backend dialog."""

from __future__ import annotations

import pytest

from segscope.core.backends import BACKEND_KINDS, BACKENDS, DEFAULT_PROBABILITIES, open_backend
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import SegScopeError
from segscope.core.remote import server


@pytest.fixture
def no_sdk(monkeypatch, tmp_path):
    monkeypatch.setenv("MX_SDK_HOME", str(tmp_path / "no-sdk"))


def test_kinds_and_the_cli_default():
    assert BACKEND_KINDS == ("auto", "embedded", "mindx", "mindx-model", "ais-bench")
    assert DEFAULT_PROBABILITIES == "float32"
    with pytest.raises(SegScopeError, match=r"unknown backend 'gpu'; choose from auto, embedded, mindx, "
                                            r"mindx-model, ais-bench"):
        open_backend("gpu", __file__)  # type: ignore[arg-type]


def test_mindx_says_why_it_is_unavailable(no_sdk, tmp_path):
    available, why = BACKENDS["mindx"].available()
    assert not available and "MX_SDK_HOME" in why and str(tmp_path / "no-sdk") in why
    assert BACKENDS["embedded"].available() == (True, "")


def test_the_worker_falls_back_to_embedded_without_the_sdk(no_sdk, tiny_model_project):
    backend, note = server.open_backend("auto", tiny_model_project.pipeline, None)
    with backend:
        assert isinstance(backend, EmbeddedBackend)
        assert "auto" not in backend.capabilities.details  # no Ascend API here: embedded, as auto always meant
    # every Ascend API auto looks for, in the order it looks, each with why it is not usable here
    parts = note.split(" | ")
    assert [part.split(" not usable here: ")[0] for part in parts] == ["MindX SDK", "MindX Model API", "ais_bench"]
    assert "MX_SDK_HOME" in parts[0] and "mindx.sdk" in parts[1] and "ais_bench" in parts[2]
    backend, note = server.open_backend("embedded", tiny_model_project.pipeline, 10_000_000)
    backend.close()
    assert note == "embedded backend requested"


def test_locally_auto_is_embedded_without_an_ascend_api(no_sdk, tiny_model_project):
    with open_backend("auto", tiny_model_project.pipeline) as backend:
        assert isinstance(backend, EmbeddedBackend)
