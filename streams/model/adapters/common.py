"""Helpers shared by the runtime adapters."""

from __future__ import annotations

from typing import Any

from streams.model.deadletter import Reason, RejectedInput


def req_str(payload: dict[str, Any], key: str) -> str:
    """``payload[key]`` as a non-empty string.

    Raises:
        RejectedInput: ``missing_field`` when absent or empty, ``wrong_shape`` when not a string.
    """
    v = payload.get(key)
    if v is None or v == "":
        raise RejectedInput(Reason.MISSING_FIELD, f"required field {key!r} is missing")
    if not isinstance(v, str):
        raise RejectedInput(Reason.WRONG_SHAPE, f"field {key!r} must be a string, got {type(v).__name__}")
    return v


def opt_str(payload: dict[str, Any], key: str) -> str | None:
    """``payload[key]`` when it is a string, else ``None``.

    Raises:
        RejectedInput: ``wrong_shape`` when present but neither a string nor null.
    """
    v = payload.get(key)
    if v is None or isinstance(v, str):
        return v
    raise RejectedInput(Reason.WRONG_SHAPE, f"field {key!r} must be a string, got {type(v).__name__}")
