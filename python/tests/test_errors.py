"""Compiler errors are `tlc.CompileError`s whose message is the rendered diagnostic."""

import pytest

import tlc

BAD = """@T.prim_func
def f(A: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            A[i] = B[i]
"""


def test_an_error_is_located_with_a_caret():
    with pytest.raises(tlc.CompileError) as e:
        tlc.compile(BAD)
    lines = str(e.value).splitlines()
    assert lines[0].startswith("<string>:5:20: error: "), lines[0]
    source = next(l for l in lines if l.endswith("A[i] = B[i]"))
    caret = next(l for l in lines if l.rstrip().endswith("^"))
    assert caret.index("^") == source.index("B[i]")
    assert "cannot find buffer `B`" in lines[0]


def test_a_file_error_names_the_file(repo):
    path = repo / "tests/cases/malformed/bad_dtype.tir"
    with pytest.raises(tlc.CompileError) as e:
        tlc.compile(path)
    assert str(e.value).startswith(f"{path}:"), str(e.value)
    assert ": error: " in str(e.value).splitlines()[0]


def test_a_missing_file_and_an_unknown_target_are_errors(repo):
    with pytest.raises(tlc.CompileError, match="cannot read file"):
        tlc.compile(repo / "no/such/kernel.tir")
    with pytest.raises(tlc.CompileError, match="unknown target"):
        tlc.compile(repo / "examples/elementwise_add.tir", target="sm_70")


def test_an_unbindable_dim_is_a_compile_error(repo):
    with pytest.raises(tlc.CompileError, match="Q"):
        tlc.compile(repo / "examples/elementwise_add.tir", Q=4)
