"""The one exception type for user mistakes.

Every validation in stabkit raises :class:`ConfigError` with a message that names the field, the bad
value and what is allowed. The CLI prints it as a single line and exits with status 2; library users
catch it like any other exception.
"""


class ConfigError(ValueError):
    """A user-supplied value is invalid; the message is one line: field, value, what is allowed."""


def require(condition: bool, field: str, value, allowed: str) -> None:
    """Raise ``ConfigError`` saying ``field=value`` is invalid unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"invalid {field}={value!r}: {allowed}")


class PluginFailed(ConfigError):
    """A plug-in algorithm (or a Flower strategy) raised or returned something the engine cannot use (one
    line); raised after round 1, the run stops with status ``failed`` and keeps the rounds before."""


class DiskFull(ConfigError):
    """The output's file system is full: one line naming the file and the bytes it needed (the files written
    before stay intact, every write being atomic); a sweep stops at once rather than failing job by job."""
