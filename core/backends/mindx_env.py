"""Finding and importing the MindX SDK's Python layer (`StreamManagerApi`, `MxpiDataType_pb2`).

The SDK ships both modules in `$MX_SDK_HOME/python`; its native libraries must already be on
`LD_LIBRARY_PATH` (and the GStreamer variables set) before Python starts, which is what
`source $MX_SDK_HOME/set_env.sh` does. A running process cannot fix that for itself, so when the import
fails the error says which directory was tried and which command to run first.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..errors import ApiUnavailable

SDK_HOME_VARIABLE = "MX_SDK_HOME"
SETUP_HINT = ("install mxVision and run `source /usr/local/Ascend/ascend-toolkit/set_env.sh && "
              "source $MX_SDK_HOME/set_env.sh` before starting segscope, "
              "or pass the SDK folder (--sdk-home)")


@dataclass(frozen=True)
class MindXSdk:
    """The imported SDK modules and where they came from."""

    api: ModuleType  # StreamManagerApi
    proto: ModuleType  # MxpiDataType_pb2
    home: Path | None  # None when found on PYTHONPATH without a home folder
    version: str


def sdk_version(home: Path | None) -> str:
    """The first line of `$MX_SDK_HOME/version.info`, as the SDK installer writes it, or 'unknown'."""
    if home is None:
        return "unknown"
    try:
        return (home / "version.info").read_text(encoding="utf-8").strip().splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def _home_of(path: Path) -> Path:
    """Accept the SDK folder or its `set_env.sh`."""
    path = Path(path).expanduser()
    return path.parent if path.name == "set_env.sh" else path


def _import_from(home: Path | None) -> MindXSdk:
    if home is not None:
        python_dir = str(home / "python")
        if python_dir not in sys.path:
            sys.path.insert(0, python_dir)
    where = f"{home / 'python'}" if home else "PYTHONPATH"
    try:
        api = importlib.import_module("StreamManagerApi")
        proto = importlib.import_module("MxpiDataType_pb2")
    except ImportError as exc:
        raise ApiUnavailable(
            f"MindX SDK in {where}: cannot import its Python modules ({exc}); its libraries are not loadable "
            f"from this process: run `source {home or '$MX_SDK_HOME'}/set_env.sh` (after the ascend-toolkit "
            f"set_env.sh) in the shell that starts segscope"
        ) from None
    return MindXSdk(api, proto, home, sdk_version(home))


def import_sdk(sdk_home: Path | None = None) -> MindXSdk:
    """Import the SDK from `sdk_home` (folder or set_env.sh), else `$MX_SDK_HOME`, else PYTHONPATH."""
    if "StreamManagerApi" in sys.modules and "MxpiDataType_pb2" in sys.modules:  # one SDK per process
        api = sys.modules["StreamManagerApi"]
        api_file = getattr(api, "__file__", None)
        home = Path(api_file).resolve().parent.parent if api_file else None
        return MindXSdk(api, sys.modules["MxpiDataType_pb2"], home, sdk_version(home))
    found, home, tried = locate(sdk_home)
    if found:
        return _import_from(home)
    raise ApiUnavailable(_not_found(tried))


def _not_found(tried: list[str]) -> str:
    return f"MindX SDK not found: tried {'; '.join(tried)}: {SETUP_HINT}"


def locate(sdk_home: Path | None, module: str = "StreamManagerApi",
           file: str = "StreamManagerApi.py") -> tuple[bool, Path | None, list[str]]:
    """Where the SDK's Python `module` (`file` under `$MX_SDK_HOME/python`) is: (found, the SDK folder or None for
    PYTHONPATH, the places tried), without importing anything."""
    tried: list[str] = []
    candidates: list[tuple[str, Path]] = []
    if sdk_home is not None:
        candidates.append(("--sdk-home", _home_of(sdk_home)))
    env_home = os.environ.get(SDK_HOME_VARIABLE)
    if env_home:
        candidates.append((SDK_HOME_VARIABLE, _home_of(Path(env_home))))
    else:
        tried.append(f"${SDK_HOME_VARIABLE} (not set)")
    for label, home in candidates:
        if (home / "python" / file).is_file():
            return True, home, tried
        tried.append(f"{label}={home} (no python/{file} there)")
    if importlib.util.find_spec(module) is not None:
        return True, None, tried
    tried.append(f"PYTHONPATH (no {module} module)")
    return False, None, tried


def sdk_problem(sdk_home: Path | None = None) -> str:
    """"" when the SDK's Python API can be found (nothing is imported), else why not, as `import_sdk` says."""
    if "StreamManagerApi" in sys.modules:
        return ""
    found, _home, tried = locate(sdk_home)
    return "" if found else _not_found(tried)
