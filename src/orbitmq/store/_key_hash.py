"""Index key hashes: one key at a time, and a whole batch at once as a matrix-vector product.

The index stores ``abs(hashCode("<topic>#<key>"))`` per key (see ``index_file.py``). For ``n``
ASCII keys of one length ``L`` the UTF-16 code units are the bytes, so the hashes of the keys
alone are the product of the ``n x L`` byte matrix with the vector ``[31**(L-1), ..., 31**0]``
in uint32 arithmetic, which wraps mod 2**32 exactly as Java's int does. The topic prefix then
enters as ``h(prefix) * 31**L + h(key)``, each key with its own topic's prefix hash, so the keys
of many messages of many topics go through one product per key length. Client message keys
(UNIQ_KEY) are 32 hex digits, so nearly all keys share one length; keys that are not ASCII, or too
few of one length, are hashed one at a time.

numpy is imported by :func:`load_numpy` when an index opens, not with the module: most processes
that import the store (tools, clients) never put a batch of keys and should not pay numpy's import
time, and a broker should not pay it on its first put either.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import mul
from typing import TYPE_CHECKING

from orbitmq.protocol.tags import (
    descending_powers_31,
    java_string_hash_concat,
    java_string_hash_unsigned,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_MASK_32 = 0xFFFFFFFF
_TWO_32 = 0x100000000
# Below this many keys of one length, the per-key loop is cheaper than the array set-up.
VECTOR_MIN_KEYS = 8

_powers: dict[int, npt.NDArray[np.uint32]] = {}
_POWERS_CACHE_MAX = 256


def load_numpy() -> None:
    """Import numpy now (the index calls this when it opens)."""
    import numpy  # noqa: F401


def _descending_powers(length: int) -> npt.NDArray[np.uint32]:
    import numpy as np

    powers = _powers.get(length)
    if powers is None:
        values = [pow(31, exponent, _TWO_32) for exponent in range(length - 1, -1, -1)]
        powers = np.array(values, dtype=np.uint32)
        if len(_powers) >= _POWERS_CACHE_MAX:
            _powers.clear()
        _powers[length] = powers
    return powers


# Unsigned hashCode of "<topic>#" per topic: every key of a topic shares that prefix.
_topic_prefix_hashes: dict[str, int] = {}
_TOPIC_PREFIX_CACHE_MAX = 4096


def _topic_prefix_hash(topic: str) -> int:
    prefix_hash = _topic_prefix_hashes.get(topic)
    if prefix_hash is None:
        if len(_topic_prefix_hashes) >= _TOPIC_PREFIX_CACHE_MAX:
            _topic_prefix_hashes.clear()
        prefix_hash = _topic_prefix_hashes[topic] = java_string_hash_unsigned(f"{topic}#")
    return prefix_hash


def index_key_hash(topic: str, key: str) -> int:
    """The key hash RocketMQ stores for ``key`` of ``topic``: abs(hashCode("<topic>#<key>"))."""
    prefix_hash = _topic_prefix_hashes.get(topic)
    if prefix_hash is None:
        prefix_hash = _topic_prefix_hash(topic)
    if key.isascii():
        # The common case inlined: ASCII code units are the bytes (see java_string_hash_concat).
        powers, shift = descending_powers_31(len(key))
        value = (prefix_hash * shift + sum(map(mul, key.encode("ascii"), powers))) & 0xFFFFFFFF
        key_hash = value - 0x100000000 if value & 0x80000000 else value
    else:
        key_hash = java_string_hash_concat(prefix_hash, key)
    # Java's Math.abs(Integer.MIN_VALUE) stays negative; RocketMQ then uses 0.
    return 0 if key_hash == -0x80000000 else abs(key_hash)


def topic_prefix_hash(topic: str) -> int:
    """The unsigned hashCode of ``"<topic>#"``, the prefix every index key of ``topic`` shares."""
    prefix_hash = _topic_prefix_hashes.get(topic)
    return _topic_prefix_hash(topic) if prefix_hash is None else prefix_hash


def index_key_hashes_prefixed(
    prefix_hashes: npt.NDArray[np.uint64], keys: Sequence[str]
) -> npt.NDArray[np.int64]:
    """The index hash of each key, key ``i`` belonging to the topic whose prefix hash is ``prefix_hashes[i]``.

    The keys of many messages (of any topics) go through one matrix product per key length, so the
    cost per key is a few array operations rather than a Python loop over its characters. Keys that
    are not ASCII, or too few of one length, are hashed one at a time.
    """
    import numpy as np

    count = len(keys)
    result = np.empty(count, dtype=np.int64)
    if count == 0:
        return result
    first_length = len(keys[0])
    joined = "".join(keys)
    if len(joined) == first_length * count and first_length and count >= VECTOR_MIN_KEYS and joined.isascii():
        # The common case: every key the same length (UNIQ_KEYs are 32 hex digits).
        result[:] = _prefixed_equal_length(
            np.asarray(prefix_hashes, dtype=np.uint64), joined, count, first_length
        )
        return result
    groups: dict[int, list[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(len(key), []).append(position)
    for length, positions in groups.items():
        members = [keys[position] for position in positions]
        member_joined = "".join(members)
        if length and len(members) >= VECTOR_MIN_KEYS and member_joined.isascii():
            result[positions] = _prefixed_equal_length(
                prefix_hashes[positions], member_joined, len(members), length
            )
        else:
            for position in positions:
                result[position] = _one_prefixed(int(prefix_hashes[position]), keys[position])
    return result


def _prefixed_equal_length(
    prefix_hashes: npt.NDArray[np.uint64], joined: str, count: int, length: int
) -> npt.NDArray[np.int64]:
    """Index hashes of ``count`` ASCII keys of ``length`` characters each, concatenated in ``joined``."""
    import numpy as np

    units = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).reshape(count, length)
    hashes = units @ _descending_powers(length)  # uint32: wraps mod 2**32 like Java's int
    # prefix * 31**length mod 2**32: the uint64 product wraps mod 2**64, a multiple of 2**32.
    shifted = (prefix_hashes * np.uint64(pow(31, length, _TWO_32))) & np.uint64(_MASK_32)
    hashes += shifted.astype(np.uint32)
    absolute = np.abs(hashes.view(np.int32))
    absolute &= 0x7FFFFFFF  # Math.abs(MIN_VALUE) stays negative; RocketMQ then stores 0
    return absolute.astype(np.int64)


def _one_prefixed(prefix_hash_unsigned: int, key: str) -> int:
    key_hash = java_string_hash_concat(prefix_hash_unsigned, key)
    return 0 if key_hash == -0x80000000 else abs(key_hash)


def index_key_hashes(topic: str, keys: Sequence[str]) -> list[int]:
    """:func:`index_key_hash` of each of ``keys`` of ``topic``, in order (vectorised for batches)."""
    if len(keys) < VECTOR_MIN_KEYS:
        return [index_key_hash(topic, key) for key in keys]
    import numpy as np

    prefixes = np.full(len(keys), _topic_prefix_hash(topic), dtype=np.uint64)
    hashes: list[int] = index_key_hashes_prefixed(prefixes, keys).tolist()
    return hashes
