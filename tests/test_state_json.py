"""The ``dedup_state`` text the embedded runner stores (:func:`projections.frames.sink.state_json`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.frames.sink import state_json

ENTRY = st.fixed_dictionaries({
    "f": st.lists(st.tuples(st.text(), st.integers(-(2**62), 2**62), st.none() | st.integers(0, 2**62), st.booleans(),
                            st.lists(st.text()), st.lists(st.text()), st.lists(st.none() | st.integers(0, 2**62))).map(list), max_size=3),
    "g": st.integers(-(2**63), 2**63 - 1),
    "p": st.tuples(st.integers(0, 2**31), st.integers(0, 2**62)).map(list),
})


@given(ENTRY)
def test_reads_back_as_the_entry(entry: dict[str, Any]) -> None:
    """Any dedup entry (odd text included) reads back equal with ``json.loads``, as ``load_dedup_state`` reads it."""
    assert json.loads(state_json(entry)) == entry


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**30])
def test_an_int_beyond_64_bits_is_written_by_json(big: int) -> None:
    """orjson refuses ints beyond 64 bits; the entry is written all the same (a batch never fails on it)."""
    entry = {"f": [], "g": big, "p": [0, 1]}
    assert state_json(entry) == json.dumps(entry)
    assert json.loads(state_json(entry)) == entry


def test_not_json_data_raises() -> None:
    with pytest.raises(TypeError):
        state_json({"g": object()})
