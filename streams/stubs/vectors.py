"""The exact definitions of a unit vector and of the similarity the matcher compares.

Definitions (so that a plain-Python loop reproduces the matcher bit for bit):

* **norm** of a float32 vector ``v``: ``sqrt(t)`` where ``t`` is the left-to-right float64 sum
  ``t = 0.0; for x in v: t += float(x) * float(x)`` (each square of a float32 is exact in
  float64; the sum is rounded after every addition, in index order; :func:`math.sqrt` is
  correctly rounded).
* **unit vector**: ``u_i = float32(float(v_i) / norm)``, float64 division then rounding to the
  nearest float32 (ties to even).
* **similarity** of two vectors: the left-to-right float64 sum, in index order, of the
  products ``float(a_i) * float(b_i)`` of the components of their float32 unit vectors (each
  product is exact in float64). It lies in about ``[-1 - 1e-6, 1 + 1e-6]`` (unit vectors are
  rounded to float32); its float64 rounding error is below ``dim * 2⁻⁵³``.
* a stub is kept when ``similarity >= threshold`` in float64, so a similarity exactly at the
  threshold is kept.

numpy's ``cumsum`` (``add.accumulate``) adds strictly in index order, so ``cumsum(p)[-1]`` is
that sequential sum. The matcher screens with a float32 BLAS product first and computes the
defined value only for rows whose float32 similarity is within :func:`screen_margin` of the
threshold or above it.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def unit(vec: F32) -> tuple[F32, F64]:
    """Normalise a non-zero finite float32 vector of shape ``(dim,)`` per the module definition.

    Returns:
        ``(u32, u64)``: the unit vector as float32 and the same values widened to float64,
        both of shape ``(dim,)``.

    Raises:
        ZeroDivisionError: for a zero vector (callers reject those first with ``zero_vector``).
    """
    v64 = vec.astype(np.float64)
    norm = math.sqrt(float(np.cumsum(v64 * v64)[-1]))
    if norm == 0.0:
        raise ZeroDivisionError("cannot normalise a zero vector")
    u32 = (v64 / norm).astype(np.float32)
    return u32, u32.astype(np.float64)


def exact_similarities(rows: F32 | F64, u64: F64) -> list[float]:
    """The defined similarity of each row of ``rows`` (shape ``(k, dim)``, unit float32 values, as float32 or widened to float64) with ``u64``.

    ``u64`` has shape ``(dim,)`` and holds float32 values widened to float64. Returns ``k``
    Python floats: per row, the sequential float64 sum of the exact componentwise products.
    """
    products = rows.astype(np.float64, copy=False) * u64
    return np.cumsum(products, axis=1)[:, -1].tolist()  # type: ignore[no-any-return]


def screen_margin(dim: int) -> float:
    """How far below the threshold a float32 BLAS similarity may lie while the defined one reaches it.

    A float32 dot product of ``dim`` terms in any summation order (with or without FMA) is off
    from the exact dot product by at most ``γ_dim · Σ|a_i b_i| ≤ γ_dim · ‖a‖‖b‖`` with
    ``γ_dim ≈ dim · 2⁻²⁴``, plus one final rounding; the defined (sequential float64) value is
    within ``dim · 2⁻⁵³`` of the exact one; unit vectors have norms ``≤ 1 + dim · 2⁻²⁴``. About
    twice the sum of these bounds, plus a tiny absolute term for flushed subnormals, is returned
    (``dim`` in dimensions, result unitless; about 3.7e-4 for 3072 dims).
    """
    return (dim + 2) * 2.0**-23 * 1.01 + 1e-30
