"""The errors a person can cause, in one place (no torch import here). Their messages are shown as-is: one line in
the page, ``error: ...`` and exit status 2 on the CLI. Front ends catch ``UserError`` only, so a bug in the engine
(a cache invariant, a trace format) stays a bug and is never turned into a friendly message."""


class UserError(Exception):
    """Bad input from a person: the message says what to change; the server keeps serving."""


class ConfigError(UserError):
    """An unknown decoder, an unknown or out-of-range parameter, a combination that does not apply."""


class ModelLoadError(UserError):
    """A model path, id or file that cannot be loaded; the message says why."""


class BudgetExceeded(UserError):
    """A request ran past its time budget; what finished is kept (``partial``)."""

    def __init__(self, message: str, partial=None):
        super().__init__(message)
        self.partial = partial


class CapacityError(UserError):
    """A decode asked its fixed-capacity K/V row for more positions than it holds: that decode ends with the
    message; the others in its round go on."""


def listed(items, shown: int = 5, width: int = 40) -> str:
    """A few items for a message, each cut to ``width`` characters, then "and N more": a message stays one short
    line however many unknown names a client sent."""
    items = [str(i)[:width] for i in items]
    head = ", ".join(items[:shown])
    return head if len(items) <= shown else f"{head} and {len(items) - shown} more"
