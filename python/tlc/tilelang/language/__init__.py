"""``tilelang.language`` for TileLang scripts run on tlc: ``import tlc.tilelang.language as
T`` in place of ``import tilelang.language as T``.

Everything is ``tlc.language``'s (kernels are source text the compiler reads; see its
documentation), plus the Python-level names TileLang's scripts use outside kernel bodies:

- ``T.dtype``: a dtype name that also converts from and to torch's (``T.dtype(q.dtype)``,
  ``T.float16.as_torch()``), as TileLang's does; ``T.float16``, ``T.float32``, ... are
  ``T.dtype`` values, ``T.float`` / ``T.half`` the float32 / float16 ones;
- ``T.cdiv``; ``T.fp8`` (``determine_fp8_type``).

Any other ``T.x`` is a placeholder only when the compiler reads that name, else an
``UnknownName`` error at the line that spells it.
"""

from __future__ import annotations

from typing import Any

from tlc import language as _language
from tlc.language import *  # noqa: F401,F403  (the language itself)
from tlc.language import DataType, LanguageError, UnknownName  # noqa: F401
from tlc.language import ceildiv as cdiv  # noqa: F401  (TileLang's alias)

from .dtypes import dtype  # noqa: F401

# The dtypes as TileLang's scripts spell them, each a `T.dtype` (a str: kernels read the
# name). `float` and `half` are float32 and float16 there, so here too.
float16 = dtype("float16")
bfloat16 = dtype("bfloat16")
float32 = dtype("float32")
float64 = dtype("float64")
float8_e4m3 = dtype("float8_e4m3")
float8_e5m2 = dtype("float8_e5m2")
float8_e4m3fn = dtype("float8_e4m3fn")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
bool_ = dtype("bool")

# Names Python's builtins would shadow at module level come from `__getattr__`.
_ALIASES = {"float": float32, "half": float16, "bool": bool_}


def __getattr__(name: str) -> Any:
    # The dtype names, the placeholders the compiler reads, and located errors for the
    # rest: tlc.language's rule, located at the caller's line (one frame further out).
    if name in _ALIASES:
        return _ALIASES[name]
    if not name.startswith("_") and name in vars(_language):
        return vars(_language)[name]
    return _language.lookup(name, 2)
