"""NumPy arrays to and from the ``.npy`` bytes the interpreter reads and writes (the format
of ``tlc run --input``). NumPy is imported only here, only when the interpreter is used.

Storage conventions (as ``tlc run``): float16, float32, float64 and the integer types are
NumPy's own; **bfloat16** is ``uint16`` holding the raw bits; **float8_e4m3 / float8_e5m2**
are ``uint8`` holding the raw OCP bits. ``ml_dtypes`` arrays of those types are accepted
and viewed as their bits."""

from __future__ import annotations

import io
from typing import Any

# ml_dtypes names → the integer type that holds their bits.
_BIT_VIEWS = {"bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def to_npy(array: Any) -> bytes:
    """The ``.npy`` bytes of ``array`` (C order)."""
    import numpy as np

    a = np.asarray(array)
    if a.dtype.name in _BIT_VIEWS:
        a = a.view(_BIT_VIEWS[a.dtype.name])
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def from_npy(data: bytes) -> Any:
    """The array ``.npy`` bytes hold."""
    import numpy as np

    return np.load(io.BytesIO(data), allow_pickle=False)
