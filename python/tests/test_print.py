"""`T.print` from Python (docs/ir.md, "Printing"): a kernel written in Python prints through
`vprintf` in its PTX, and the interpreter prints the same lines to standard output."""

import numpy as np

import tlc
import tlc.language as T


def test_the_interpreter_prints_what_the_kernel_prints(capfd):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            S = T.alloc_shared((4,), "float32")
            T.copy(A, S)
            if bx == 1:
                T.print(S, msg="S")
            T.print(bx + 1)

    k = tlc.compile(main, target="sm_80")
    assert k.ptx.count("vprintf, (vprintf_p0, vprintf_p1)") == 2
    tlc.interpret(k, np.array([0.5, -1.25, 3.0, 1e9], np.float32))
    lines = capfd.readouterr().out.splitlines()
    head = "BlockIdx=({}, 0, 0), ThreadIdx=({}, 0, 0)"
    want = [f"msg='expr<bx + 1>' {head.format(0, t)}: dtype=int32 value=1" for t in range(32)]
    want += [
        f"msg='S' {head.format(1, 0)}: buffer=S, index={i}, dtype=float32 value={v}"
        for i, v in enumerate(["0.500000", "-1.250000", "3.000000", "1000000000.000000"])
    ]
    want += [f"msg='expr<bx + 1>' {head.format(1, t)}: dtype=int32 value=2" for t in range(32)]
    assert lines == want


def test_tilelangs_spelling_reads_the_same():
    # A script imports `tlc.tilelang.language as T`: the same `T.print`.
    import tlc.tilelang.language as T  # noqa: F811

    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.print(msg="hello")

    assert "T.print_msg(msg=\"hello\")" in tlc.compile(main, target="sm_90a").ir("input")
