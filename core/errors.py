"""Errors a user can act on.

Every `SegScopeError` message is one line that names the file or field and says what is wrong; the CLI
prints it as is (exit code 2) and the GUI shows it in its message area. Anything else escaping is a bug.
"""


class SegScopeError(Exception):
    """Bad input or configuration: the message names the file/field and what to do."""


class BackendError(SegScopeError):
    """An inference backend failed (SDK return code, remote worker, model run)."""


class CancelledError(SegScopeError):
    """The user cancelled a running request."""


class ApiUnavailable(BackendError):
    """An Ascend API (the MindX SDK, its Model API, ais_bench) is not installed or not importable here."""
