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

Python-level decisions are made here as TileLang's Python makes them: ``if`` statements and
``a if c else b`` whose condition is decided after substitution keep only their taken arm;
arithmetic on symbolic dims (``seq_kv - seq_q``, ``T.ceildiv(M, 64)``) gives an ``Expr``
substituted as its text. ``eager(fn, **values)`` takes TileLang's eager ``@tilelang.jit``
form (``T.const`` / ``T.empty`` / ``return``).

Everything else ``T.`` spells (``T.Tensor``, ``T.Kernel``, ``T.float16``, ...) exists here
only so that the annotations Python evaluates at definition time do not fail, and only for
the names the compiler reads (or declines with its own explanation, ``T.print``); the
meaning is the compiler's (docs/ir.md). Any other ``T.x`` is an ``UnknownName`` error at
the line that spells it.

Python's ``min`` / ``max`` / ``abs`` / ``int`` / ``float`` / ``round`` in a kernel body are
evaluated when their arguments are literals after substitution (``min``/``max`` of
run-time values become ``T.min``/``T.max``); a name the kernel binds that a symbolic dim
also has is renamed (``k`` → ``k_1``).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import (
    Any, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Set, Tuple,
)

from ._inline import inline_helpers

__all__ = [
    "DataType", "ceildiv", "dynamic", "Expr", "LanguageError", "Macro", "PrimFunc", "eager",
    "macro", "prim_func", "symbolic", "tunable", "tune_constraint", "UnknownName",
]


class _Arith:
    """Python arithmetic on symbolic dims (``seq_kv - seq_q``, ``(H + 2 * P - 3) // S + 1``
    in a factory) builds the expression's text, which is substituted like a literal."""

    def _text(self) -> str:
        raise NotImplementedError

    def _symbols(self) -> Tuple["Symbolic", ...]:
        raise NotImplementedError

    def _op(self, op: str, other: Any, reflected: bool = False) -> "Expr":
        if isinstance(other, (_Arith, Symbolic)):
            text, syms = other._text(), other._symbols()
        elif isinstance(other, int) and not isinstance(other, bool):
            text, syms = (str(other) if other >= 0 else f"({other})"), ()
        else:
            return NotImplemented  # type: ignore[return-value]
        left, right = (text, self._text()) if reflected else (self._text(), text)
        return Expr(f"({left} {op} {right})", self._symbols() + syms)

    def __add__(self, o: Any) -> "Expr":
        return self._op("+", o)

    def __radd__(self, o: Any) -> "Expr":
        return self._op("+", o, True)

    def __sub__(self, o: Any) -> "Expr":
        return self._op("-", o)

    def __rsub__(self, o: Any) -> "Expr":
        return self._op("-", o, True)

    def __mul__(self, o: Any) -> "Expr":
        return self._op("*", o)

    def __rmul__(self, o: Any) -> "Expr":
        return self._op("*", o, True)

    def __floordiv__(self, o: Any) -> "Expr":
        return self._op("//", o)

    def __rfloordiv__(self, o: Any) -> "Expr":
        return self._op("//", o, True)

    def __mod__(self, o: Any) -> "Expr":
        return self._op("%", o)

    def __rmod__(self, o: Any) -> "Expr":
        return self._op("%", o, True)

    def __neg__(self) -> "Expr":
        return Expr(f"(-{self._text()})", self._symbols())

    def _undecided(self, o: Any) -> bool:
        # `assert seq_kv - seq_q >= 0` cannot be decided before launch (TileLang's TVM
        # expressions refuse it too).
        raise LanguageError(
            f"`{self._text()}` depends on a symbolic dim, so Python cannot compare it; "
            f"give the factory a number for it"
        )

    __lt__ = __le__ = __gt__ = __ge__ = _undecided


def _expr_eq(self: "Expr", o: Any) -> bool:
    return self._undecided(o)


class Symbolic(NamedTuple):
    """A size known only at launch: ``T.symbolic(name, dtype)`` (docs/ir.md, "Symbolic
    dimensions")."""

    name: str
    dtype: str = "int32"


class Expr(_Arith):
    """An integer expression over symbolic dims, made by Python arithmetic on them."""

    def __init__(self, text: str, symbols: Tuple[Symbolic, ...]) -> None:
        self.text = text
        self.symbols = symbols

    def _text(self) -> str:
        return self.text

    def _symbols(self) -> Tuple[Symbolic, ...]:
        return self.symbols

    def __repr__(self) -> str:
        return f"<tlc.language.Expr {self.text}>"

    # `N % blk_m == 0` is as undecided as `<`: never a silent False.
    __eq__ = __ne__ = _expr_eq  # type: ignore[assignment]
    __hash__ = object.__hash__


# Symbolic is a NamedTuple (a tuple: `+` would concatenate); give it _Arith's operators.
for _name in ("_op", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "_undecided",
              "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(Symbolic, _name, getattr(_Arith, _name))
Symbolic._text = lambda self: self.name  # type: ignore[attr-defined]
Symbolic._symbols = lambda self: (self,)  # type: ignore[attr-defined]


def symbolic(name: str, dtype: str = "int32") -> Symbolic:
    """A symbolic dim, for a factory argument or a module-level name the kernel uses."""
    return Symbolic(name, dtype)


def dynamic(name: str, dtype: str = "int32") -> Any:
    """TileLang's ``T.dynamic``: ``T.dynamic("M")`` is ``T.symbolic("M")``, and
    ``M, N = T.dynamic("M, N")`` one symbolic dim per comma-separated name."""
    names = [n.strip() for n in name.split(",")]
    if not all(n.isidentifier() for n in names):
        raise LanguageError(f"T.dynamic: {name!r} is not a name or comma-separated names")
    if len(names) == 1:
        return Symbolic(names[0], dtype)
    return tuple(Symbolic(n, dtype) for n in names)


class _Name:
    """A name the kernel's text keeps (a tunable): Python code cannot compute with it."""

    def _refuse(self, *_: Any) -> Any:
        raise LanguageError(
            f"{self!r} is a tunable: it has a value only when the kernel is compiled, so it may "
            "be used inside the kernel, not in the factory's Python arithmetic or tests"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __truediv__ = __rtruediv__ = _refuse
    __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __iter__ = __index__ = _refuse
    __int__ = __pow__ = __rpow__ = __lshift__ = __rshift__ = __and__ = __or__ = _refuse
    # `if block_M == 128:` in a factory would be a silent False: refused too.
    __eq__ = __ne__ = _refuse  # type: ignore[assignment]
    __hash__ = object.__hash__


class Tunable(_Name):
    """One name of a kernel's tuning space: ``block_M = T.tunable([64, 128], default=128)``
    at module level or in a factory (docs/ir.md, "Tuning space"). The kernel keeps the name
    and its text declares it, so ``tlc.plan`` / ``tlc.tune`` see the space and ``compile``
    binds the cached, planned or given value."""

    def __init__(self, candidates: Tuple[int, ...], default: int) -> None:
        self.candidates = candidates
        self.default = default

    def __repr__(self) -> str:
        return f"T.tunable({list(self.candidates)}, default={self.default})"


def _ints(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def tunable(candidates: Sequence[int], default: Optional[int] = None) -> Tunable:
    """A tunable integer: its candidates, and the value used when nothing else chooses (the
    first candidate by default). One name per tunable here; names tuned together are
    ``tlc.autotune``'s configs (or the ``.tir`` language's tuple form)."""
    values = tuple(candidates)
    if not values or not _ints(values):
        raise LanguageError(f"T.tunable takes a non-empty list of integers, not {candidates!r}")
    if len(set(values)) != len(values):
        raise LanguageError(f"T.tunable lists a candidate twice: {list(values)}")
    chosen = values[0] if default is None else default
    if not _ints([chosen]) or chosen not in values:
        raise LanguageError(f"T.tunable's default {chosen!r} is not one of {list(values)}")
    return Tunable(values, chosen)


def tune_constraint(*_: Any, **__: Any) -> None:
    """Not in Python-written kernels: a constraint on tunables is written in a ``.tir`` file
    (or the configs listed whole: ``tlc.autotune(configs=...)``)."""
    raise LanguageError(
        "T.tune_constraint is read only in a .tir file; in Python, list the allowed configs "
        "with tlc.autotune(configs=[...])"
    )


class ConfigSpace:
    """Names tuned together, each config a row: ``tlc.autotune(configs=[{"block_M": 128,
    "block_N": 128}, ...])``. The kernel's text declares them as one tuple tunable
    (``block_M, block_N = T.tunable([(128, 128), ...], default=(128, 128))``), its
    candidates exactly the configs given, the first the default."""

    def __init__(self, configs: Sequence[Dict[str, int]]) -> None:
        rows = list(configs)
        if not rows or not all(isinstance(c, dict) and c for c in rows):
            raise LanguageError("autotune: configs must be a non-empty list of non-empty dicts")
        self.names = tuple(rows[0])
        for c in rows:
            if set(c) != set(self.names):
                raise LanguageError(
                    f"autotune: every config must name the same keys; {sorted(c)} is not "
                    f"{sorted(self.names)}"
                )
            if not _ints(list(c.values())):
                raise LanguageError(
                    f"autotune: config values are integers (tunables), not {c!r}"
                )
        self.rows = [tuple(c[n] for n in self.names) for c in rows]

    def members(self) -> Dict[str, "ConfigName"]:
        """One placeholder per name, for the factory's keyword arguments."""
        return {n: ConfigName(self, n) for n in self.names}

    def declaration(self) -> str:
        """The line declaring the names as one tunable."""
        def tup(row: Tuple[int, ...]) -> str:
            return str(row[0]) if len(row) == 1 else f"({', '.join(map(str, row))})"
        rows = ", ".join(tup(r) for r in self.rows)
        return f"{', '.join(self.names)} = T.tunable([{rows}], default={tup(self.rows[0])})\n"


class ConfigName(_Name):
    """One name of a ``ConfigSpace``, passed to the factory in place of its value."""

    def __init__(self, space: ConfigSpace, name: str) -> None:
        self.space = space
        self.name = name

    def __repr__(self) -> str:
        return f"<autotune config name {self.name}>"


def ceildiv(a: Any, b: Any) -> Any:
    """``T.ceildiv`` evaluated by Python where a factory computes a size with it
    (``TILE_K = T.ceildiv(BLOCK_K, reduce_threads)``): a number for numbers, an expression
    over symbolic dims for those. (In a kernel's body it is the compiler's.)"""
    if isinstance(a, int) and isinstance(b, int) and b != 0:
        return -(-a // b)
    if isinstance(a, _Name) or isinstance(b, _Name):
        (a if isinstance(a, _Name) else b)._refuse()
    arith = (int, _Arith, Symbolic)
    if isinstance(a, arith) and isinstance(b, arith):
        ta, tb = (_literal(v) if isinstance(v, int) else v._text() for v in (a, b))
        syms = tuple(s for v in (a, b) if not isinstance(v, int) for s in v._symbols())
        return Expr(f"T.ceildiv({ta}, {tb})", syms)
    return _Anything("ceildiv")


class PrimFunc:
    """A kernel written in Python: the tlc source text ``prim_func`` made of it."""

    def __init__(self, name: str, filename: str, source: str, out_idx: Optional[List[int]] = None) -> None:
        self.name = name
        """The function's name (its kernel's name)."""
        self.filename = filename
        """The file the function is written in, named in diagnostics."""
        self.source = source
        """The tlc source text: the function with the values it closes over in place."""
        self.out_idx = out_idx
        """The parameters a call allocates (an eager kernel's ``T.empty`` outputs), for
        ``tlc.compile``'s ``out_idx`` when that is not given; ``None`` for ``T.prim_func``."""
        self.consts: List[str] = []
        """An eager kernel's ``T.const`` names left symbolic (not given to ``eager``): the
        sizes TileLang specializes per call (``tlc.tilelang.jit`` binds them with ``-D``)."""
        self.shapes: Dict[str, Optional[Tuple[Any, ...]]] = {}
        """An eager kernel's tensor parameters' declared shapes as Python evaluates them
        (ints, symbolic dims, expressions over them), ``None`` where it cannot."""

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return f"<tlc.language.PrimFunc {self.name} from {self.filename}>"


class LanguageError(TypeError):
    """A function ``T.prim_func`` cannot turn into tlc source."""


def prim_func(fn: Callable[..., Any]) -> PrimFunc:
    """Turns a Python function written in the language into tlc source text, with the
    literal values it closes over substituted (see the module's documentation)."""
    scope = _scope(fn, sys._getframe(1))
    filename, text, first_line = _source(fn)
    return PrimFunc(fn.__name__, filename, _substitute(text, first_line, scope))


def _scope(fn: Callable[..., Any], frame: Any) -> Dict[str, Any]:
    """The values the function's free names have where it is defined: the defining frame's
    locals over its globals (the function's own globals when no frame is given), then the
    closure's cells."""
    scope: Dict[str, Any] = dict(fn.__globals__ if frame is None else frame.f_globals)
    if frame is not None:
        scope.update(frame.f_locals)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell: assigned after the def
                pass
    return scope


def _source(fn: Callable[..., Any]) -> Tuple[str, str, int]:
    """The function's file, dedented source text (decorators included) and first line."""
    filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    try:
        lines, first_line = inspect.getsourcelines(fn)
    except OSError as e:
        raise LanguageError(
            f"T.prim_func: cannot read the source of `{fn.__name__}` ({e}); define it in a "
            f"file, or pass tlc.compile the source text"
        ) from None
    return filename, textwrap.dedent("".join(lines)), first_line


def _function(text: str) -> ast.FunctionDef:
    tree = ast.parse(text)
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if func is None:
        raise LanguageError("T.prim_func: expected a function definition")
    return func


class Macro:
    """A ``@T.macro`` function (TileLang's statement macro): not run either. A kernel that
    calls it gets the macro's text — its own free names' values substituted as a kernel's
    are — after its own (docs/ir.md, "Macros"), and the compiler expands each call."""

    def __init__(self, fn: Callable[..., Any], scope: Dict[str, Any]) -> None:
        self.name = fn.__name__
        self._filename, self._text, _ = _source(fn)
        self._scope = scope

    def __call__(self, *_: Any, **__: Any) -> Any:
        raise LanguageError(
            f"the macro `{self.name}` expands inside a kernel's text; Python cannot call it"
        )

    def __repr__(self) -> str:
        return f"<tlc.language.Macro {self.name} from {self._filename}>"


#: The macro standing for each plain helper function a kernel calls (one per function, so
#: that two kernels, or two calls, share its definition).
_HELPERS: Dict[Any, Macro] = {}


def _is_helper_function(value: Any) -> bool:
    """Whether ``value`` is a plain Python function defined outside tlc (a script's helper
    building an expression)."""
    return inspect.isfunction(value) and value.__module__.split(".")[0] != "tlc"


def _is_helper(value: Any, node: ast.Name, func: ast.FunctionDef) -> bool:
    """Whether ``node`` (a name the kernel reads) calls ``value``, a helper function
    ``_inline`` could not write as an expression, in the shape of a value macro (plain
    parameters; assignments, then one ``return``): it becomes a macro. Any other function
    stays a name, which the compiler reports where it is called."""
    if not _is_helper_function(value) or not _value_macro_shape(value):
        return False
    return any(
        isinstance(call, ast.Call) and call.func is node for call in ast.walk(func)
    )


def _value_macro_shape(fn: Callable[..., Any]) -> bool:
    try:
        tree = _function(_without_docstring(textwrap.dedent(inspect.getsource(fn))))
    except (OSError, TypeError, SyntaxError, LanguageError):
        return False
    a = tree.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or tree.decorator_list:
        return False
    body = [s for s in tree.body if not isinstance(s, ast.Pass)]
    lets = (ast.Assign, ast.AnnAssign, ast.AugAssign)
    return bool(body) and isinstance(body[-1], ast.Return) and all(isinstance(s, lets) for s in body[:-1])


def _helper_macro(fn: Callable[..., Any]) -> Macro:
    found = _HELPERS.get(fn)
    if found is None:
        found = _HELPERS[fn] = Macro(fn, _scope(fn, None))
        # Its text is a macro's once marked one (it has no decorator of its own).
        found._text = "@T.macro\n" + found._text
    return found


def macro(fn: Optional[Callable[..., Any]] = None, **_options: Any) -> Any:
    """``@T.macro`` (or ``@T.macro(hygienic=...)``): a statement macro for kernels written
    in Python (see ``Macro``)."""
    if fn is None:
        frame = sys._getframe(1)
        return lambda f: Macro(f, _scope(f, frame))
    return Macro(fn, _scope(fn, sys._getframe(1)))


class _Parts(NamedTuple):
    """A function's substituted text and what it needs declared around it."""

    body: str
    symbols: Dict[str, "Symbolic"]
    tunables: Dict[str, "Tunable"]
    spaces: Dict[int, "ConfigSpace"]
    macros: Dict[str, Macro]
    #: The names the function binds (parameters, loop, ``with`` and assignment targets),
    #: before any renaming.
    bound: Set[str]


def _substitute(source: str, first_line: int, scope: Dict[str, Any]) -> str:
    """The function's text with its free names' literal values in place, Python-level
    branches on them resolved, symbolic dims declared above it, placed so that it starts
    on ``first_line``; the macros it calls (theirs too) follow it, one definition per
    ``Macro`` object (two of one name — a macro factory's — get distinct names).

    A name the kernel (or a macro) binds that is also a symbolic dim's name (a loop ``k``
    beside ``T.symbolic("k")``) is renamed in the text: the dim's name is fixed — it is the
    name launches bind — while the loop's is the author's choice."""
    parts, macro_parts = _collect(source, scope, frozenset())
    symbols: Dict[str, Symbolic] = {}
    for p in [parts] + macro_parts:
        symbols.update(p.symbols)
    if any(p.bound & set(symbols) for p in [parts] + macro_parts):
        parts, macro_parts = _collect(source, scope, frozenset(symbols))
    symbols, tunables, spaces = dict(parts.symbols), dict(parts.tunables), dict(parts.spaces)
    for inner in macro_parts:
        symbols.update(inner.symbols)
        tunables.update(inner.tunables)
        spaces.update(inner.spaces)
    macros = ["\n\n" + inner.body for inner in macro_parts]
    header = [_declare(s) for s in symbols.values()]
    header += [_declare_tunable(n, t) for n, t in sorted(tunables.items())]
    header += [space.declaration() for space in spaces.values()]
    # Blank lines up to the function's first line, so diagnostics give the .py's line.
    pad = max(first_line - 1 - len(header), 0)
    return "".join(header) + "\n" * pad + parts.body + "".join(macros)


def _collect(
    source: str, scope: Dict[str, Any], reserved: FrozenSet[str]
) -> Tuple["_Parts", List["_Parts"]]:
    """The kernel's parts and those of the macros it calls, transitively (``reserved``:
    the symbolic dims' names, which the texts must not bind)."""
    names: Dict[int, str] = {}
    parts = _parts(source, scope, names, reserved=reserved)
    macro_parts: List[_Parts] = []
    pending = list(parts.macros.values())
    done: Set[int] = set()
    while pending:
        m = pending.pop(0)
        if id(m) in done:
            continue
        done.add(id(m))
        inner = _parts(m._text, m._scope, names, rename_def=(m.name, names[id(m)]), reserved=reserved)
        pending.extend(inner.macros.values())
        macro_parts.append(inner)
    return parts, macro_parts


def _parts(
    source: str,
    scope: Dict[str, Any],
    names: Dict[int, str],
    rename_def: Optional[Tuple[str, str]] = None,
    reserved: FrozenSet[str] = frozenset(),
) -> _Parts:
    """[`_substitute`]'s work on one function: its text with the values in place, and the
    dims, tunables, config spaces and macros it names (``names``: each ``Macro`` object's
    name in the text, shared by the whole kernel; ``rename_def``: a macro's own name and
    its name in the text; ``reserved``: names the function may not bind, renamed)."""
    text = _without_docstring(textwrap.dedent(source))
    text = inline_helpers(text, scope, _is_helper_function)
    func = _function(text)
    bound = _bound_names(func)
    params = {a.arg for a in ast.walk(func) if isinstance(a, ast.arg)}
    edits: List[Tuple[int, int, int, str]] = []  # (line, start col, end col, text)
    for name in sorted(params & reserved):
        raise LanguageError(
            f"`{func.name}`'s parameter `{name}` has the name of a symbolic dim of the "
            "kernel: rename the parameter"
        )
    renames = _fresh_names(text, (bound - params) & reserved, reserved)
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and node.id in renames and node.end_col_offset is not None:
            edits.append((node.lineno, node.col_offset, node.end_col_offset, renames[node.id]))
    if rename_def is not None and rename_def[0] != rename_def[1]:
        line = text.splitlines()[func.lineno - 1]
        col = line.find(f"def {rename_def[0]}")
        if col >= 0:
            start = col + len("def ")
            edits.append((func.lineno, start, start + len(rename_def[0]), rename_def[1]))
    symbols: Dict[str, Symbolic] = {}
    tunables: Dict[str, Tunable] = {}
    spaces: Dict[int, ConfigSpace] = {}
    macros: Dict[str, Macro] = {}
    for node in ast.walk(func):
        if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
            continue
        if node.id in bound or node.id not in scope or node.end_col_offset is None:
            continue
        value = scope[node.id]
        if _is_helper(value, node, func):
            # A plain Python function the kernel calls (TileLang runs it while tracing, on
            # the expressions it is given): the same computation as a macro of its text.
            value = scope[node.id] = _helper_macro(value)
        if isinstance(value, Macro):
            # Kept by name: the one its text defines (the macro's own, unless another macro
            # object of the kernel has it).
            m = scope[node.id]
            if id(m) not in names:
                taken = set(names.values())
                name, k = m.name, 1
                while name in taken:
                    name, k = f"{m.name}_{k}", k + 1
                names[id(m)] = name
            macros[names[id(m)]] = m
            if names[id(m)] != node.id:
                edits.append((node.lineno, node.col_offset, node.end_col_offset, names[id(m)]))
            continue
        if isinstance(scope[node.id], Tunable):
            # The name stays; the text declares it. One tunable is one name: the same object
            # under two names would become two independent tunables.
            for other, t in tunables.items():
                if t is scope[node.id] and other != node.id:
                    raise LanguageError(
                        f"the tunable {t!r} is used as both `{other}` and `{node.id}`: one "
                        "T.tunable per name (names tuned together: tlc.autotune's configs)"
                    )
            tunables[node.id] = scope[node.id]
            continue
        if isinstance(scope[node.id], ConfigName):
            # The config's own name (the factory may hold it under another); the text
            # declares the whole space.
            member = scope[node.id]
            spaces[id(member.space)] = member.space
            if member.name != node.id:
                edits.append((node.lineno, node.col_offset, node.end_col_offset, member.name))
            continue
        replacement = _literal(scope[node.id], symbols)
        if replacement is not None and replacement != node.id:
            edits.append((node.lineno, node.col_offset, node.end_col_offset, replacement))
    out = text.splitlines(keepends=True)
    # Right to left within a line, so earlier columns stay valid.
    for line, start, end, new in sorted(edits, reverse=True):
        row = out[line - 1]
        out[line - 1] = row[:start] + new + row[end:]
    # A tunable (kept by name) whose name the kernel also binds, or a dim also declares,
    # would be another thing there.
    for name in tunables:
        if name in symbols:
            raise LanguageError(f"`{name}` names both a symbolic dim and a tunable")
    scope_names = {n for n, v in scope.items() if isinstance(v, Tunable)}
    for name in sorted(scope_names & bound):
        raise LanguageError(
            f"the kernel binds `{name}` (a parameter, loop or assigned name), which is also a "
            "tunable of the factory: rename one"
        )
    body = _fold_branches(_fold_builtins("".join(out), scope, bound))
    return _Parts(body, symbols, tunables, spaces, macros, bound)


def _without_docstring(text: str) -> str:
    """The function's text with its docstring's lines blank (documentation, which the
    compiler's grammar has no triple-quoted strings for; lines keep their numbers)."""
    func = _function(text)
    first = func.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        return text
    lines = text.splitlines(keepends=True)
    for i in range(first.lineno - 1, first.end_lineno or first.lineno):
        lines[i] = "\n"
    if len(func.body) == 1:
        # Nothing else: `pass` keeps the body a statement.
        lines[first.lineno - 1] = " " * first.col_offset + "pass\n"
    return "".join(lines)


def _fresh_names(text: str, names: Set[str], taken: FrozenSet[str]) -> Dict[str, str]:
    """A new name for each of ``names``: ``k`` becomes ``k_1`` (``k_2``, ...), one that
    appears nowhere in ``text`` and is none of ``taken``."""
    used = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)} | set(taken)
    out: Dict[str, str] = {}
    for name in sorted(names):
        i = 1
        while f"{name}_{i}" in used:
            i += 1
        out[name] = f"{name}_{i}"
        used.add(out[name])
    return out


#: Python builtins a kernel body may call on the factory's values, which TileLang's
#: Python evaluates while it builds the kernel (``min(block_N, dim)``).
_BUILTINS = {"min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round}


def _fold_builtins(text: str, scope: Dict[str, Any], bound: Set[str]) -> str:
    """Calls of Python's ``min``, ``max``, ``abs``, ``int``, ``float``, ``round`` whose
    arguments are literals after substitution are replaced by their value, as TileLang's
    Python computes them; ``min`` / ``max`` of run-time values become ``T.min`` /
    ``T.max`` (the same value). A name the kernel binds, or the module defines, is not the
    builtin and stays; a call that cannot be folded stays too (the compiler reports it,
    located)."""
    while True:
        func = _function(text)
        # Innermost first (`ast.walk` is breadth-first), so nested calls fold whole.
        for node in reversed(list(ast.walk(func))):
            new = _folded_call(node, scope, bound, text)
            if new is not None:
                break
        else:
            return text
        assert isinstance(node, ast.Call) and node.end_col_offset is not None
        lines = text.splitlines(keepends=True)
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        row = lines[first][: node.col_offset] + new + lines[last][node.end_col_offset :]
        lines[first : last + 1] = [row] + ["\n"] * (last - first)
        text = "".join(lines)


def _folded_call(node: ast.AST, scope: Dict[str, Any], bound: Set[str], text: str) -> Optional[str]:
    """The text replacing ``node`` when it is a call of one of ``_BUILTINS`` that folds."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    name = node.func.id
    builtin = _BUILTINS.get(name)
    if builtin is None or name in bound or scope.get(name, builtin) is not builtin:
        return None
    if node.keywords or not node.args or node.end_col_offset is None:
        return None
    if any(isinstance(a, ast.Starred) for a in node.args):
        return None
    values = [_constant(a) for a in node.args]
    if all(v is not _UNDECIDED for v in values):
        try:
            value = builtin(*values)
        except Exception:  # e.g. int("x"): left for the compiler, which says where
            value = None
        new = _literal(value) if value is not None else None
        if new is not None:
            return f"({new})" if new.startswith("-") else new
    if name in ("min", "max") and len(node.args) >= 2:
        args = [" ".join((ast.get_source_segment(text, a) or "").split()) for a in node.args]
        out = args[0]
        for a in args[1:]:
            out = f"T.{name}({out}, {a})"
        return out
    return None


_UNDECIDED = object()


def _constant(node: ast.expr) -> Any:
    """The value of an expression made only of literals and operators (after
    substitution), else ``_UNDECIDED``."""
    if not all(isinstance(n, _DECIDABLE) for n in ast.walk(node)):
        return _UNDECIDED
    try:
        return eval(compile(ast.Expression(node), "<value>", "eval"), {"__builtins__": {}})
    except Exception:
        return _UNDECIDED


def _declare(s: Symbolic) -> str:
    """The line declaring a symbolic dim, in the canonical spelling (docs/ir.md)."""
    dtype = "" if s.dtype == "int32" else f', "{s.dtype}"'
    return f'{s.name} = T.symbolic("{s.name}"{dtype})\n'


def _declare_tunable(name: str, t: Tunable) -> str:
    """The line declaring a tunable (docs/ir.md, "Tuning space")."""
    return f"{name} = T.tunable([{', '.join(map(str, t.candidates))}], default={t.default})\n"


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


def _literal(value: Any, symbols: Optional[Dict[str, Symbolic]] = None) -> Optional[str]:
    """``value`` as source text when it is a literal the language reads (symbolic dims and
    expressions over them included, recorded in ``symbols``), else ``None``."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, Symbolic):
        if symbols is not None:
            symbols[value.name] = value
        return value.name
    if isinstance(value, Expr):
        if symbols is not None:
            for s in value.symbols:
                symbols[s.name] = s
        return value.text
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, float):
        return repr(value) if value >= 0 else f"({value!r})"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, (tuple, list)):
        for v in value:
            if isinstance(v, _Name):
                raise LanguageError(
                    f"{v!r} is inside a tuple or list the factory built: a tunable may be "
                    "used by its name inside the kernel only"
                )
        items = [_literal(v, symbols) for v in value]
        if any(i is None for i in items):
            return None
        inner = ", ".join(items)  # type: ignore[arg-type]
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(items) == 1 else f"({inner})"
    return None


def eager(fn: Callable[..., Any], **values: Any) -> PrimFunc:
    """A kernel written in TileLang's eager form (the body of an ``@tilelang.jit`` function:
    ``M, N = T.const("M, N")``, ``A: T.Tensor((M, N), dtype)``, ``C = T.empty((M, N),
    dtype)``, ``return C``) as a ``PrimFunc``, with ``values`` for its Python arguments.

    - The function's parameters not in ``values`` (nor defaulted) are its tensors, declared
      by the ``A: T.Tensor(...)`` statements; each ``T.empty`` is an output parameter after
      them, and the ones ``return`` names are ``out_idx`` (what the call allocates).
    - ``T.const`` names given in ``values`` are literals (``rms_norm.compile(N=1024)``),
      the others symbolic dims.
    - A top-level ``name = expr`` that Python evaluates to a literal (``dtype = T.float``,
      ``OH = (H + 2 * P - 3) // S + 1`` with ``H`` symbolic) is a Python value, substituted
      like the factory's; a name in ``values`` overrides its assignment (``sm_num=132`` for
      ``sm_num = driver.get_num_sms()``). Other statements stay (lets, the kernel).

    Lines keep their numbers: removed statements become blank lines and the parameters are
    written on the ``def`` line."""
    filename, text, first_line = _source(fn)
    func = _function(text)
    lines = text.splitlines(keepends=True)
    scope = _scope(fn, None)
    given = _defaults(fn)
    given.update(values)
    params = [a.arg for a in func.args.args]
    # A parameter shadows the module's name: one without a value is a tensor even when the
    # module has a global of its name (a script's `X = torch.randn(...)` beside `def f(X)`).
    tensors = [p for p in params if p not in given]
    for p in tensors:
        scope.pop(p, None)
    scope.update(given)
    declared: Dict[str, str] = {}
    outputs: List[Tuple[str, str]] = []
    returned: List[str] = []
    blank: Set[int] = set()
    for stmt in func.body:
        span = range(stmt.lineno - 1, (stmt.end_lineno or stmt.lineno))
        segment = ast.get_source_segment(text, stmt) or ""
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            blank.update(span)  # a docstring
        elif _is_const(stmt):
            names = [t.id for t in _targets(stmt)]
            for n in names:
                if n not in values:
                    scope[n] = Symbolic(n)
            blank.update(span)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
            declared[stmt.target.id] = ast.get_source_segment(text, stmt.annotation) or ""
            blank.update(span)
        elif isinstance(stmt, ast.Assign) and _call_name(stmt.value) == "empty" and len(_targets(stmt)) == 1:
            call = stmt.value
            assert isinstance(call, ast.Call)
            args = ", ".join(ast.get_source_segment(text, a) or "" for a in call.args)
            outputs.append((_targets(stmt)[0].id, f"T.Tensor({args})"))
            blank.update(span)
        elif isinstance(stmt, ast.Return):
            value = stmt.value
            items = value.elts if isinstance(value, ast.Tuple) else [value] if value else []
            returned = [n.id for n in items if isinstance(n, ast.Name)]
            blank.update(span)
        elif _targets(stmt) and len(_targets(stmt)) == len(_flat_targets(stmt)):
            names = [t.id for t in _targets(stmt)]
            if all(n in values for n in names):
                blank.update(span)
                continue
            try:
                assert isinstance(stmt, ast.Assign)
                value = eval(compile(ast.Expression(stmt.value), filename, "eval"), dict(scope))
            except UnknownName:
                continue  # a name only the compiler can judge: it says where
            except LanguageError:
                raise
            except Exception:  # a TIR expression or a call Python cannot make here: a let
                continue
            got = list(value) if len(names) > 1 and isinstance(value, tuple) else [value]
            if len(got) == len(names) and all(_literal(v) is not None for v in got):
                for n, v in zip(names, got):
                    scope.setdefault(n, v) if n in values else scope.__setitem__(n, v)
                blank.update(span)
        elif isinstance(stmt, ast.Assert):
            try:
                holds = eval(compile(ast.Expression(stmt.test), filename, "eval"), dict(scope))
            except UnknownName:
                continue
            except LanguageError:
                raise
            except Exception:
                continue
            if not holds:
                raise LanguageError(f"{filename}:{first_line + stmt.lineno - 1}: assertion failed: {segment}")
            blank.update(span)
    missing = [t for t in tensors if t not in declared]
    if missing:
        raise LanguageError(
            f"{filename}:{first_line + func.lineno - 1}: `{fn.__name__}`'s parameter `{missing[0]}` "
            f"has no value and no `{missing[0]}: T.Tensor(shape, dtype)` statement; pass "
            f"T.eager a value for it"
        )
    signature = [f"{t}: {declared[t]}" for t in tensors] + [f"{n}: {a}" for n, a in outputs]
    names = tensors + [n for n, _ in outputs]
    out_idx = [names.index(r) for r in returned if r in names]
    # The `def` line (after any decorators) takes the whole signature; its other lines and
    # the removed statements stay as blank lines.
    # (`FunctionDef.lineno` is the `def` line itself, after the decorators.)
    def_line = func.lineno - 1
    while def_line < len(lines) - 1 and not lines[def_line].lstrip().startswith("def "):
        def_line += 1
    body_first = func.body[0].lineno - 1
    out = ["\n"] * len(lines)
    out[def_line] = f"def {func.name}({', '.join(signature)}):\n"
    for i in range(body_first, len(lines)):
        out[i] = "\n" if i in blank else lines[i]
    # The function keeps at least one statement.
    if all(out[i].strip() == "" for i in range(body_first, len(out))):
        raise LanguageError(f"{filename}:{first_line + func.lineno - 1}: `{fn.__name__}` has no kernel")
    # Decorated on the line above the def (a blank one: the text starts at the def).
    source = _substitute("@T.prim_func\n" + "".join(out[def_line:]), first_line + def_line - 1, scope)
    made = PrimFunc(func.name, filename, source, out_idx)
    made.consts = [n for stmt in func.body if _is_const(stmt) for n in (t.id for t in _targets(stmt)) if n not in values]
    made.shapes = {t: _declared_shape(declared[t], scope) for t in tensors}
    return made


def _declared_shape(annotation: str, scope: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """The shape of ``T.Tensor(shape, dtype)`` / ``T.Tensor[shape, dtype]`` as Python
    evaluates it in ``scope``, or ``None``."""
    try:
        node = ast.parse(annotation.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and node.args:
        shape_node: ast.expr = node.args[0]
    elif isinstance(node, ast.Subscript):
        inner = node.slice
        shape_node = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner
    else:
        return None
    try:
        value = eval(compile(ast.Expression(shape_node), "<shape>", "eval"), dict(scope))
    except Exception:  # a shape only the compiler can read
        return None
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _defaults(fn: Callable[..., Any]) -> Dict[str, Any]:
    sig = inspect.signature(fn)
    return {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def _targets(stmt: ast.stmt) -> List[ast.Name]:
    """The names an assignment binds (``M, N = ...`` or ``M = ...``)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return []
    t = stmt.targets[0]
    elts = t.elts if isinstance(t, ast.Tuple) else [t]
    return [e for e in elts if isinstance(e, ast.Name)]


def _flat_targets(stmt: ast.stmt) -> List[ast.expr]:
    """Every target of a single assignment, names or not."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return []
    t = stmt.targets[0]
    return list(t.elts) if isinstance(t, ast.Tuple) else [t]


def _call_name(node: Optional[ast.expr]) -> Optional[str]:
    """``f`` for a call ``T.f(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _is_const(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and _call_name(stmt.value) == "const"


_DECIDABLE = (ast.Constant, ast.BoolOp, ast.UnaryOp, ast.Compare, ast.BinOp, ast.Tuple,
              ast.boolop, ast.unaryop, ast.cmpop, ast.operator, ast.Load)


def _decided(test: ast.expr) -> Optional[bool]:
    """The truth of a condition made only of literals (``False``, ``128 == 64``), which
    Python decides when TileLang builds the kernel; ``None`` for a run-time condition."""
    if not all(isinstance(n, _DECIDABLE) for n in ast.walk(test)):
        return None
    try:
        return bool(eval(compile(ast.Expression(test), "<test>", "eval"), {"__builtins__": {}}))
    except Exception:  # e.g. 1 // 0: leave it to the compiler, which says where
        return None


def _fold_branches(text: str) -> str:
    """Resolves ``if``/``else`` statements and ``a if c else b`` expressions whose condition
    is decided (after substitution: ``if is_causal:`` with ``is_causal = False``), as
    TileLang's Python does, keeping every other line where it was."""
    while True:
        func = _function(text)
        lines = text.splitlines(keepends=True)
        target = next(
            (n for n in ast.walk(func) if isinstance(n, (ast.If, ast.IfExp)) and _decided(n.test) is not None),
            None,
        )
        if target is None:
            return text
        taken = _decided(target.test)
        if isinstance(target, ast.IfExp):
            text = _fold_ifexp(lines, func, target, target.body if taken else target.orelse)
        else:
            text = _fold_if(lines, target, target.body if taken else target.orelse)


def _fold_ifexp(lines: List[str], func: ast.FunctionDef, node: ast.IfExp, arm: ast.expr) -> str:
    """The text with ``node`` replaced by its taken arm; lines the expression spanned are
    kept as blank lines after the statement holding it."""
    arm_text = ast.get_source_segment("".join(lines), arm) or ""
    arm_text = " ".join(part.strip() for part in arm_text.splitlines())
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    new = lines[first][: node.col_offset] + f"({arm_text})" + lines[last][node.end_col_offset :]
    stmt = next(
        s for s in ast.walk(func)
        if isinstance(s, ast.stmt) and not isinstance(s, (ast.FunctionDef, ast.If, ast.For, ast.While, ast.With))
        and s.lineno <= node.lineno and (s.end_lineno or 0) >= (node.end_lineno or 0)
    )
    removed = last - first
    out = lines[:first] + [new] + lines[last + 1 :]
    stmt_end = (stmt.end_lineno or stmt.lineno) - 1 - removed
    out[stmt_end + 1 : stmt_end + 1] = ["\n"] * removed
    return "".join(out)


def _fold_if(lines: List[str], node: ast.If, arm: List[ast.stmt]) -> str:
    """The text with the ``if`` statement replaced by its taken arm, dedented to the
    ``if``'s column; the other lines of the statement become blank."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    out = lines[:]
    keep: Set[int] = set()
    if arm:
        lo = min(s.lineno for s in arm) - 1
        hi = max((s.end_lineno or s.lineno) for s in arm) - 1
        shift = arm[0].col_offset - node.col_offset
        keep = set(range(lo, hi + 1))
        for i in keep:
            row = out[i]
            indent = len(row) - len(row.lstrip(" "))
            out[i] = row[min(shift, indent) :]
    for i in range(first, last + 1):
        if i not in keep:
            out[i] = "\n"
    if not arm or all(out[i].strip() == "" for i in range(first, last + 1)):
        # An arm that is absent leaves nothing: `pass` keeps the enclosing block well formed.
        out[first] = " " * node.col_offset + "pass\n"
    return "".join(out)


# dtypes as the language spells them (`T.float16` in an annotation or an argument).
float16 = "float16"
bfloat16 = "bfloat16"
float32 = "float32"
float64 = "float64"
float8_e4m3 = "float8_e4m3"
float8_e5m2 = "float8_e5m2"
int4 = "int4"
int8 = "int8"
int16 = "int16"
int32 = "int32"
int64 = "int64"
uint8 = "uint8"
uint16 = "uint16"
uint32 = "uint32"
bool_ = "bool"

# TileLang's other spellings of the same dtypes, as the compiler reads them (`T.float` is
# float32; `T.float8_e4m3fn` torch's name of float8_e4m3): names Python's builtins or
# keywords would shadow here, so they come from the module's __getattr__.
_DTYPE_ALIASES = {
    "float": "float",
    "half": "float16",
    "bool": "bool",
    "float8_e4m3fn": "float8_e4m3fn",
}

_BITS = {"bool": 8, "float": 32}


class dtype(str):  # noqa: N801  (TileLang's spelling)
    """TileLang's ``T.dtype``: a dtype name. Factories use it as a parameter annotation
    (``dtype: T.dtype = T.float16``) and to name a dtype (``T.dtype("float16")``); the
    value is the name, which kernels read as text."""


class DataType:
    """TVM's ``DataType(dtype)`` as TileLang's factories use it: ``DataType(in_dtype).bits``
    (``from tvm import DataType`` becomes ``from tlc.language import DataType``)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = str(dtype)
        digits = "".join(c for c in self.dtype if c.isdigit())
        bits = _BITS.get(self.dtype)
        if bits is None and self.dtype.startswith("float8"):
            bits = 8
        if bits is None:
            if not digits:
                raise LanguageError(f"DataType: unknown dtype `{self.dtype}`")
            bits = int(digits)
        self.bits = bits
        """The width of one element in bits."""

    def __str__(self) -> str:
        return self.dtype

    def __repr__(self) -> str:
        return f"DataType({self.dtype!r})"


class _Anything:
    """What ``T.Tensor((M, K), dtype)`` and the like evaluate to in Python: nothing. They
    matter only as source text; Python evaluates annotations when the function is defined.
    Only names the compiler reads are placeholders (any other ``T.x`` is an
    ``UnknownName`` error at its line), and never a value Python code goes on with:
    decorating a function with one or iterating one is a ``LanguageError`` naming it."""

    def __init__(self, name: str = "") -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> "_Anything":
        if len(args) == 1 and not kwargs and inspect.isfunction(args[0]):
            fn = args[0]
            code = fn.__code__
            raise LanguageError(
                f"{code.co_filename}:{code.co_firstlineno}: `T.{self._name}` decorates "
                f"`{fn.__name__}`, but it is a construct of a kernel's text, not a decorator"
            )
        return self

    def __getattr__(self, name: str) -> "_Anything":
        return self

    def __getitem__(self, key: Any) -> "_Anything":
        return self

    def __iter__(self) -> Any:
        raise LanguageError(
            f"`T.{self._name}` is a placeholder for the compiler (it has meaning only in a "
            f"kernel's text): Python cannot iterate it"
        )



class UnknownName(LanguageError):
    """``T.x`` for a name that neither ``tlc.language`` nor the compiler reads."""


_COMPILER_NAMES: Optional[FrozenSet[str]] = None


def _compiler_reads(name: str) -> bool:
    """Whether the compiler's front end reads ``T.name`` — or declines it with its own
    located explanation (``T.print``), which it then gives where the kernel uses it."""
    global _COMPILER_NAMES
    from . import _tlc

    if _COMPILER_NAMES is None:
        _COMPILER_NAMES = frozenset(_tlc.language_names())
    return name in _COMPILER_NAMES or bool(_tlc.language_declines(name))


#: What to write instead of TileLang names that are Python-level there.
_INSTEAD = {
    "jit": "write the kernel as `@T.prim_func` (and call `tlc.compile` on it), or use "
    "`tlc.tilelang.jit` (`import tlc.tilelang as tilelang`)",
}


def lookup(name: str, depth: int = 1) -> Any:
    """``T.name`` for a name this module does not define: a dtype alias, or a placeholder
    for a name the compiler reads (its meaning is the compiler's); any other name is an
    ``UnknownName`` error located at the line that spelled it (``depth``: the frames between
    that line and this function)."""
    if name.startswith("_"):
        raise AttributeError(name)
    if name in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[name]
    if _compiler_reads(name):
        return _Anything(name)
    frame = sys._getframe(depth + 1)
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    hint = _INSTEAD.get(name, "see docs/ir.md for the language tlc reads")
    raise UnknownName(f"{where}: `T.{name}` is not part of tlc's language: {hint}")


def __getattr__(name: str) -> Any:
    # Module-level fallback (PEP 562): `T.Tensor`, `T.Kernel`, `T.handle`, ... for Python's
    # evaluation of annotations; private names stay AttributeErrors.
    return lookup(name, 1)
