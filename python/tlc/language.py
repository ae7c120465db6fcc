"""Kernels written in Python, as TileLang users write them: ``import tlc.language as T``.

A TileLang kernel is usually made by a Python factory whose arguments (sizes, block shape,
dtypes) the ``@T.prim_func`` body closes over::

    import tlc
    import tlc.language as T

    def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                 C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                ...
        return main

    kernel = tlc.compile(matmul(4096, 2048, 1024, 128, 128, 32), out_idx=-1)

``T.prim_func`` does not run the body: it reads the function's source (``inspect``) and
replaces every name the body reads but does not bind itself with the value it has where
the function is defined (the factory's locals, then the module's globals) when that value
is a literal: an ``int``, ``float``, ``bool``, ``str``, ``None`` or a tuple / list of them.
The result is tlc source text (``PrimFunc.source``, ``str(prim_func)``) that ``tlc.compile``,
``tlc.interpret`` and ``tlc.plan`` take like a ``.tir`` file. A value made by
``T.symbolic("M")`` stays a symbolic dim (declared at the top of the text). Any other value
(an object, a function) is left as the name, which the compiler then reports, located.

Diagnostics name the ``.py`` file and the line of the function's source (the text starts
at the function's own line); the source line they show is the substituted one, so its
columns are those of the text shown.

Everything else ``T.`` spells (``T.Tensor``, ``T.Kernel``, ``T.float16``, ...) exists here
only so that the annotations Python evaluates at definition time do not fail; the meaning
is the compiler's (docs/ir.md).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

__all__ = ["PrimFunc", "prim_func", "symbolic"]


class Symbolic(NamedTuple):
    """A size known only at launch: ``T.symbolic(name, dtype)`` (docs/ir.md, "Symbolic
    dimensions")."""

    name: str
    dtype: str = "int32"


def symbolic(name: str, dtype: str = "int32") -> Symbolic:
    """A symbolic dim, for a factory argument or a module-level name the kernel uses."""
    return Symbolic(name, dtype)


class PrimFunc:
    """A kernel written in Python: the tlc source text ``prim_func`` made of it."""

    def __init__(self, name: str, filename: str, source: str) -> None:
        self.name = name
        """The function's name (its kernel's name)."""
        self.filename = filename
        """The file the function is written in, named in diagnostics."""
        self.source = source
        """The tlc source text: the function with the values it closes over in place."""

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return f"<tlc.language.PrimFunc {self.name} from {self.filename}>"


class LanguageError(TypeError):
    """A function ``T.prim_func`` cannot turn into tlc source."""


def prim_func(fn: Callable[..., Any]) -> PrimFunc:
    """Turns a Python function written in the language into tlc source text, with the
    literal values it closes over substituted (see the module's documentation)."""
    frame = sys._getframe(1)
    scope: Dict[str, Any] = dict(frame.f_globals)
    scope.update(frame.f_locals)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell: assigned after the def
                pass
    filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    try:
        lines, first_line = inspect.getsourcelines(fn)
    except OSError as e:
        raise LanguageError(
            f"T.prim_func: cannot read the source of `{fn.__name__}` ({e}); define it in a "
            f"file, or pass tlc.compile the source text"
        ) from None
    return PrimFunc(fn.__name__, filename, _substitute("".join(lines), first_line, scope))


def _substitute(source: str, first_line: int, scope: Dict[str, Any]) -> str:
    """The function's text with its free names' literal values in place, symbolic dims
    declared above it, placed so that it starts on ``first_line``."""
    text = textwrap.dedent(source)
    tree = ast.parse(text)
    func = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if func is None:
        raise LanguageError("T.prim_func: expected a function definition")
    bound = _bound_names(func)
    edits: List[Tuple[int, int, int, str]] = []  # (line, start col, end col, text)
    symbols: Dict[str, Symbolic] = {}
    for node in ast.walk(func):
        if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
            continue
        if node.id in bound or node.id not in scope or node.end_col_offset is None:
            continue
        value = scope[node.id]
        if isinstance(value, Symbolic):
            symbols[value.name] = value
            replacement: Optional[str] = value.name
        else:
            replacement = _literal(value)
        if replacement is not None and replacement != node.id:
            edits.append((node.lineno, node.col_offset, node.end_col_offset, replacement))
    out = text.splitlines(keepends=True)
    # Right to left within a line, so earlier columns stay valid.
    for line, start, end, new in sorted(edits, reverse=True):
        row = out[line - 1]
        out[line - 1] = row[:start] + new + row[end:]
    header = [_declare(s) for s in symbols.values()]
    # Blank lines up to the function's first line, so diagnostics give the .py's line.
    pad = max(first_line - 1 - len(header), 0)
    return "".join(header) + "\n" * pad + "".join(out)


def _declare(s: Symbolic) -> str:
    """The line declaring a symbolic dim, in the canonical spelling (docs/ir.md)."""
    dtype = "" if s.dtype == "int32" else f', "{s.dtype}"'
    return f'{s.name} = T.symbolic("{s.name}"{dtype})\n'


def _bound_names(func: ast.AST) -> Set[str]:
    """Names the function binds itself (parameters, loop and ``with`` targets, assignments):
    never substituted, even when the factory has a variable of the same name."""
    names: Set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _literal(value: Any) -> Optional[str]:
    """``value`` as source text when it is a literal the language reads, else ``None``."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, float):
        return repr(value) if value >= 0 else f"({value!r})"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, (tuple, list)):
        items = [_literal(v) for v in value]
        if any(i is None for i in items):
            return None
        inner = ", ".join(items)  # type: ignore[arg-type]
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(items) == 1 else f"({inner})"
    return None


# dtypes as the language spells them (`T.float16` in an annotation or an argument).
float16 = "float16"
bfloat16 = "bfloat16"
float32 = "float32"
float64 = "float64"
float8_e4m3 = "float8_e4m3"
float8_e5m2 = "float8_e5m2"
int8 = "int8"
int32 = "int32"
int64 = "int64"
uint8 = "uint8"
uint32 = "uint32"
bool_ = "bool"


class _Anything:
    """What ``T.Tensor((M, K), dtype)`` and the like evaluate to in Python: nothing. They
    matter only as source text; Python evaluates annotations when the function is defined."""

    def __call__(self, *args: Any, **kwargs: Any) -> "_Anything":
        return self

    def __getattr__(self, name: str) -> "_Anything":
        return self

    def __getitem__(self, key: Any) -> "_Anything":
        return self


_ANYTHING = _Anything()


def __getattr__(name: str) -> Any:
    # Module-level fallback (PEP 562): `T.Tensor`, `T.Kernel`, `T.handle`, ... for Python's
    # evaluation of annotations; private names stay errors.
    if name.startswith("_"):
        raise AttributeError(name)
    return _ANYTHING
