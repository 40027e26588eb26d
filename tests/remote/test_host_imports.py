"""The remote worker runs `segscope.core` on Ascend hosts that have only numpy, OpenCV and ONNX Runtime (and the
MindX SDK): every module it can reach at a request must import without the client's other dependencies.

CI also runs the worker on a real bare Python 3.9 (tests/remote/test_cli_remote.py); this check runs everywhere,
in a child interpreter that refuses to import what a bare host lacks.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: What the client installs and a bare host does not have (numpy, cv2 and onnxruntime are there).
CLIENT_ONLY = ("tifffile", "imagecodecs", "paramiko", "scipy", "skimage", "pycocotools", "matplotlib", "PySide6",
               "pyqtgraph", "dask", "distributed", "openvino", "onnx", "openslide", "diskcache", "xxhash")
#: The worker's entry and every backend module a request can open there.
HOST_MODULES = ("segscope.core.remote.worker", "segscope.core.remote.server", "segscope.core.backends.embedded",
                "segscope.core.backends.mindx", "segscope.core.backends.mindx_model",
                "segscope.core.backends.aisbench", "segscope.core.backends.pool")


def test_the_worker_and_its_backends_import_with_only_what_a_bare_host_has() -> None:
    child = textwrap.dedent(f"""
        import importlib, importlib.abc, sys
        class Bare(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {CLIENT_ONLY!r}:
                    raise ImportError("a bare host has no " + name)
                return None
        sys.meta_path.insert(0, Bare())
        for module in {HOST_MODULES!r}:
            importlib.import_module(module)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
