"""Copies one of TileLang's example scripts into this folder, changing only its imports
(the rule of issue 39: a TileLang user's script runs on tlc with its imports changed and
nothing else), with a header naming the source, the commit and the edits.

    python copy_script.py TILELANG_CHECKOUT examples/gemm/example_gemm.py COMMIT

Import lines rewritten (whole lines, nothing else):
- ``import tilelang`` -> ``import tlc.tilelang as tilelang``; ``import tilelang as tl`` ->
  ``import tlc.tilelang as tl``;
- ``import tilelang.language as T`` -> ``import tlc.tilelang.language as T``;
- ``import tilelang.x`` -> ``import tlc.tilelang as tilelang, tlc.tilelang.x`` (binds
  ``tilelang`` and loads its submodule, as the original does);
- ``from tilelang import x`` / ``from tilelang.y import x`` -> ``from tlc.tilelang...``;
- ``from tvm import DataType`` -> ``from tlc.tilelang.language import DataType`` (TVM's
  dtype helper, which TileLang re-exports).
Any other line that mentions ``tilelang`` or ``tvm`` outside a string is left as it is
(and reported), so a script that needs more than its imports changed shows it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Imports at any indentation (a script's functions import too), the indentation kept.
RULES = [
    (re.compile(r"^(\s*)import tilelang$"), r"\1import tlc.tilelang as tilelang"),
    (re.compile(r"^(\s*)import tilelang as (\w+)$"), r"\1import tlc.tilelang as \2"),
    (re.compile(r"^(\s*)import tilelang\.language as (\w+)$"), r"\1import tlc.tilelang.language as \2"),
    # `import tilelang.testing` binds `tilelang` (the package) and loads the submodule.
    (re.compile(r"^(\s*)import tilelang\.([\w.]+)$"), r"\1import tlc.tilelang as tilelang, tlc.tilelang.\2"),
    (re.compile(r"^(\s*)from tilelang import (.*)$"), r"\1from tlc.tilelang import \2"),
    (re.compile(r"^(\s*)from tilelang\.([\w.]+) import (.*)$"), r"\1from tlc.tilelang.\2 import \3"),
    (re.compile(r"^(\s*)from tvm import DataType$"), r"\1from tlc.tilelang.language import DataType"),
]


def rewrite(text: str) -> tuple[str, list[str], list[str]]:
    """The text with its import lines rewritten; the edits made; other lines that still
    name tilelang or tvm as a module."""
    out, edits, left = [], [], []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        for pattern, repl in RULES:
            if pattern.match(body):
                new = pattern.sub(repl, body)
                edits.append(f"`{body.strip()}` -> `{new.strip()}`")
                line = new + "\n"
                break
        else:
            if re.match(r"^\s*(import|from)\s+(tilelang|tvm)\b", body):
                left.append(body)
        out.append(line)
    return "".join(out), edits, left


def main() -> None:
    checkout, rel, commit = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    text = (checkout / rel).read_text(encoding="utf-8")
    new, edits, left = rewrite(text)
    if left:
        print(f"{rel}: imports left as they are: {left}", file=sys.stderr)
    header = [
        f"# Source: tile-ai/tilelang {rel}, commit {commit[:8]}",
        f"# ({commit}), copied whole. TileLang is MIT-licensed (Copyright (c) Tile-AI).",
        "# Edits: its imports only (python/tests/tilelang_scripts/copy_script.py):",
        *(f"#   {e}" for e in dict.fromkeys(edits)),
        "# Run on a GPU with its own main(): scripts/gpu-scripts.sh; on the CPU:",
        "# python/tests/test_tilelang_scripts.py.",
    ]
    out = Path(__file__).resolve().parent / Path(rel).name
    out.write_text("\n".join(header) + "\n" + new, encoding="utf-8")
    print(out)


if __name__ == "__main__":
    main()
