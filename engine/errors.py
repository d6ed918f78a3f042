"""Errors a user can cause; their messages are shown as-is in the UI and CLI (no torch import here)."""


class ConfigError(ValueError):
    """An out-of-range or unknown decoder parameter."""
