"""The server's log stays short whatever a client sends: one line for an event stream a client opened twice.

A second ``/queue/data`` stream on one session ends, once the first has taken the session's events, with
gradio's 404 raised inside a response already started; uvicorn then logs "Exception in ASGI application" with a
~2.8 KB traceback, for a client's misuse, not a bug. ``install()`` turns exactly that case into one line; any other
exception keeps its traceback.
"""

from __future__ import annotations

import logging

from fastapi.exceptions import HTTPException

STARTED = "Caught handled exception, but response already started."


class ClosedStream(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RuntimeError) and str(exc) == STARTED and isinstance(exc.__cause__, HTTPException):
            record.msg, record.args = "event stream refused: %s (a session's stream opened twice)", (exc.__cause__,)
            record.exc_info, record.exc_text = None, None
        return True


def install() -> None:
    """Once per process (uvicorn logs ASGI exceptions on ``uvicorn.error``)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, ClosedStream) for f in logger.filters):
        logger.addFilter(ClosedStream())
