"""Editing the ground truth without Qt: the mask document, its tools, undo, saving and crash recovery."""
