"""Rate-limited logging of what peers do wrong, so bad input can never flood the log.

A server logs each bad request (a refused field, an undecodable frame, a connection closed
for breaking a limit), but a hostile or broken client can send thousands a second. A
:class:`LogLimiter` writes at most one line per *kind* per interval; the first line after a
quiet spell carries the count of the lines it held back, so nothing goes unreported::

    limiter.warning("bad-field:SendMessageRequestHeader.flag", "refused %s: %s", peer, remark)

Kinds are short fixed strings (a header and field name, an exception type); a peer's values
belong in the message, never in the kind, so the table of kinds stays small.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["LogLimiter"]

_KINDS_MAX = 1024


class LogLimiter:
    """At most one line per kind every ``interval_s`` seconds, with a count of those suppressed.

    Args:
        logger: where the lines go.
        interval_s: the shortest time between two lines of one kind.
        clock: seconds of a monotonic clock (tests inject a fake one).
    """

    def __init__(
        self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        # kind -> [time of the last line written, lines suppressed since]
        self._kinds: dict[str, list[float]] = {}

    def log(self, level: int, kind: str, message: str, *args: object, exc_info: bool = False) -> bool:
        """Write the line unless one of this kind was written within the interval; True if written."""
        now = self._clock()
        entry = self._kinds.get(kind)
        if entry is not None and now - entry[0] < self._interval_s:
            entry[1] += 1
            return False
        suppressed = int(entry[1]) if entry is not None else 0
        if entry is None and len(self._kinds) >= _KINDS_MAX:
            self._kinds.clear()
        self._kinds[kind] = [now, 0]
        if suppressed:
            message += " (and %d more like it since the last such line)"
            args = (*args, suppressed)
        self._logger.log(level, message, *args, exc_info=exc_info)
        return True

    def warning(self, kind: str, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, kind, message, *args)

    def error(self, kind: str, message: str, *args: object, exc_info: bool = False) -> bool:
        return self.log(logging.ERROR, kind, message, *args, exc_info=exc_info)
