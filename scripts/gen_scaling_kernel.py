#!/usr/bin/env python3
"""Writes a kernel of N statements for scripts/compile_scaling.sh (a measurement of compile
time against kernel size, docs/perf.md "Compile time"; never a timed test).

Kinds (each statement depends on the one before, so nothing is dead):
  parallel   N elementwise `T.Parallel` loops over one 256-wide tile of C
  scalar     N per-thread scalar statements on a local array (thread-level code)
  pipelined  a GEMM whose `T.Pipelined` body has its copies, its gemm and N elementwise
             `T.Parallel` updates of the B tile in shared memory
  buffers    N small shared buffers, each filled from A by one `T.Parallel` loop and read
             back into C by another (per-buffer analyses over the whole kernel)
Usage: gen_scaling_kernel.py KIND N > kernel.tir
"""
import sys


def parallel(n):
    out = [
        "N = T.symbolic(\"N\")",
        "",
        "@T.prim_func",
        "def scale_parallel(",
        "    A: T.Tensor((N,), \"float32\"),",
        "    C: T.Tensor((N,), \"float32\"),",
        "):",
        "    with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:",
    ]
    for k in range(n):
        out.append("        for i in T.Parallel(256):")
        out.append("            if bx * 256 + i < N:")
        src = "A" if k == 0 else "C"
        out.append(
            f"                C[bx * 256 + i] = {src}[bx * 256 + i] * 0.5 + {k % 7}.0"
        )
    return out


def scalar(n):
    out = [
        "@T.prim_func",
        "def scale_scalar(",
        "    A: T.Tensor((1024,), \"float32\"),",
        "    C: T.Tensor((1024,), \"float32\"),",
        "):",
        "    with T.Kernel(4, threads=256) as bx:",
        "        acc = T.alloc_local((4,), \"float32\")",
        "        tx = T.get_thread_binding()",
        "        for u in T.serial(4):",
        "            acc[u] = A[bx * 256 + tx]",
    ]
    for k in range(n):
        out.append(
            f"        acc[{k % 4}] = acc[{(k + 1) % 4}] * 0.5 + acc[{k % 4}] + {k % 5}.0"
        )
    out.append("        C[bx * 256 + tx] = acc[0] + acc[1] + acc[2] + acc[3]")
    return out


def pipelined(n):
    out = [
        "@T.prim_func",
        "def scale_pipelined(",
        "    A: T.Tensor((1024, 1024), \"float16\"),",
        "    B: T.Tensor((1024, 1024), \"float16\"),",
        "    C: T.Tensor((1024, 1024), \"float16\"),",
        "):",
        "    with T.Kernel(8, 8, threads=128) as (bx, by):",
        "        A_shared = T.alloc_shared((128, 32), \"float16\")",
        "        B_shared = T.alloc_shared((32, 128), \"float16\")",
        "        C_local = T.alloc_fragment((128, 128), \"float\")",
        "        T.clear(C_local)",
        "        for ko in T.Pipelined(32, num_stages=3):",
        "            T.copy(A[by * 128, ko * 32], A_shared)",
        "            T.copy(B[ko * 32, bx * 128], B_shared)",
    ]
    for k in range(n):
        out.append("            for k, j in T.Parallel(32, 128):")
        out.append(f"                B_shared[k, j] = B_shared[k, j] * T.float16({1 + k % 3})")
    out.append("            T.gemm(A_shared, B_shared, C_local)")
    out.append("        T.copy(C_local, C[by * 128, bx * 128])")
    return out


def buffers(n):
    out = [
        "@T.prim_func",
        "def scale_buffers(",
        "    A: T.Tensor((4,), \"float32\"),",
        "    C: T.Tensor((4,), \"float32\"),",
        "):",
        "    with T.Kernel(1, threads=4) as bx:",
    ]
    out += [f"        S{k} = T.alloc_shared((4,), \"float32\")" for k in range(n)]
    for k in range(n):
        src = "A" if k == 0 else f"S{k - 1}"
        out.append("        for i in T.Parallel(4):")
        out.append(f"            S{k}[i] = {src}[i] * 0.5")
    out.append("        for i in T.Parallel(4):")
    out.append(f"            C[i] = S{n - 1}[i]")
    return out


def main():
    kinds = {
        "parallel": parallel,
        "scalar": scalar,
        "pipelined": pipelined,
        "buffers": buffers,
    }
    if len(sys.argv) != 3 or sys.argv[1] not in kinds or not sys.argv[2].isdigit():
        sys.exit(__doc__)
    print("\n".join(kinds[sys.argv[1]](int(sys.argv[2]))))


main()
