"""The review queue: every connected component where a prediction and the truth disagree, over a whole dataset,
ranked so likely label errors and costly misses come first (`queue`); the decisions a reviewer takes on an
entry (`decisions`); and the same question between two runs of one dataset (`parity`). Qt-free."""

#: The disagreement (pixels) at which an entry's score is half its confidence (`queue`).
AREA_HALF = 32
#: Matched defects whose outlines differ by fewer pixels than this are no entry (`queue`).
MIN_BOUNDARY_AREA = 16
#: Entries a queue keeps by default (the best; every one is counted).
DEFAULT_LIMIT = 1000
#: The parity gate's default: the least foreground Dice between two runs any image may have (`parity`).
MIN_DICE = 0.99
