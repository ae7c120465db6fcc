"""``tilelang.language`` for TileLang scripts run on tlc: ``import tlc.tilelang.language as
T`` in place of ``import tilelang.language as T``.

Everything is ``tlc.language``'s (kernels are source text the compiler reads; see its
documentation), plus the Python-level names TileLang's scripts use outside kernel bodies:
``T.dtype`` (a parameter annotation, ``dtype: T.dtype = T.float16``) and ``T.cdiv``. Any
other ``T.x`` is a placeholder only when the compiler reads that name, else an
``UnknownName`` error at the line that spells it.
"""

from __future__ import annotations

from typing import Any

from tlc import language as _language
from tlc.language import *  # noqa: F401,F403  (the language itself)
from tlc.language import DataType, LanguageError, UnknownName  # noqa: F401
from tlc.language import ceildiv as cdiv  # noqa: F401  (TileLang's alias)


def __getattr__(name: str) -> Any:
    # The dtype names, the placeholders the compiler reads, and located errors for the
    # rest: tlc.language's rule, located at the caller's line (one frame further out).
    if not name.startswith("_") and name in vars(_language):
        return vars(_language)[name]
    return _language.lookup(name, 2)
