"""Permission words and bits of RocketMQ's plain ACL, and the one rule that compares them.

A resource (a topic, or a group written as its retry topic ``%RETRY%<group>``) is granted one
word in ``plain_acl.yml``; a request needs one bit per resource it touches.

=========  ====  =============================================================
word       bits  meaning
=========  ====  =============================================================
DENY       1     nothing, whatever else is asked
(ANY)      2     only ever *needed*, never granted: PUB or SUB suffices
PUB        4     send to a topic
SUB        8     read a topic; for a group: consume, commit offsets, heartbeat
PUB|SUB    12    both (``SUB|PUB`` is the same)
=========  ====  =============================================================

A missing or unknown word is DENY, as in RocketMQ (``Permission.parsePermFromString``).
"""

from __future__ import annotations

__all__ = [
    "ANY",
    "DENY",
    "PERMISSION_WORDS",
    "PUB",
    "SUB",
    "check_permission",
    "is_permission_word",
    "parse_permission",
]

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

PERMISSION_WORDS: dict[str, int] = {
    "DENY": DENY,
    "PUB": PUB,
    "SUB": SUB,
    "PUB|SUB": PUB | SUB,
    "SUB|PUB": PUB | SUB,
}
"""Every word ``plain_acl.yml`` may grant, with its bits."""


def is_permission_word(word: str | None) -> bool:
    """Whether ``word`` (surrounding blanks ignored) is one of :data:`PERMISSION_WORDS`."""
    return word is not None and word.strip() in PERMISSION_WORDS


def parse_permission(word: str | None) -> int:
    """The bits of a granted word; a missing or unknown word is DENY."""
    if word is None:
        return DENY
    return PERMISSION_WORDS.get(word.strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed`` (RocketMQ's ``Permission.checkPermission``)."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)
