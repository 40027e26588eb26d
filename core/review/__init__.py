"""The review queue: every connected component where a prediction and the truth disagree, over a whole dataset,
ranked so likely label errors and costly misses come first (`queue`); the decisions a reviewer takes on an
entry (`decisions`); and the same question between two runs of one dataset (`parity`). Qt-free."""
