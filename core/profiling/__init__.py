"""Model insight: operator profiles (ONNX Runtime here, msprof / ais_bench imports), roofline, drift triage."""
