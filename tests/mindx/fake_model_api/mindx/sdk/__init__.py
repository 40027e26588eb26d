"""Test double of `mindx.sdk` (Vision SDK mxBase/mindx/sdk/__init__.py): the `base` module and its names."""

from . import base  # noqa: F401 - `from mindx.sdk import base`
from .base import *  # noqa: F401,F403 - as the SDK's package does
