//! Codegen of the TMA path (sm_90a): the mbarrier intrinsics and `T.tma_load` become their
//! PTX instructions, every distinct (source tensor, box, swizzle) of a function becomes one
//! 128-byte tensor map parameter after the dims — in first-use order, in every entry — and
//! one `tensor_maps` entry of the manifest (version 3) in the same order, which the runtime
//! reads back and encodes in that order. Each PTX is assembled by ptxas for sm_90a. (The GPU
//! run is `scripts/gpu-check.sh`: `tests/cases/valid/tma_tile_copy.tir`.)

use crate::common;

use common::emit::{assemble, emit, parse};
use common::{text, tlc};
use tlc::driver::source_to_ptx;
use tlc_ir::{BufferDecl, Ident, Intrinsic, Scope, StmtKind, Target};
use tlc_runtime::manifest::{OobFill, Swizzle, TensorMapDesc};
use tlc_runtime::tensor_map::map_args;
use tlc_runtime::Manifest;

const CASE: &str = "tests/cases/valid/tma_tile_copy.tir";

fn desc(param: &str, box_dims: &[u32], swizzle: Swizzle) -> TensorMapDesc {
    TensorMapDesc {
        param: param.to_string(),
        box_dims: box_dims.to_vec(),
        swizzle,
        fill: OobFill::Zero,
    }
}

/// The instruction lines of `ptx` (no labels, directives or comments), trimmed.
fn instructions(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .map(str::trim)
        .filter(|l| l.ends_with(';') && !l.starts_with('.') && !l.starts_with("//"))
        .collect()
}

/// The line that defines register `reg` (its first instruction writing it).
fn definition<'a>(ptx: &'a str, reg: &str) -> &'a str {
    instructions(ptx)
        .into_iter()
        .find(|l| {
            l.split_once(char::is_whitespace)
                .is_some_and(|(_, ops)| ops.trim_start().starts_with(&format!("{reg},")))
        })
        .unwrap_or_else(|| panic!("no definition of {reg}"))
}

/// The `.param` lines of entry `entry`, in order.
fn params<'a>(ptx: &'a str, entry: &str) -> Vec<&'a str> {
    let head = format!(".visible .entry {entry}(");
    let start = ptx
        .find(&head)
        .unwrap_or_else(|| panic!("no entry {entry}"));
    ptx[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with(')'))
        .map(|l| l.trim().trim_end_matches(','))
        .collect()
}

/// The body of entry `entry`.
fn body<'a>(ptx: &'a str, entry: &str) -> &'a str {
    let head = format!(".visible .entry {entry}(");
    let start = ptx
        .find(&head)
        .unwrap_or_else(|| panic!("no entry {entry}"));
    let rest = &ptx[start..];
    let end = rest.find("\n}\n").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

/// For each `cp.async.bulk.tensor` of `body`, in order: the tensor map symbol its map
/// register was made from (`mov.u64 %rdA, SYM; cvta.param.u64 %rdB, %rdA`) and its
/// coordinate registers (innermost first).
fn tma_sites(body: &str) -> Vec<(String, Vec<String>)> {
    instructions(body)
        .into_iter()
        .filter(|l| l.starts_with("cp.async.bulk.tensor"))
        .map(|l| {
            let (_, after) = l.split_once("], [").expect("a map operand");
            let (map, rest) = after.split_once(", {").expect("coordinates");
            let coords = rest.split_once('}').expect("closing brace").0;
            let cvta = definition(body, map);
            assert!(cvta.starts_with("cvta.param.u64"), "{cvta}");
            let param_reg = cvta.rsplit(", ").next().unwrap_or("").trim_end_matches(';');
            let mov = definition(body, param_reg);
            assert!(mov.starts_with("mov.u64"), "{mov}");
            let symbol = mov.rsplit(", ").next().unwrap_or("").trim_end_matches(';');
            (
                symbol.to_string(),
                coords.split(", ").map(str::to_string).collect(),
            )
        })
        .collect()
}

#[test]
fn the_tile_copy_case_lowers_every_hopper_intrinsic_and_assembles() {
    let out = tlc(&["compile", CASE, "--target", "sm_90a", "-o", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ptx = text(&out.stdout);
    assemble("codegen_tma", &ptx, "tma_tile_copy", "sm_90a");

    // PTX 8.3 (the measured TMA kernel's ISA); the map is the last parameter.
    assert!(ptx.contains("\n.version 8.3\n"), "{ptx}");
    assert_eq!(
        params(&ptx, "tma_tile_copy"),
        [
            ".param .u64 tma_tile_copy_param_A",
            ".param .u64 tma_tile_copy_param_B",
            ".param .align 64 .b8 tma_tile_copy_tmap0[128]",
        ]
    );
    // The arena is aligned for the 128-byte swizzle.
    assert!(
        ptx.contains(".extern .shared .align 1024 .b8 smem[];"),
        "{ptx}"
    );

    let lines = instructions(&ptx);
    let has = |prefix: &str| lines.iter().any(|l| l.starts_with(prefix));
    assert!(has("mbarrier.init.shared::cta.b64 \t["), "{ptx}");
    assert!(lines.iter().any(|l| l
        .starts_with("mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [")
        && l.ends_with("], 4096;")));
    assert!(has("fence.proxy.async.shared::cta"));
    assert!(has("bar.sync \t0"));

    // The wait is a loop: label, try_wait, branch back while it has not completed.
    let all: Vec<&str> = ptx.lines().map(str::trim).collect();
    let at = all
        .iter()
        .position(|l| l.starts_with("mbarrier.try_wait.parity.shared::cta.b64"))
        .expect("a try_wait");
    let label = all[at - 1].trim_end_matches(':');
    assert!(label.starts_with("$L__mbar_wait_"), "{}", all[at - 1]);
    assert!(
        all[at].ends_with("], 0;"),
        "the constant parity: {}",
        all[at]
    );
    let pred = all[at]
        .split_once('\t')
        .and_then(|(_, ops)| ops.split(',').next())
        .expect("a predicate");
    assert_eq!(all[at + 1], format!("@!{pred} bra \t{label};"));

    // The load: through the generic address of tmap0, box origin (row 32·bx, column 0)
    // given innermost first: the column, then the row.
    let sites = tma_sites(&ptx);
    assert_eq!(sites.len(), 1);
    let (symbol, coords) = &sites[0];
    assert_eq!(symbol, "tma_tile_copy_tmap0");
    assert_eq!(coords.len(), 2);
    assert!(
        definition(&ptx, &coords[0]).starts_with("mov.s32"),
        "the column is 0: {}",
        definition(&ptx, &coords[0])
    );
    assert!(
        definition(&ptx, &coords[1]).starts_with("mul.lo.s32")
            && definition(&ptx, &coords[1]).ends_with(", 32;"),
        "the row is bx * 32: {}",
        definition(&ptx, &coords[1])
    );
    assert!(lines.iter().any(|l| l.starts_with(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \t["
    )));

    // The manifest: version 3, one map of A with the box outermost first.
    let man = Manifest::from_ptx(&ptx).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(man.version(), 3);
    assert_eq!(man.tensor_maps, [desc("A", &[32, 64], Swizzle::B128)]);
    assert!(ptx.starts_with("// tlc-manifest: {\"version\":3,"));
}

#[test]
fn the_tile_copy_case_is_refused_on_sm_80_at_its_first_hopper_intrinsic() {
    let out = tlc(&["compile", CASE, "--target", "sm_80", "-o", "-"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with(&format!("{CASE}:18:17: error: ")), "{err}");
    assert!(
        err.contains("`T.mbarrier_init` needs a target with bulk tensor copies (TMA)"),
        "{err}"
    );
    assert!(
        err.contains("note: the target is sm_80; sm_90a has it"),
        "{err}"
    );
    // The input's fault, not a pass's.
    assert!(!err.contains("pass `"), "{err}");
}

/// Two kernels over three distinct maps (A's two boxes and B's), a symbolic dim, a run-time
/// parity and int64 coordinates. The maps are numbered in first use over the kernels in
/// program order: kernel 0 uses maps 0 and 1, kernel 1 maps 2 and 0.
const TWO_KERNELS: &str = r#"
M = T.symbolic("M")

@T.prim_func
def maps(
    A: T.Tensor((M, 64), "float16"),
    B: T.Tensor((4, 40, 32), "float32"),
    C: T.Tensor((M, 64), "float16"),
):
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        SA = T.alloc_shared((16, 64), "float16")
        SB = T.alloc_shared((2, 8, 32), "float32")
        bars = T.alloc_shared((2,), "int64")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            if tx == 0:
                T.mbarrier_init(bars[0], 1)
                T.mbarrier_init(bars[1], 64)
            T.sync_threads()
            for k in T.serial(2):
                if tx == 0:
                    T.mbarrier_arrive_expect_tx(bars[0], 4096)
                    T.tma_load(SA[0, 0], A[T.cast(bx, "int64") * 16, 0], bars[0], box=(16, 64), swizzle=128)
                    T.tma_load(SB[0, 0, 0], B[k, bx * 8 - 3, 0], bars[0], box=(2, 8, 32), swizzle=0)
                T.mbarrier_wait(bars[0], T.cast(k, "int64") % 2)
                C[bx * 16 + tx // 4, tx % 4 + k * 4] = SA[tx // 4, tx % 4] + T.cast(SB[1, tx % 8, tx // 8], "float16")
                T.mbarrier_arrive(bars[1])
                T.mbarrier_wait(bars[1], k)
    with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
        SA2 = T.alloc_shared((32, 64), "float16")
        SA3 = T.alloc_shared((16, 64), "float16")
        bar = T.alloc_shared((1,), "int64")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            if tx == 0:
                T.mbarrier_init(bar[0], 1)
            T.sync_threads()
            if tx == 0:
                T.mbarrier_arrive_expect_tx(bar[0], 6144)
                T.tma_load(SA2[0, 0], A[bx * 32, 0], bar[0], box=(32, 64), swizzle=0)
                T.tma_load(SA3[0, 0], A[bx * 32 + 16, 0], bar[0], box=(16, 64), swizzle=128)
            T.mbarrier_wait(bar[0], 0)
            C[bx * 32 + tx, 0] = SA2[tx, 1] + SA3[tx % 16, 2]
"#;

#[test]
fn tensor_maps_are_parameters_in_first_use_order_in_every_entry() {
    let ptx =
        source_to_ptx("maps.tir", TWO_KERNELS, Target::Sm90a).unwrap_or_else(|e| panic!("{}", e.0));
    assemble("codegen_tma", &ptx, "maps", "sm_90a");
    let man = Manifest::from_ptx(&ptx).unwrap_or_else(|e| panic!("{e}"));
    man.validate().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(man.version(), 3);
    let maps = [
        desc("A", &[16, 64], Swizzle::B128),
        desc("B", &[2, 8, 32], Swizzle::None),
        desc("A", &[32, 64], Swizzle::None),
    ];
    assert_eq!(man.tensor_maps, maps);

    // Every entry takes the tensors, the dim, then all three maps, used or not.
    for entry in ["maps_k0", "maps_k1"] {
        assert_eq!(
            params(&ptx, entry),
            [
                format!(".param .u64 {entry}_param_A"),
                format!(".param .u64 {entry}_param_B"),
                format!(".param .u64 {entry}_param_C"),
                format!(".param .u32 {entry}_param_M"),
                format!(".param .align 64 .b8 {entry}_tmap0[128]"),
                format!(".param .align 64 .b8 {entry}_tmap1[128]"),
                format!(".param .align 64 .b8 {entry}_tmap2[128]"),
            ]
        );
    }
    // Each load goes through the map of its (tensor, box, swizzle); a kernel takes the
    // address of the maps it uses only.
    let k0 = body(&ptx, "maps_k0");
    let k1 = body(&ptx, "maps_k1");
    let symbols = |b: &str| -> Vec<String> { tma_sites(b).into_iter().map(|(s, _)| s).collect() };
    assert_eq!(symbols(k0), ["maps_k0_tmap0", "maps_k0_tmap1"]);
    assert_eq!(symbols(k1), ["maps_k1_tmap2", "maps_k1_tmap0"]);
    let mentions = |b: &str, sym: &str| instructions(b).iter().any(|l| l.contains(sym));
    assert!(!mentions(k0, "maps_k0_tmap2") && !mentions(k1, "maps_k1_tmap1"));
    assert_eq!(k0.matches("cvta.param.u64").count(), 2);
    // Rank 3 for B, coordinates innermost first: column 0, row bx·8 − 3, plane k.
    assert!(k0.contains("cp.async.bulk.tensor.3d.shared::cluster.global.tile"));
    let b_coords = &tma_sites(k0)[1].1;
    assert_eq!(b_coords.len(), 3);
    assert!(definition(k0, &b_coords[0]).starts_with("mov.s32"));
    assert!(
        definition(k0, &b_coords[1]).starts_with("sub.s32"),
        "{}",
        definition(k0, &b_coords[1])
    );
    // The int64 row of A's origin is truncated to the .s32 the instruction takes.
    let a_coords = &tma_sites(k0)[0].1;
    assert!(
        definition(k0, &a_coords[1]).starts_with("cvt.s32.s64"),
        "{}",
        definition(k0, &a_coords[1])
    );
    // A run-time parity: its low bit, in a .b32 register.
    let waits: Vec<&str> = instructions(k0)
        .into_iter()
        .filter(|l| l.starts_with("mbarrier.try_wait.parity"))
        .collect();
    assert_eq!(waits.len(), 2);
    for w in waits {
        let parity = w.rsplit(", ").next().unwrap_or("").trim_end_matches(';');
        assert!(definition(k0, parity).starts_with("and.b32"), "{w}");
    }
    assert!(k0.contains("mbarrier.arrive.shared::cta.b64 \t_, ["));
    assert!(k0.contains("mbarrier.init.shared::cta.b64 \t[") && k0.contains("], 64;"));

    // The runtime encodes the maps in the manifest's order, which is the parameters':
    // map i of the launch is the box of the loads that use `_tmap<i>`.
    let (a, b, c): (&[usize], &[usize], &[usize]) = (&[100, 64], &[4, 40, 32], &[100, 64]);
    let args =
        map_args(&man, &[(a, 0x1000), (b, 0x8000), (c, 0x10000)]).unwrap_or_else(|e| panic!("{e}"));
    let encoded: Vec<(u64, Vec<u32>)> = args
        .iter()
        .map(|e| (e.address, e.box_dim.clone()))
        .collect();
    assert_eq!(
        encoded,
        [
            (0x1000, vec![64, 16]),
            (0x8000, vec![32, 8, 2]),
            (0x1000, vec![64, 32]),
        ]
    );
}

/// A kernel written at the planned level, whose arena the test edits.
const PLANNED: &str = r#"
@T.prim_func
def planned(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((16, 64), "float16")
        bars = T.alloc_shared((1,), "int64")
        T.shared_arena(bytes=3072, offsets={S: OFFSET, bars: 0})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            if tx == 0:
                T.mbarrier_init(bars[0], 1)
            T.sync_threads()
            if tx == 0:
                T.mbarrier_arrive_expect_tx(bars[0], 2048)
                T.tma_load(S[0, 0], A[0, 0], bars[0], box=(16, 64), swizzle=128)
            T.mbarrier_wait(bars[0], 0)
            B[tx] = S[0, tx]
"#;

#[test]
fn a_destination_off_the_swizzle_pattern_is_a_located_error() {
    let ok = parse(&PLANNED.replace("OFFSET", "1024"));
    assert!(emit(&ok, Target::Sm90a).is_ok());
    let src = PLANNED.replace("OFFSET", "512");
    let errs = emit(&parse(&src), Target::Sm90a).expect_err("a misaligned box is refused");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0]
            .message
            .contains("lies at shared byte 512 of the arena, not a multiple of 1024"),
        "{}",
        errs[0].message
    );
    assert_eq!(Some(errs[0].span.start), src.find("S[0, 0], A"));
}

#[test]
fn a_source_that_is_no_parameter_is_a_located_error() {
    // The parser makes every global buffer a parameter; an IR built otherwise (a global
    // allocation inside the kernel) has no argument to build a tensor map from. The
    // verifier refuses such IR ("only parameters are global"), so the driver never hands
    // it to code generation; this checks codegen's own refusal, its defense in depth, given
    // the facts of the function before the edit (the same kernel, threads and arena).
    let src = PLANNED.replace("OFFSET", "1024");
    let mut func = parse(&src);
    let facts = tlc_ir::verifier::verify(&func).expect("the unedited function verifies");
    assert!(emit(&func, Target::Sm90a).is_ok());
    let Some(StmtKind::Kernel(k)) = func.body.first_mut().map(|s| &mut s.kind) else {
        panic!("no kernel");
    };
    let mut global: BufferDecl = k.allocs[0].clone();
    global.name = Ident {
        name: "G".into(),
        span: global.name.span,
    };
    global.scope = Scope::Global;
    k.allocs.push(global);
    fn rename(body: &mut [tlc_ir::Stmt]) {
        for s in body {
            if let StmtKind::Intrinsic(Intrinsic::TmaLoad { src, .. }) = &mut s.kind {
                src.buffer.name = "G".into();
            }
            for child in tlc_ir::visit::child_bodies_mut(s) {
                rename(child);
            }
        }
    }
    rename(&mut k.body);
    let verifier = emit(&func, Target::Sm90a).expect_err("the verifier refuses it");
    assert!(
        verifier
            .iter()
            .any(|e| e.message.contains("only parameters are global")),
        "{verifier:?}"
    );
    let errs = tlc::codegen::emit(&func, &facts, Target::Sm90a).expect_err("refused");
    assert!(
        errs.iter().any(|e| e.message.contains(
            "`T.tma_load` reads `G` through a TMA tensor map, which the runtime builds for \
             tensor parameters only; `G` is not a parameter of `planned`"
        ) && Some(e.span.start) == src.find("A[0, 0], bars")),
        "{errs:?}"
    );
}

/// A kernel with `cluster_dims`: the entry declares its cluster (`.reqnctapercluster`, so a
/// plain launch is a cluster launch) and the manifest carries it; a multicast `T.tma_load`
/// takes a 16-bit CTA mask, a remote arrival maps the barrier's address into the target
/// block (`mapa`) and arrives at cluster scope, `T.cluster_sync()` is the arrive / wait
/// pair. In a cluster a block's shared addresses carry its rank above bit 23, so every
/// wgmma descriptor masks the start address to its 14-bit field (without the mask the
/// second block's LBO field was corrupted: wrong results on an H200); outside clusters the
/// descriptor is unchanged. Everything assembles for sm_90a; sm_80 refuses clusters.
#[test]
fn cluster_kernels_declare_their_cluster_and_assemble() {
    let out = tlc(&[
        "compile",
        "tests/cases/valid/cluster_multicast.tir",
        "--target",
        "sm_90a",
        "-o",
        "-",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ptx = text(&out.stdout);
    assemble("codegen_tma_cluster", &ptx, "cluster_multicast", "sm_90a");
    let manifest = Manifest::from_ptx(&ptx).expect("a manifest");
    assert_eq!(manifest.kernels[0].cluster, vec![2]);
    assert!(ptx.contains("\n.reqnctapercluster 2, 1, 1\n"), "{ptx}");
    let lines = instructions(&ptx);
    let multicast: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains(".multicast::cluster"))
        .collect();
    assert_eq!(multicast.len(), 1, "{ptx}");
    assert!(multicast[0].starts_with(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
    ));
    let mask = multicast[0]
        .rsplit(", ")
        .next()
        .unwrap_or("")
        .trim_end_matches(';');
    assert_eq!(definition(&ptx, mask), format!("mov.b16 \t{mask}, 3;"));
    let syncs: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("barrier.cluster."))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(syncs.len(), 4, "two T.cluster_sync: {ptx}");
    assert_eq!(lines[syncs[0]], "barrier.cluster.arrive.release.aligned;");
    assert_eq!(lines[syncs[1]], "barrier.cluster.wait.acquire.aligned;");
    assert_eq!(syncs[1], syncs[0] + 1);

    let gemm = |file: &str| {
        let out = tlc(&[
            "compile", file, "--target", "sm_90a", "-D", "M=264", "-D", "N=456", "-D", "K=320",
            "-o", "-",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let ptx = gemm("ir-spec/tests/data/ws_gemm_cluster.tir");
    assemble(
        "codegen_tma_cluster_gemm",
        &ptx,
        "ws_gemm_cluster",
        "sm_90a",
    );
    let lines = instructions(&ptx);
    let mapa: Vec<&&str> = lines.iter().filter(|l| l.starts_with("mapa.")).collect();
    assert_eq!(mapa.len(), 2, "{ptx}");
    assert!(mapa[0].starts_with("mapa.shared::cluster.u32 \t") && mapa[0].ends_with(", 0;"));
    assert!(mapa[1].ends_with(", 1;"));
    let arrives = lines
        .iter()
        .filter(|l| l.starts_with("mbarrier.arrive.shared::cluster.b64 \t_, [%r"))
        .count();
    assert_eq!(arrives, 2, "{ptx}");
    // Every descriptor's start field is masked to 14 bits in the cluster kernel, never in the
    // same kernel without a cluster.
    let masks = |ptx: &str| {
        instructions(ptx)
            .iter()
            .filter(|l| l.starts_with("and.b32") && l.ends_with(", 16383;"))
            .count()
    };
    assert!(masks(&ptx) >= 4, "{ptx}");
    let plain = gemm("ir-spec/tests/data/ws_gemm_2c.tir");
    assert_eq!(masks(&plain), 0);
    assert!(!plain.contains(".reqnctapercluster"));

    let out = tlc(&[
        "compile",
        "tests/cases/valid/cluster_multicast.tir",
        "--target",
        "sm_80",
        "-o",
        "-",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("a cluster of 2 blocks is more than the target allows (1)"),
        "{err}"
    );
    assert!(err.contains("thread-block clusters need sm_90a"), "{err}");
}
