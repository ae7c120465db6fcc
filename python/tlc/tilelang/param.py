"""A compiled kernel's tensor parameters as TileLang's profiler sees them (``KernelParam``:
dtype and shape), read from tlc's launch manifest (docs/manifest.md): shapes are the
manifest's dim expressions, evaluated over the dims known when the kernel was built;
a dim known only at launch stays a name."""

from __future__ import annotations

from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

Dim = Union[int, str]


class KernelParam(NamedTuple):
    """One tensor parameter: its name, tlc dtype name (docs/manifest.md) and shape, each
    entry an int or, for a dim known only at launch, the expression's text."""

    name: str
    dtype: str
    shape: Tuple[Dim, ...]

    def is_unsigned(self) -> bool:
        return self.dtype.startswith("uint")

    def is_float8(self) -> bool:
        return self.dtype.startswith("float8")

    def is_float4(self) -> bool:
        return False  # tlc has no 4-bit dtype

    def is_boolean(self) -> bool:
        return self.dtype == "bool"

    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def torch_dtype(self) -> Any:
        """The torch dtype of the parameter (imports torch)."""
        from .. import _tensors

        return _tensors._torch_dtype(_tensors._import_torch(self.name), self.dtype)


def evaluate(expr: Any, dims: Mapping[str, int]) -> Optional[int]:
    """A manifest dim expression's value over ``dims``; ``None`` when it names a dim
    ``dims`` lacks. Division rounds toward negative infinity (the manifest's rule)."""
    if isinstance(expr, bool):
        raise ValueError(f"not a dim expression: {expr!r}")
    if isinstance(expr, int):
        return expr
    if "int" in expr:
        return int(expr["int"])
    if "dim" in expr:
        value = dims.get(expr["dim"])
        return None if value is None else int(value)
    a, b = (evaluate(x, dims) for x in expr["args"])
    if a is None or b is None:
        return None
    op = expr["op"]
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("floordiv", "floormod", "ceildiv") and b == 0:
        raise ValueError(f"division by zero in a shape ({text(expr)})")
    if op == "floordiv":
        return a // b
    if op == "floormod":
        return a % b
    if op == "ceildiv":
        return -(-a // b)
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    raise ValueError(f"unknown dim operator `{op}`")


def text(expr: Any) -> str:
    """A dim expression as error messages print it (``ceildiv(N, 256)``)."""
    if isinstance(expr, int):
        return str(expr)
    if "int" in expr:
        return str(expr["int"])
    if "dim" in expr:
        return str(expr["dim"])
    return f"{expr['op']}({', '.join(text(a) for a in expr['args'])})"


def params_of(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> List[KernelParam]:
    """The manifest's tensor parameters, shapes evaluated over ``dims``."""
    out = []
    for p in manifest["params"]:
        shape: List[Dim] = []
        for e in p["shape"]:
            v = evaluate(e, dims)
            shape.append(text(e) if v is None else v)
        out.append(KernelParam(str(p["name"]), str(p["dtype"]), tuple(shape)))
    return out


def bind_shapes(params: Sequence[KernelParam], constraints: Mapping[str, int]) -> List[KernelParam]:
    """``params`` with the dims known only at launch given values (TileLang's
    ``dynamic_symbolic_constraints``); ``ValueError`` naming a dim still without one."""
    out = []
    for p in params:
        shape: List[Dim] = []
        for d in p.shape:
            if isinstance(d, int):
                shape.append(d)
            elif d in constraints:
                shape.append(int(constraints[d]))
            else:
                raise ValueError(
                    f"parameter `{p.name}`: dim `{d}` is known only at launch and not in the "
                    f"constraints given ({sorted(constraints)}); pass it in "
                    "dynamic_symbolic_constraints, or give input_tensors"
                )
        out.append(KernelParam(p.name, p.dtype, tuple(shape)))
    return out
