"""Finding the MindX SDK: explicit folder, its set_env.sh, $MX_SDK_HOME, and clear errors when missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from segscope.core.backends.mindx import MindXBackend
from segscope.core.backends.mindx_env import import_sdk
from segscope.core.errors import BackendError


def test_not_found_says_what_was_tried_and_what_to_do(sdk_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    with pytest.raises(BackendError) as error:
        MindXBackend(project)
    message = str(error.value)
    assert "MindX SDK not found" in message and "$MX_SDK_HOME (not set)" in message
    assert "source $MX_SDK_HOME/set_env.sh" in message and "\n" not in message
    empty = tmp_path / "Ascend" / "mxVision"
    empty.mkdir(parents=True)
    monkeypatch.setenv("MX_SDK_HOME", str(empty))
    with pytest.raises(BackendError, match=f"MX_SDK_HOME={empty} \\(no python/StreamManagerApi.py there\\)"):
        import_sdk()
    with pytest.raises(BackendError, match=f"--sdk-home={tmp_path} \\(no python/StreamManagerApi.py there\\)"):
        import_sdk(tmp_path)


@pytest.mark.parametrize("how", ["argument", "set_env.sh", "MX_SDK_HOME"])
def test_found_from_each_source(sdk_home: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    (sdk_home / "set_env.sh").write_text("export MX_SDK_HOME=...\n", encoding="utf-8")
    if how == "MX_SDK_HOME":
        monkeypatch.setenv("MX_SDK_HOME", str(sdk_home))
        sdk = import_sdk()
    else:
        sdk = import_sdk(sdk_home / "set_env.sh" if how == "set_env.sh" else sdk_home)
    assert (sdk.home, sdk.version) == (sdk_home, "test-double 1.0")
    assert sdk.api.__name__ == "StreamManagerApi" and hasattr(sdk.proto, "MxpiTensorPackageList")


def test_unloadable_native_library_points_at_set_env(sdk_home: Path) -> None:
    module = sdk_home / "python" / "StreamManagerApi.py"
    module.write_text("raise ImportError('libmxbase.so: cannot open shared object file')\n", encoding="utf-8")
    with pytest.raises(BackendError) as error:
        import_sdk(sdk_home)
    message = str(error.value)
    assert str(sdk_home / "python") in message and "libmxbase.so" in message
    assert f"source {sdk_home}/set_env.sh" in message
