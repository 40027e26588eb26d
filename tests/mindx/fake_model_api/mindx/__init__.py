"""Test double of the `mindx` package the MindX SDK installs (see mindx/sdk/base)."""
