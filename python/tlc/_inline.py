"""Calls of a script's plain Python helpers inside a kernel's text, inlined.

TileLang runs a helper such as ``make_dq_layout(dQ)`` (``return T.Layout(dQ.shape, lambda
b, l, h, d: ...)``) while it traces the kernel: the call *is* the expression the helper
returns, built from the arguments. A helper whose body is one ``return EXPR`` (a docstring
aside) is therefore written into the kernel's text as ``EXPR`` with each parameter replaced
by its argument's text and each of the helper's own module-level literals by its value —
exactly what tracing builds. ``tlc.language`` turns any other helper into a macro (the
compiler expands lets and a final ``return`` as the call's value)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Callable, Dict, List, Optional, Tuple

#: Expressions whose text needs no parentheses wherever it is put.
_ATOMIC = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.List, ast.Tuple, ast.Dict)


def _return_expr(fn: Callable[..., Any]) -> Optional[Tuple[ast.FunctionDef, ast.expr, str]]:
    """The helper's definition, its one returned expression and its text, when its body is
    (a docstring and) ``return EXPR``."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    tree = ast.parse(text)
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if func is None or func.decorator_list:
        return None
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    args = func.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return None
    return func, body[0].value, text


def inline(
    fn: Callable[..., Any],
    call: ast.Call,
    source: str,
    literal: Callable[[Any], Optional[str]],
) -> Optional[str]:
    """The text of ``call`` (a call of helper ``fn`` in the kernel ``source``) with the
    helper's returned expression in its place, or ``None`` when the helper is not a single
    expression or the call's arguments do not bind simply (then it is a macro)."""
    found = _return_expr(fn)
    if found is None:
        return None
    func, expr, text = found
    params = [a.arg for a in func.args.args]
    bound: Dict[str, str] = {}
    if len(call.args) > len(params) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    for p, a in zip(params, call.args):
        bound[p] = _parenthesized(a, source)
    for kw in call.keywords:
        if kw.arg is None or kw.arg not in params or kw.arg in bound:
            return None
        bound[kw.arg] = _parenthesized(kw.value, source)
    defaults = dict(zip(params[len(params) - len(func.args.defaults):], fn.__defaults__ or ()))
    for p in params:
        if p not in bound:
            if p not in defaults or literal(defaults[p]) is None:
                return None
            bound[p] = literal(defaults[p])  # type: ignore[assignment]
    # Names a lambda or comprehension of the expression binds are its own.
    inner = {
        a.arg for node in ast.walk(expr) if isinstance(node, ast.Lambda) for a in node.args.args
    } | {
        n.id
        for node in ast.walk(expr)
        if isinstance(node, ast.comprehension)
        for n in ast.walk(node.target)
        if isinstance(n, ast.Name)
    }
    if inner & set(params):
        return None
    edits: List[Tuple[int, int, int, str]] = []
    for node in ast.walk(expr):
        if not isinstance(node, ast.Name) or node.id in inner:
            continue
        if node.id in bound:
            edits.append((node.lineno, node.col_offset, node.end_col_offset or node.col_offset, bound[node.id]))
        elif node.id in fn.__globals__:
            value = literal(fn.__globals__[node.id])
            if value is not None and value != node.id:
                edits.append((node.lineno, node.col_offset, node.end_col_offset or node.col_offset, value))
    lines = text.splitlines(keepends=True)
    for line, start, end, new in sorted(edits, reverse=True):
        row = lines[line - 1]
        lines[line - 1] = row[:start] + new + row[end:]
    out = ast.get_source_segment("".join(lines), _shifted(expr, edits)) or ""
    if not out or "\n" in out:
        return None
    return out if isinstance(expr, _ATOMIC) else f"({out})"


def _parenthesized(node: ast.expr, source: str) -> str:
    text = ast.get_source_segment(source, node) or ""
    return text if isinstance(node, _ATOMIC) else f"({text})"


def _shifted(expr: ast.expr, edits: List[Tuple[int, int, int, str]]) -> ast.expr:
    """``expr``'s position after ``edits`` (each replacing a name on the expression's
    lines): its end column moves by the length changes on its last line before it."""
    end_line, end_col = expr.end_lineno or expr.lineno, expr.end_col_offset or 0
    shift = sum(len(new) - (end - start) for line, start, end, new in edits if line == end_line and end <= end_col)
    start_shift = sum(
        len(new) - (end - start) for line, start, end, new in edits if line == expr.lineno and end <= expr.col_offset
    )
    moved = ast.Expression(body=ast.Constant(value=None))
    node = moved.body
    node.lineno, node.col_offset = expr.lineno, expr.col_offset + start_shift
    node.end_lineno, node.end_col_offset = end_line, end_col + shift
    return node


def inline_helpers(text: str, scope: Dict[str, Any], is_helper: Callable[[Any], bool]) -> str:
    """``text`` (a kernel's function) with every one-line call of a single-expression helper
    (``is_helper`` of its value in ``scope``) replaced by the expression, innermost first;
    other helper calls are left for the macro route."""
    refused: set = set()
    for _ in range(256):  # each round inlines one call; a bound against helpers that recurse
        tree = ast.parse(text)
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.lineno == node.end_lineno
            and is_helper(scope.get(node.func.id))
            and id(scope.get(node.func.id)) not in refused
        ]
        innermost = [
            c for c in calls if not any(o is not c and o in calls for o in ast.walk(c))
        ]
        if not innermost:
            return text
        call = max(innermost, key=lambda c: (c.lineno, c.col_offset))
        fn = scope[call.func.id]  # type: ignore[union-attr]
        new = inline(fn, call, text, _literal_of)
        if new is None:
            refused.add(id(fn))
            continue
        lines = text.splitlines(keepends=True)
        row = lines[call.lineno - 1]
        lines[call.lineno - 1] = row[: call.col_offset] + new + row[call.end_col_offset :]
        text = "".join(lines)
    return text


def _literal_of(value: Any) -> Optional[str]:
    from .language import _literal

    return _literal(value)
