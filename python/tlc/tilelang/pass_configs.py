"""TileLang's ``pass_configs`` on tlc: each key tlc has an equivalent for is applied, every
other key is refused by name (a setting silently dropped would make a script believe it
ran something it did not).

What each accepted key means here:

- ``tl.enable_fast_math``: ``True`` is what tlc always does (its math functions are PTX's
  fast forms, docs/ir.md "Math functions", with the error bounds listed there); ``False``
  asks for IEEE-accurate ``exp``/``log``/..., which tlc does not have: refused.
  ``tl.disable_fast_math`` (TileLang's older spelling) likewise, inverted.
- ``tl.disable_tma_lower``: ``True`` writes ``disable_tma=True`` on every ``T.copy`` of the
  kernel that does not set it (docs/ir.md "T.copy": a copy with a global side is then never
  TMA; between on-chip buffers the keyword changes nothing). ``False`` is tlc's default.
- ``tl.disable_warp_specialized``: tlc warp-specializes only TMA pipelines (sm_90a,
  docs/passes.md "warp-specialize"), so ``True`` is honored the same way — no TMA, hence
  no producer warpgroup — which also gives up TMA itself; ``False`` is the default.
"""

from __future__ import annotations

import ast
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..language import PrimFunc


class PassConfigKey(str, Enum):
    """TileLang's ``tilelang.PassConfigKey`` names (``tilelang/transform/pass_config.py``):
    every member exists so that scripts that name one import; ``resolve`` says which tlc
    honors."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"


class PassConfigError(ValueError):
    """A ``pass_configs`` entry tlc cannot honor, named."""


class Settings:
    """What a ``pass_configs`` dict asks of tlc, once checked."""

    def __init__(self, disable_tma: bool = False) -> None:
        self.disable_tma = disable_tma
        """Every ``T.copy`` gets ``disable_tma=True`` (``tl.disable_tma_lower`` or
        ``tl.disable_warp_specialized``)."""

    def __repr__(self) -> str:
        return f"Settings(disable_tma={self.disable_tma})"


_HONORED = (
    "tl.enable_fast_math (True), tl.disable_fast_math (False), tl.disable_tma_lower, "
    "tl.disable_warp_specialized"
)


def _key(key: Any) -> str:
    if isinstance(key, Enum):
        return str(key.value)
    if isinstance(key, str):
        return key
    raise PassConfigError(f"pass_configs: a key is a string or a PassConfigKey, not {key!r}")


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    # TileLang's configs also take the strings and 0 / 1 TVM's PassContext converts.
    if value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise PassConfigError(f"pass_configs: `{key}` takes a bool, not {value!r}")


def resolve(pass_configs: Optional[Mapping[Any, Any]]) -> Settings:
    """The settings ``pass_configs`` asks for; ``PassConfigError`` naming the first key tlc
    cannot honor (or a value it cannot)."""
    settings = Settings()
    for raw, value in (pass_configs or {}).items():
        key = _key(raw)
        if key == "tl.enable_fast_math" or key == "tl.disable_fast_math":
            fast = _flag(key, value) == (key == "tl.enable_fast_math")
            if not fast:
                raise PassConfigError(
                    f"pass_configs: `{key}`: {value!r} asks for IEEE-accurate math functions; "
                    "tlc always compiles them to PTX's fast forms (docs/ir.md, \"Math "
                    "functions\", lists their error bounds): drop the key"
                )
        elif key in ("tl.disable_tma_lower", "tl.disable_warp_specialized"):
            if _flag(key, value):
                settings.disable_tma = True
        else:
            raise PassConfigError(
                f"pass_configs: `{key}` has no equivalent in tlc, which honors only {_HONORED}; "
                "drop the key"
            )
    return settings


def apply(settings: Settings, func: PrimFunc) -> PrimFunc:
    """``func`` as ``settings`` want it compiled."""
    if not settings.disable_tma:
        return func
    source = without_tma(func.source)
    return PrimFunc(func.name, func.filename, source, func.out_idx)


def without_tma(source: str) -> str:
    """``source`` with ``disable_tma=True`` added to every ``T.copy(...)`` call that does
    not give the keyword. Only columns after the insertion move, on the call's last line;
    line numbers stay (diagnostics keep the ``.py``'s lines)."""
    tree = ast.parse(source)
    inserts: List[Tuple[int, int]] = []  # (line index, column)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "copy"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "T"
        ):
            continue
        if any(k.arg == "disable_tma" for k in node.keywords) or not node.args:
            continue
        last = max([*node.args, *node.keywords], key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
        if last.end_lineno is None or last.end_col_offset is None:
            continue
        inserts.append((last.end_lineno - 1, last.end_col_offset))
    lines = source.splitlines(keepends=True)
    # Right to left within a line, so earlier columns stay valid.
    for line, col in sorted(inserts, reverse=True):
        row = lines[line]
        lines[line] = row[:col] + ", disable_tma=True" + row[col:]
    return "".join(lines)


def describe(pass_configs: Optional[Mapping[Any, Any]]) -> Dict[str, Any]:
    """The configs as plain ``{name: value}`` (for a kernel's record of how it was built)."""
    return {_key(k): v for k, v in (pass_configs or {}).items()}
