"""The viewer's state without Qt, the application itself: the session (`session.py`) with what answers for each
image, its numbers and its truth, its commands and the jobs they return, what every view derives from it
(`views.py`), its events, and what it keeps on disk."""
