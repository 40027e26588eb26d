"""Test double of the `ais_bench` package (msit benchmark): see ais_bench/infer/interface.py."""
