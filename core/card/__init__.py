"""Model cards: the value, reading and checking it against its ONNX graph, building one for a bare model."""
