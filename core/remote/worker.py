"""SegScope's worker bootstrap, the script the client uploads to the Ascend host and starts over SSH.

It lies in a versioned cache folder beside `segscope-core.zip` (SegScope's headless core, imported from
the zip) and needs only python3, NumPy, OpenCV and the MindX SDK or ONNX Runtime. It keeps to old Python
syntax so an old interpreter gets a clear message rather than a SyntaxError.
Usage: python3 worker.py --pipeline PATH [--backend auto|mindx|embedded] [--max-pixels N]
"""

import os
import platform
import sys

MIN_PYTHON = (3, 9)
BUNDLE = "segscope-core.zip"


def main():
    if sys.version_info < MIN_PYTHON:
        sys.stderr.write("segscope worker: {} is Python {}; SegScope needs >= {}: pass --remote-python the "
                         "SDK's interpreter (e.g. /usr/local/python3.9.5/bin/python3)\n".format(
                             sys.executable, platform.python_version(), ".".join(map(str, MIN_PYTHON))))
        return 2
    bundle = os.path.join(os.path.dirname(os.path.abspath(__file__)), BUNDLE)
    if os.path.isfile(bundle):
        sys.path.insert(0, bundle)
    # Frames own the real stdout; anything else that prints (the SDK logs to stdout) goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from segscope.core.remote.server import serve

    return serve(sys.argv[1:], sys.stdin.fileno(), out)


if __name__ == "__main__":
    sys.exit(main())
