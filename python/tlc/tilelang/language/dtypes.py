"""TileLang's ``T.dtype`` for scripts on tlc: a dtype name (a ``str``, so a kernel's text
reads it as the name) that converts from torch's, NumPy's and TVM's dtypes and to torch's,
the way TileLang's scripts use it (``T.dtype(q.dtype)``, ``dtype.as_torch()``,
``T.dtype(dtype).bits``). torch is imported only by ``as_torch``."""

from __future__ import annotations

from typing import Any

# Spellings that name the same dtype, to the name kept. TileLang's `float` / `half` are
# float32 / float16; torch's fp8 names end in `fn` (OCP E4M3FN), which the compiler reads.
_CANONICAL = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "int": "int32",
    "long": "int64",
    "short": "int16",
    "float8_e4m3fn": "float8_e4m3fn",
}

_KNOWN = {
    "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e4m3fn",
    "float8_e5m2", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "bool",
}

# The dtype's name → torch's attribute (where they differ).
_TORCH_NAMES = {"float8_e4m3": "float8_e4m3fn"}


def _name_of(value: Any) -> str:
    """The dtype name ``value`` stands for: a name, a torch dtype (``torch.float16``), a
    NumPy dtype or a ``DataType``; ``ValueError`` for one that is not a dtype tlc knows."""
    if isinstance(value, str):
        text = str.__str__(value)
    elif type(value).__module__ == "torch":  # torch.dtype, whose str is "torch.float16"
        text = str(value).removeprefix("torch.")
    elif hasattr(value, "dtype") and isinstance(getattr(value, "dtype"), str):  # DataType
        text = value.dtype
    else:
        text = str(value)  # numpy.dtype('float16'), numpy's scalar types
        if text.startswith("<class 'numpy."):
            text = text[len("<class 'numpy.") : -2]
    text = _CANONICAL.get(text, text)
    if text not in _KNOWN:
        raise ValueError(f"T.dtype: {value!r} is not a dtype tlc knows ({', '.join(sorted(_KNOWN))})")
    return text


class dtype(str):  # noqa: N801  (TileLang's spelling)
    """A dtype name. ``T.dtype(x)`` takes a name or torch's / NumPy's / TVM's dtype;
    ``as_torch()`` gives torch's; ``bits`` its width. Equal to its name as a string
    (``T.float16 == "float16"``)."""

    def __new__(cls, value: Any = "float32") -> "dtype":
        return super().__new__(cls, _name_of(value))

    def as_torch(self) -> Any:
        """torch's dtype of this name (``torch.float16``)."""
        import torch  # type: ignore[import-not-found, unused-ignore]

        name = _TORCH_NAMES.get(str(self), str(self))
        found = getattr(torch, name, None)
        if found is None:
            raise TypeError(f"torch {torch.__version__} has no dtype `{name}`")
        return found

    @property
    def bits(self) -> int:
        """The width of one element in bits."""
        if self == "bool" or self.startswith("float8") or self.endswith("int8"):
            return 8
        return int("".join(c for c in self if c.isdigit()))

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return f"T.dtype({str.__repr__(self)})"
