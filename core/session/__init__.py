"""The viewer's state without Qt: the session, its events, runs, metrics and what it keeps on disk."""
