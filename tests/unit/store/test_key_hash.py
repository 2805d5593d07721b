"""The vectorised index key hashes agree with the per-key Java hash."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.protocol.tags import java_string_hash
from orbitmq.store._key_hash import VECTOR_MIN_KEYS, index_key_hashes_prefixed, topic_prefix_hash
from orbitmq.store.index_file import index_key_hash, index_key_hashes


def _java_abs(value: int) -> int:
    return 0 if value == -0x80000000 else abs(value)


def test_index_key_hashes_prefixed_matches_java_hash_code() -> None:
    import numpy as np

    rng = random.Random(7)
    keys = ["".join(rng.choice("0123456789ABCDEF") for _ in range(32)) for _ in range(64)]
    hashed = index_key_hashes_prefixed(np.zeros(len(keys), dtype=np.uint64), keys)
    assert hashed.tolist() == [_java_abs(java_string_hash(key)) for key in keys]


def test_index_key_hashes_prefixed_maps_integer_min_value_to_zero() -> None:
    import numpy as np

    # "polygenelubricants".hashCode() == Integer.MIN_VALUE in Java.
    assert java_string_hash("polygenelubricants") == -0x80000000
    keys = ["polygenelubricants"] * VECTOR_MIN_KEYS
    assert (
        index_key_hashes_prefixed(np.zeros(len(keys), dtype=np.uint64), keys).tolist()
        == [0] * VECTOR_MIN_KEYS
    )


def test_index_key_hashes_match_index_key_hash_for_uniform_batch() -> None:
    keys = [f"7F0000010000{slot:020X}" for slot in range(256)]
    assert index_key_hashes("BenchTopic", keys) == [index_key_hash("BenchTopic", key) for key in keys]


def test_index_key_hashes_match_index_key_hash_for_mixed_lengths_and_unicode() -> None:
    rng = random.Random(11)
    alphabet = "abcXYZ019-_"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.choice((3, 5, 8)))) for _ in range(60)]
    keys += ["caf\u00e9-key", "\U0001f600emoji", "k"] * 4
    rng.shuffle(keys)
    assert index_key_hashes("Topic\u00e9", keys) == [index_key_hash("Topic\u00e9", key) for key in keys]


@settings(max_examples=60, deadline=None)
@given(
    keyed=st.lists(
        st.tuples(
            st.sampled_from(["T", "BenchTopic", "Topic\u00e9"]),
            st.one_of(
                st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=32),
                st.text(min_size=1, max_size=12),
            ),
        ),
        max_size=40,
    )
)
def test_index_key_hashes_prefixed_matches_one_key_at_a_time(keyed: list[tuple[str, str]]) -> None:
    """Keys of several topics and lengths (ASCII or not) hashed in one call, as one by one."""
    import numpy as np

    prefixes = np.array([topic_prefix_hash(topic) for topic, _ in keyed], dtype=np.uint64)
    hashed = index_key_hashes_prefixed(prefixes, [key for _, key in keyed])
    assert hashed.tolist() == [index_key_hash(topic, key) for topic, key in keyed]
