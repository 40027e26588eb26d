"""The dock widgets' contents (dataset table, metrics, defects, reliability, review, timing, profile): each
draws what it is given; the shell binds them to the session."""
