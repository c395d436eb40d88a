"""Retrying registry calls that failed for a passing reason, with bounded exponential back-off.

A registry under load answers ``429 Too Many Requests`` or a ``5xx``, drops the connection, or does
not answer within the call's time bound (:data:`bake.run.engine.REGISTRY_TIMEOUT_S`): the same
request a little later usually succeeds, so ``publish`` and ``promote`` try it again, at most
:data:`ATTEMPTS` times in all, waiting ``BASE_S * 2**n`` seconds between tries (at most
:data:`CAP_S`), or what the registry's ``Retry-After`` says when its answer shows one (at most
:data:`RETRY_AFTER_CAP_S`). A refusal (``401``, ``403``, ``404``, a malformed reference, a
manifest the registry does not accept) is the same on every try, so it is not retried.

The failure is told from the one line :mod:`bake.run.engine` raises (buildx's last error line, or
the time-bound line): buildx does not pass the HTTP status on otherwise.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, TypeVar

from bake.errors import BakePlanError
from bake.patterns import LazyPattern

ATTEMPTS = 4
"""Tries of one registry call in all (the first and three retries)."""

BASE_S = 1.0
"""The first wait, in seconds; each next wait is twice the one before."""

CAP_S = 30.0
"""The longest wait between two tries, in seconds, when the registry names none."""

RETRY_AFTER_CAP_S = 60.0
"""The longest ``Retry-After`` honoured, in seconds (a registry asking for more gets this)."""

_PASSING = (
    LazyPattern(r"\b429\b"),  # 429 Too Many Requests / toomanyrequests
    LazyPattern(r"toomanyrequests", re.IGNORECASE),
    LazyPattern(r"(?:status(?: code)?:?|HTTP/\d(?:\.\d)?|response(?: code)?:?)\s*5\d\d\b", re.IGNORECASE),
    LazyPattern(r"\b5\d\d (?:Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|Gateway Time-?out)",
                re.IGNORECASE),
    LazyPattern(r"connection reset|broken pipe|unexpected EOF|\bEOF\b", re.IGNORECASE),
    LazyPattern(r"i/o timeout|TLS handshake timeout|context deadline exceeded|Client\.Timeout", re.IGNORECASE),
    LazyPattern(r"did not answer within"),  # bake.run.engine's own time bound
)
_REFUSED = LazyPattern(r"\b(?:401|403|404)\b|unauthorized|denied|forbidden|invalid reference|not found|"
                       r"manifest (?:invalid|unknown)|name unknown", re.IGNORECASE)
_RETRY_AFTER = LazyPattern(r"retry[- ]after:?\s*(\d{1,6})\b", re.IGNORECASE)

T = TypeVar("T")


def passing(message: str) -> bool:
    """Whether a registry call's error line says the failure may pass (429, 5xx, a reset
    connection, a time-out) rather than a refusal that would come again (401, 403, 404, a
    malformed reference: never retried, even when the line also mentions a time-out)."""
    if _REFUSED.search(message):
        return False
    return any(p.search(message) for p in _PASSING)


def retry_after(message: str) -> Optional[float]:
    """The seconds a ``Retry-After`` in the error line asks for, at most :data:`RETRY_AFTER_CAP_S`;
    ``None`` when the line shows none."""
    found = _RETRY_AFTER.search(message)
    return min(float(found.group(1)), RETRY_AFTER_CAP_S) if found else None


@dataclass
class Retries:
    """What was retried in one command: ``count`` retries in all, ``waited_s`` seconds waited,
    and one line per retry (``what: reason; try 2 of 4 in 1 s``) for the report."""

    count: int = 0
    waited_s: float = 0.0
    lines: List[str] = field(default_factory=list)


def retrying(call: Callable[[], T], what: str, retries: Retries, attempts: int = ATTEMPTS,
             sleep: Callable[[float], None] = time.sleep, note: Callable[[str], None] = lambda line: None) -> T:
    """``call()``, tried again while it raises a :class:`bake.errors.BakePlanError` whose line is
    :func:`passing`, at most ``attempts`` tries in all.

    :param what: names the call in the retry lines (``imagetools create REF``).
    :param retries: counts the retries (shared by every call of one command).
    :param note: gets each retry line as it happens (the CLI prints it).
    :returns: what ``call`` returned.
    :raises BakePlanError: the last try's error (its line says how many tries were made when more
        than one), or at once a refusal.
    """
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except BakePlanError as err:
            message = str(err)
            if not passing(message) or attempt == attempts:
                if attempt > 1:
                    err.args = (f"{message} (after {attempt} tries)",) + err.args[1:]
                raise
            wait = retry_after(message)
            wait = min(BASE_S * 2 ** (attempt - 1), CAP_S) if wait is None else wait
            line = f"{what}: {message}; try {attempt + 1} of {attempts} in {wait:g} s"
            retries.count += 1
            retries.waited_s += wait
            retries.lines.append(line)
            note(line)
            sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises
