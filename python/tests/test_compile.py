"""`tlc.compile`: PTX, manifest and the text of every stage, as the CLI writes them."""

import json
import subprocess

import pytest

import tlc


def test_compile_a_file_gives_ptx_and_its_manifest(repo):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    assert k.target == "sm_80"
    first, rest = k.ptx.split("\n", 1)
    # The manifest line heads the PTX (docs/manifest.md), and `manifest` is that JSON.
    assert first.startswith("// tlc-manifest: ")
    assert json.loads(first[len("// tlc-manifest: ") :]) == k.manifest
    assert ".visible .entry elementwise_add" in rest
    assert k.params == ["A", "B", "C"]
    assert repr(k) == "<tlc.Kernel elementwise_add for sm_80>"
    assert [p["dtype"] for p in k.manifest["params"]] == ["float32"] * 3
    assert [d["name"] for d in k.manifest["dims"]] == ["N"]


def test_an_int4_gemm_takes_its_packed_bytes(repo):
    """int4 compiles through `pack-int4`: the kernel's parameters are the int8 tensors of
    the int4 ones' bytes (two to a byte, K halved), what a caller passes from PyTorch."""
    k = tlc.compile(repo / "tests/tilelang/gemm_int4.tir", target="sm_80", M=256, N=128, K=512)
    params = {p["name"]: p for p in k.manifest["params"]}
    assert params["A"]["dtype"] == "int8" and params["B"]["dtype"] == "int8"
    assert params["A"]["shape"] == [{"int": 256}, {"int": 256}]
    assert params["C"]["dtype"] == "int32"
    assert "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32" in k.ptx
    with pytest.raises(tlc.CompileError, match="give its value with -D"):
        tlc.compile(repo / "tests/tilelang/gemm_int4.tir", target="sm_80")


def test_source_text_and_path_strings_compile_alike(repo):
    path = repo / "examples/elementwise_add.tir"
    from_path = tlc.compile(str(path), target="sm_90a")
    from_text = tlc.compile(path.read_text(), target="sm_90a")
    assert from_text.ptx == from_path.ptx
    assert from_path.target == "sm_90a"


def test_dims_bind_like_dash_d(repo):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80", N=4096)
    assert k.manifest["dims"] == []
    assert k.manifest["params"][0]["shape"] == [{"int": 4096}]


def test_the_ptx_is_what_the_cli_writes(repo, tmp_path):
    """One compiler: the wheel's PTX is byte for byte `tlc compile`'s (when the CLI is
    built; CI builds it before these tests)."""
    cli = repo / "target/debug/tlc"
    if not cli.exists():
        pytest.skip("target/debug/tlc is not built")
    out = tmp_path / "k.ptx"
    src = repo / "examples/scale_cast.tir"
    subprocess.run(
        [str(cli), "compile", str(src), "--target", "sm_90a", "-D", "M=256", "-o", str(out)],
        check=True,
    )
    assert tlc.compile(src, target="sm_90a", M=256).ptx == out.read_text()


def test_every_stage_prints_and_passes_change_the_ir(repo):
    k = tlc.compile(repo / "examples/scale_cast.tir", target="sm_90a")
    stages = k.stages
    assert stages[0] == "input" and stages[-1] == "ptx" and len(stages) > 4
    texts = {s: k.ir(s) for s in stages}
    assert texts["ptx"] == k.ptx
    assert "def scale_cast" in texts["input"]
    for s in stages[1:-1]:
        assert "scale_cast" in texts[s], s
    # The pipeline lowers the tile ops: the last pass's IR differs from the input.
    assert texts[stages[-2]] != texts["input"]


def test_a_stage_matches_stop_after(repo, tmp_path):
    cli = repo / "target/debug/tlc"
    if not cli.exists():
        pytest.skip("target/debug/tlc is not built")
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    stage = k.stages[2]
    out = subprocess.run(
        [str(cli), "compile", str(repo / "examples/elementwise_add.tir"), "--target", "sm_80",
         f"--stop-after={stage}", "-o", "-"],
        check=True, capture_output=True, text=True,
    )
    assert k.ir(stage) == out.stdout


def test_an_unknown_stage_lists_the_stages(repo):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    with pytest.raises(ValueError) as e:
        k.ir("no-such-pass")
    assert "unknown stage `no-such-pass`" in str(e.value)
    assert "input, " in str(e.value) and str(e.value).endswith(", ptx")


def test_plan_ranks_the_tuning_space_without_a_gpu(repo):
    ranking = tlc.plan(repo / "bench/gemm_tunable.tir", target="sm_90a", sms=132,
                       M=4096, N=4096, K=4096)
    assert ranking["sms"] == 132 and ranking["target"] == "sm_90a"
    ranked = ranking["ranked"]
    assert [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    assert len(ranked) + len(ranking["dropped"]) == 36  # the space's size (bench/gemm_tunable.tir)
    tunables = {"threads", "block_M", "block_N", "block_K", "num_stages"}
    assert all(set(r["config"]) == tunables for r in ranked)
    estimates = [r["estimate_ns"] for r in ranked]
    assert estimates == sorted(estimates)


def test_tune_without_a_gpu_says_it_needs_one(repo):
    if tlc.driver_available():
        pytest.skip("a CUDA driver is present")
    with pytest.raises(tlc.CompileError, match="`tlc tune` needs a GPU"):
        tlc.tune(repo / "bench/gemm_tunable.tir", M=256, N=256, K=256)


def test_scalar_parameters_are_dims_the_caller_passes_in_place(repo):
    k = tlc.compile(repo / "tests/cases/valid/scalar_params.tir", target="sm_80")
    assert k.params == ["X", "Y"]
    dims = {d["name"]: d.get("arg") for d in k.manifest["dims"]}
    assert dims == {"M": None, "limit": 1, "scale": 3}
    # A call's places: X, limit, Y, scale — the ints become dims, the rest the tensors.
    x, y = object(), object()
    tensors, given = k._split_scalars((x, 20, y, 3), {})
    assert tensors == (x, y) and given == {"limit": 20, "scale": 3}
    # With a scalar given by name, all are by name: the arguments are the tensors (a call
    # with scalars in place too then fails the count check, naming the parameters).
    assert k._split_scalars((x, y), {"limit": 20}) == ((x, y), {"limit": 20})
    assert k._split_scalars((x, 20, y, 3), {"limit": 21}) == ((x, 20, y, 3), {"limit": 21})
    with pytest.raises(TypeError, match="kernel takes 2 tensors"):
        k(x, 20, y, 3, limit=21)
    # With out_idx (tensor indices): the inputs with the scalars at their places.
    k_out = tlc.compile(repo / "tests/cases/valid/scalar_params.tir", target="sm_80", out_idx=[1])
    assert k_out._split_scalars((x, 20, 3), {}) == ((x,), {"limit": 20, "scale": 3})
    # Bound like -D, a scalar parameter leaves the signature.
    bound = tlc.compile(repo / "tests/cases/valid/scalar_params.tir", target="sm_80", limit=7)
    assert [d["name"] for d in bound.manifest["dims"]] == ["M", "scale"]
    assert bound.manifest["dims"][1]["arg"] == 2
