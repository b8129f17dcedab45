"""Detail codes for rejected stub input.

Every stub error is a :class:`~streams.model.deadletter.RejectedInput` with reason
``Reason.WRONG_SHAPE`` (the shared :class:`~streams.model.deadletter.Reason` enum is not extended);
the precise cause is the :class:`StubError` code at the start of the detail text, followed by
``": "`` and an explanation, e.g. ``"dimension_mismatch: embedding has 768 dims, expected 3072"``.
"""

from __future__ import annotations

from enum import StrEnum

from streams.model.deadletter import Reason, RejectedInput


class StubError(StrEnum):
    """Why stub input was rejected (the first token of ``RejectedInput.detail``)."""

    BAD_BASE64 = "bad_base64"  # embedding_b64 is not valid base64
    BAD_LENGTH = "bad_length"  # decoded byte length is not a multiple of 4 (float32)
    DIMENSION_MISMATCH = "dimension_mismatch"  # byte length != dim*4, or dim differs from the index's
    NON_FINITE = "non_finite"  # the vector holds NaN or ±infinity
    ZERO_VECTOR = "zero_vector"  # every component is zero: no direction, cosine undefined
    BAD_SHAPE = "bad_shape"  # a vector to encode is not one-dimensional
    MODEL_MISMATCH = "model_mismatch"  # embedding model differs from the index's for that scope
    UNKNOWN_STUB = "unknown_stub"  # a refresh for a stub the index does not hold
    BAD_ROW = "bad_row"  # a stubs.db row that cannot become a StubUpserted
    BAD_REFRESH_SOURCE = "bad_refresh_source"  # refresh_source is neither NULL nor a known type


_CODES = frozenset(e.value for e in StubError)


def reject(code: StubError, message: str) -> RejectedInput:
    """Build (not raise) ``RejectedInput(Reason.WRONG_SHAPE, f"{code}: {message}")``."""
    return RejectedInput(Reason.WRONG_SHAPE, f"{code}: {message}")


def code_of(err: RejectedInput) -> str:
    """The :class:`StubError` code at the start of ``err.detail`` (``""`` when there is none)."""
    head, sep, _ = err.detail.partition(": ")
    return head if sep and head in _CODES else ""
