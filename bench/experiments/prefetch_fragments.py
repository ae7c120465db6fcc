#!/usr/bin/env python3
"""Hand experiment of docs/perf.md ("Experiments on the sm_80 path"): fragment prefetch
across the barrier, applied to the text of a GEMM kernel at the thread level.

Input: `tlc compile KERNEL --stop-after=thread-binding --emit=tir` of a kernel whose
pipelined loop has the shape the sm_80 pipeline gives it today:

    for ko in T.serial(n):
        T.cp_async_wait(w); T.sync_threads()
        <cp.async issue of stage ko + S - 1>; T.cp_async_commit()
        for kk in T.unroll(KK):
            <ldmatrix loops (mt, np)>  <mma loops (mt_1, nt)>

Output: the loop rotated as CUTLASS's multistage main loop is, with the fragment arrays
doubled (set kk % 2):

    wait; sync; ldmatrix (stage 0, kk 0 -> set 0)
    for ko in T.serial(n):
        <cp.async issue>; commit
        for kk < KK - 1: ldmatrix (stage ko % S, kk + 1 -> set (kk + 1) % 2); mma (set kk % 2)
        wait; sync; ldmatrix (stage min(ko + 1, n - 1) % S, kk 0 -> set KK % 2); mma (set (KK - 1) % 2)

The result is ordinary thread-level text: `tlc run --interp` checks it (cp.async landing,
shared races) against the original, and `tlc compile` / `tlc bench` take it as it is.
It is a measurement tool, not a pass: it matches the text of this one loop shape.

    prefetch_fragments.py IN.tir OUT.tir
"""
import re
import sys


def indent_of(line):
    return line[: len(line) - len(line.lstrip())]


def main(src_path, out_path):
    src = open(src_path).read().split("\n")
    text = "\n".join(src)
    ko_i = next(i for i, l in enumerate(src) if "for ko in T.serial(" in l)
    n = int(re.search(r"T.serial\((\d+)\)", src[ko_i]).group(1))
    outer = indent_of(src[ko_i])
    wait, sync = src[ko_i + 1].strip(), src[ko_i + 2].strip()
    assert wait.startswith("T.cp_async_wait(") and sync == "T.sync_threads()", "unexpected loop head"
    kk_i = next(i for i in range(ko_i, len(src)) if "for kk in T.unroll(" in src[i])
    kk_count = int(re.search(r"T.unroll\((\d+)\)", src[kk_i]).group(1))
    # The next iteration's first step reads set 0, which the last step fills: KK even.
    assert kk_count % 2 == 0, f"K tile of {16 * kk_count}: the rotation needs an even number of K16 steps"
    body = indent_of(src[kk_i])
    copy = src[ko_i + 3 : kk_i]
    end = kk_i + 1
    while end < len(src) and src[end].startswith(body + " "):
        end += 1
    step = src[kk_i + 1 : end]
    split = next(k for k, l in enumerate(step) if "for mt_1 in" in l)
    loads, mmas = step[:split], step[split:]
    stages = int(re.search(r"A_shared = T.alloc_shared\(\((\d+),", text).group(1))
    frag_a = int(re.search(r"A_shared_frag = T.alloc_local\(\((\d+),", text).group(1))
    frag_b = int(re.search(r"B_shared_frag = T.alloc_local\(\((\d+),", text).group(1))
    inner = body + "    "

    def moved(lines, to):
        return [to + l[len(inner) :] for l in lines]

    def load(kk, stage, s):
        out = []
        for l in loads:
            l = re.sub(r"\bkk\b", str(kk), l).replace(f"ko % {stages}", stage)
            l = l.replace("A_shared_frag[mt * 8]", f"A_shared_frag[{s * frag_a} + mt * 8]")
            l = l.replace("B_shared_frag[np * 8]", f"B_shared_frag[{s * frag_b} + np * 8]")
            out.append(l)
        return out

    def mma(s):
        return [
            l.replace("A_shared_frag[mt_1 * 8]", f"A_shared_frag[{s * frag_a} + mt_1 * 8]")
            .replace("B_shared_frag[nt * 4]", f"B_shared_frag[{s * frag_b} + nt * 4]")
            for l in mmas
        ]

    new = src[:ko_i] + [outer + wait, outer + sync] + moved(load(0, "0", 0), outer)
    new += [src[ko_i]] + copy
    for kk in range(kk_count):
        nxt = (kk + 1) % 2
        if kk < kk_count - 1:
            new += moved(load(kk + 1, f"ko % {stages}", nxt), body)
        else:
            new += [body + wait, body + sync]
            new += moved(load(0, f"T.min(ko + 1, {n - 1}) % {stages}", nxt), body)
        new += moved(mma(kk % 2), body)
    new += src[end:]
    out = "\n".join(new)
    out = out.replace(f"A_shared_frag = T.alloc_local(({frag_a},)", f"A_shared_frag = T.alloc_local(({2 * frag_a},)")
    out = out.replace(f"B_shared_frag = T.alloc_local(({frag_b},)", f"B_shared_frag = T.alloc_local(({2 * frag_b},)")
    open(out_path, "w").write(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
