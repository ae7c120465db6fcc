//! Kernels written with the PTX AST's `KernelBuilder`, one per feature codegen needs: each
//! returns its launch manifest and a module for the requested target. `tests/ptxas.rs`
//! snapshots them and assembles them with ptxas.

use tlc::ptx::*;
use tlc_abi::manifest::Manifest;

/// A named test kernel: its manifest (for `target`) and module.
pub struct Case {
    pub name: &'static str,
    pub build: fn(Target) -> (Manifest, Module),
}

pub const CASES: &[Case] = &[
    Case {
        name: "vadd_f32_tail",
        build: vadd_f32_tail,
    },
    Case {
        name: "saxpy_grid_stride",
        build: saxpy_grid_stride,
    },
    Case {
        name: "transpose_smem",
        build: transpose_smem,
    },
    Case {
        name: "scale_v4",
        build: scale_v4,
    },
    Case {
        name: "cast_f16_bf16",
        build: cast_f16_bf16,
    },
    Case {
        name: "index64",
        build: index64,
    },
    Case {
        name: "mma_ldmatrix_cp_async",
        build: mma_ldmatrix_cp_async,
    },
];

fn manifest(target: Target, json_without_target: &str) -> Manifest {
    let json = json_without_target.replacen(
        "{",
        &format!("{{\"version\":1,\"target\":\"{}\",", target.name()),
        1,
    );
    match Manifest::from_json(&json) {
        Ok(m) => m,
        Err(e) => panic!("test manifest does not parse: {e}\n{json}"),
    }
}

fn module(target: Target, k: KernelBuilder) -> Module {
    Module::new(target).with_kernel(k.finish())
}

/// `tid + ctaid * ntid` in x, as u32.
fn global_thread_x(k: &mut KernelBuilder) -> Reg {
    let bid = k.special(SpecialReg::CtaidX);
    let bdim = k.special(SpecialReg::NtidX);
    let tid = k.special(SpecialReg::TidX);
    k.mad(MulMode::Lo, Type::S32, bid, bdim, tid)
}

/// `base + index * elem_bytes` with a 32-bit unsigned index (`mul.wide.u32` + `add.s64`; a
/// byte index is widened with `cvt.u64.u32`).
fn elem_addr(k: &mut KernelBuilder, base: Reg, index: Reg, elem_bytes: u32) -> Address {
    let off = if elem_bytes == 1 {
        k.cvt(Type::U64, Type::U32, index)
    } else {
        k.mul_wide(Type::U32, index, elem_bytes)
    };
    Address::reg(k.add(Type::S64, base, off))
}

/// C = A + B over a ragged N: threads past N branch to the end.
pub fn vadd_f32_tail(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"vadd","params":[
            {"name":"A","dtype":"float32","shape":[{"dim":"N"}],"access":"read"},
            {"name":"B","dtype":"float32","shape":[{"dim":"N"}],"access":"read"},
            {"name":"C","dtype":"float32","shape":[{"dim":"N"}],"access":"write"}],
            "dims":[{"name":"N","dtype":"int32"}],
            "grid":[{"op":"ceildiv","args":[{"dim":"N"},{"int":256}]}],"block":[256],
            "shared_bytes":{"int":0}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    k.reqntid([256, 1, 1]);
    let a = k.global_ptr(&t[0]);
    let b = k.global_ptr(&t[1]);
    let c = k.global_ptr(&t[2]);
    let n = k.ld_param(&d[0]);
    let i = global_thread_x(&mut k);
    let done = k.label("done");
    k.comment("ragged edge: threads past N do nothing");
    let out = k.setp(Cmp::Ge, Type::U32, i, n);
    k.bra_if(Guard::when(out), &done);
    let pa = elem_addr(&mut k, a, i, 4);
    let pb = elem_addr(&mut k, b, i, 4);
    let pc = elem_addr(&mut k, c, i, 4);
    let x = k.ld(Space::Global, Type::F32, pa);
    let y = k.ld(Space::Global, Type::F32, pb);
    let s = k.float(FloatOp::Add, Type::F32, x, y);
    k.st(Space::Global, Type::F32, pc, vec![s.into()]);
    k.place(&done);
    k.ret();
    (m, module(target, k))
}

/// Y = 2.5 * X + Y with a grid-stride loop (i += ntid * nctaid while i < N).
pub fn saxpy_grid_stride(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"saxpy","params":[
            {"name":"X","dtype":"float32","shape":[{"dim":"N"}],"access":"read"},
            {"name":"Y","dtype":"float32","shape":[{"dim":"N"}],"access":"readwrite"}],
            "dims":[{"name":"N","dtype":"int32"}],
            "grid":[{"int":132}],"block":[128],"shared_bytes":{"int":0}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    let x = k.global_ptr(&t[0]);
    let y = k.global_ptr(&t[1]);
    let n = k.ld_param(&d[0]);
    let i = global_thread_x(&mut k);
    let ntid = k.special(SpecialReg::NtidX);
    let nctaid = k.special(SpecialReg::NctaidX);
    let stride = k.int(IntOp::Mul(MulMode::Lo), Type::U32, ntid, nctaid);
    let (top, done) = (k.label("loop"), k.label("done"));
    let empty = k.setp(Cmp::Ge, Type::U32, i, n);
    k.bra_if(Guard::when(empty), &done);
    k.place(&top);
    let px = elem_addr(&mut k, x, i, 4);
    let py = elem_addr(&mut k, y, i, 4);
    let vx = k.ld(Space::Global, Type::F32, px);
    let vy = k.ld(Space::Global, Type::F32, py.clone());
    let r = k.fma(Type::F32, vx, 2.5f32, vy);
    k.st(Space::Global, Type::F32, py, vec![r.into()]);
    // The induction variable is updated in place: registers are virtual, not SSA.
    k.emit(Op::Int {
        op: IntOp::Add,
        ty: Type::U32,
        dst: i,
        a: i.into(),
        b: stride.into(),
    });
    let more = k.setp(Cmp::Lt, Type::U32, i, n);
    k.bra_if(Guard::when(more), &top);
    k.place(&done);
    k.ret();
    (m, module(target, k))
}

/// OUT[N, M] = IN[M, N]ᵀ through a padded 32x33 shared tile; block 32x8, each thread moves
/// 4 elements; loads and stores outside the matrix are predicated off.
pub fn transpose_smem(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"transpose","params":[
            {"name":"IN","dtype":"float32","shape":[{"dim":"M"},{"dim":"N"}],"access":"read"},
            {"name":"OUT","dtype":"float32","shape":[{"dim":"N"},{"dim":"M"}],"access":"write"}],
            "dims":[{"name":"M","dtype":"int32"},{"name":"N","dtype":"int32"}],
            "grid":[{"op":"ceildiv","args":[{"dim":"N"},{"int":32}]},
                    {"op":"ceildiv","args":[{"dim":"M"},{"int":32}]}],
            "block":[32,8],"shared_bytes":{"int":4224}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    k.reqntid([32, 8, 1]);
    let smem = k.dynamic_shared("smem", 16);
    let src = k.global_ptr(&t[0]);
    let dst = k.global_ptr(&t[1]);
    let rows = k.ld_param(&d[0]);
    let cols = k.ld_param(&d[1]);
    let tx = k.special(SpecialReg::TidX);
    let ty = k.special(SpecialReg::TidY);
    let bx = k.special(SpecialReg::CtaidX);
    let by = k.special(SpecialReg::CtaidY);
    let tile = k.mov(Type::U32, Operand::Symbol(smem));
    let col = k.mad(MulMode::Lo, Type::S32, bx, 32, tx);
    let row0 = k.mad(MulMode::Lo, Type::S32, by, 32, ty);
    // Shared offsets are 32-bit: the tile is addressed as tile + (r * 33 + c) * 4.
    let srow = k.mad(MulMode::Lo, Type::S32, ty, 33, tx);
    let sbase = k.mad(MulMode::Lo, Type::S32, srow, 4, tile);
    for j in 0..4 {
        k.comment(&format!("load row ty + {}", 8 * j));
        let row = if j == 0 {
            row0
        } else {
            k.add(Type::S32, row0, 8 * j)
        };
        let row_ok = k.setp(Cmp::Lt, Type::S32, row, rows);
        let ok = k.setp_combined(
            Cmp::Lt,
            BoolOp::And,
            Type::S32,
            col,
            cols,
            Guard::when(row_ok),
        );
        let idx = k.mad(MulMode::Lo, Type::S32, row, cols, col);
        let off = k.mul_wide(Type::S32, idx, 4);
        let addr = k.add(Type::S64, src, off);
        let v = k.new_reg(Type::F32);
        k.emit_guarded(
            Guard::when(ok),
            Op::Ld {
                space: Space::Global,
                nc: true,
                ty: Type::F32,
                dsts: vec![v],
                addr: Address::reg(addr),
            },
        );
        k.emit_guarded(
            Guard::when(ok),
            Op::St {
                space: Space::Shared,
                ty: Type::F32,
                addr: Address::reg(sbase).offset(i64::from(8 * 33 * 4 * j)),
                srcs: vec![v.into()],
            },
        );
    }
    k.bar_sync();
    let ocol = k.mad(MulMode::Lo, Type::S32, by, 32, tx);
    let orow0 = k.mad(MulMode::Lo, Type::S32, bx, 32, ty);
    // Read the tile transposed: element (tx, ty + 8j).
    let trow = k.mad(MulMode::Lo, Type::S32, tx, 33, ty);
    let tbase = k.mad(MulMode::Lo, Type::S32, trow, 4, tile);
    for j in 0..4 {
        k.comment(&format!("store row ty + {}", 8 * j));
        let orow = if j == 0 {
            orow0
        } else {
            k.add(Type::S32, orow0, 8 * j)
        };
        let row_ok = k.setp(Cmp::Lt, Type::S32, orow, cols);
        let ok = k.setp_combined(
            Cmp::Lt,
            BoolOp::And,
            Type::S32,
            ocol,
            rows,
            Guard::when(row_ok),
        );
        let skip = k.label("skip");
        k.bra_if(Guard::unless(ok), &skip);
        let v = k.ld(
            Space::Shared,
            Type::F32,
            Address::reg(tbase).offset(i64::from(8 * 4 * j)),
        );
        let idx = k.mad(MulMode::Lo, Type::S32, orow, rows, ocol);
        let addr = elem_addr(&mut k, dst, idx, 4);
        k.st(Space::Global, Type::F32, addr, vec![v.into()]);
        k.place(&skip);
    }
    k.ret();
    (m, module(target, k))
}

/// Y[i, :] = X[i, :] * 2 for rows of four floats: one `.v4` load and store per thread.
pub fn scale_v4(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"scale_v4","params":[
            {"name":"X","dtype":"float32","shape":[{"dim":"N"},{"int":4}],"access":"read"},
            {"name":"Y","dtype":"float32","shape":[{"dim":"N"},{"int":4}],"access":"write"}],
            "dims":[{"name":"N","dtype":"int32"}],
            "grid":[{"op":"ceildiv","args":[{"dim":"N"},{"int":128}]}],"block":[128],
            "shared_bytes":{"int":0}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    let x = k.global_ptr(&t[0]);
    let y = k.global_ptr(&t[1]);
    let n = k.ld_param(&d[0]);
    let i = global_thread_x(&mut k);
    let inside = k.setp(Cmp::Lt, Type::U32, i, n);
    let done = k.label("done");
    k.bra_if(Guard::unless(inside), &done);
    let px = elem_addr(&mut k, x, i, 16);
    let py = elem_addr(&mut k, y, i, 16);
    let v = k.ld_vec(Space::Global, Type::F32, VecWidth::V4, px);
    let scaled: Vec<Operand> = v
        .iter()
        .map(|&e| k.float(FloatOp::Mul, Type::F32, e, 2.0f32).into())
        .collect();
    k.st(Space::Global, Type::F32, py, scaled);
    k.place(&done);
    k.ret();
    (m, module(target, k))
}

/// For each row of two floats: packed f16x2 and bf16x2 stores, the unpacked halves read
/// back through f32 (scalar `cvt.f32.f16` / `cvt.f32.bf16`), scalar narrowing conversions
/// packed with `mov.b32 {lo, hi}`, an f64 round trip, and float ↔ int conversions with
/// `.rzi`, `.rn` and `.sat`.
pub fn cast_f16_bf16(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"cast","params":[
            {"name":"X","dtype":"float32","shape":[{"dim":"N"},{"int":2}],"access":"read"},
            {"name":"H","dtype":"float16","shape":[{"dim":"N"},{"int":2}],"access":"write"},
            {"name":"B","dtype":"bfloat16","shape":[{"dim":"N"},{"int":2}],"access":"write"},
            {"name":"S","dtype":"float16","shape":[{"dim":"N"},{"int":2}],"access":"write"},
            {"name":"F","dtype":"float32","shape":[{"dim":"N"},{"int":4}],"access":"write"},
            {"name":"Q","dtype":"int8","shape":[{"dim":"N"}],"access":"write"}],
            "dims":[{"name":"N","dtype":"int32"}],
            "grid":[{"op":"ceildiv","args":[{"dim":"N"},{"int":128}]}],"block":[128],
            "shared_bytes":{"int":0}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    let ptrs: Vec<Reg> = t.iter().map(|p| k.global_ptr(p)).collect();
    let n = k.ld_param(&d[0]);
    let i = global_thread_x(&mut k);
    let outside = k.setp(Cmp::Ge, Type::U32, i, n);
    let done = k.label("done");
    k.bra_if(Guard::when(outside), &done);
    let px = elem_addr(&mut k, ptrs[0], i, 8);
    let x = k.ld_vec(Space::Global, Type::F32, VecWidth::V2, px);
    let (x0, x1) = (x[0], x[1]);

    k.comment("packed conversions: x0 lands in the low half, so it is stored first");
    let h2 = k.cvt_pack(Type::F16x2, x0, x1);
    let ph = elem_addr(&mut k, ptrs[1], i, 4);
    k.st(Space::Global, Type::B32, ph, vec![h2.into()]);
    let b2 = k.cvt_pack(Type::Bf16x2, x0, x1);
    let pb = elem_addr(&mut k, ptrs[2], i, 4);
    k.st(Space::Global, Type::B32, pb, vec![b2.into()]);

    k.comment("scalar narrowing, packed with mov.b32 {lo, hi}");
    let s0 = k.cvt(Type::F16, Type::F32, x0);
    let s1 = k.cvt_with(Some(CvtRound::Rz), false, Type::F16, Type::F32, x1);
    let s = k.pack(Type::B32, vec![s0.into(), s1.into()]);
    let ps = elem_addr(&mut k, ptrs[3], i, 4);
    k.st(Space::Global, Type::B32, ps, vec![s.into()]);

    k.comment("widening back to f32 from the unpacked halves");
    let hs = k.unpack(Type::B32, Type::F16, 2, h2);
    let bs = k.unpack(Type::B32, Type::Bf16, 2, b2);
    let f0 = k.cvt(Type::F32, Type::F16, hs[0]);
    let f1 = k.cvt(Type::F32, Type::Bf16, bs[1]);
    let sum = k.float(FloatOp::Add, Type::F32, f0, f1);
    let clamped = k.cvt_with(None, true, Type::F32, Type::F32, sum);
    let dbl = k.cvt(Type::F64, Type::F32, x0);
    let dsum = k.new_reg(Type::F64);
    k.emit(Op::Float {
        op: FloatOp::Add,
        mode: FloatMode::Round(FRound::Rn),
        ftz: false,
        ty: Type::F64,
        dst: dsum,
        a: dbl.into(),
        b: Operand::F64(0.5),
    });
    let back = k.cvt(Type::F32, Type::F64, dsum);
    let trunc = k.cvt(Type::S32, Type::F32, x1);
    let as_float = k.cvt(Type::F32, Type::S32, trunc);
    let pf = elem_addr(&mut k, ptrs[4], i, 16);
    k.st(
        Space::Global,
        Type::F32,
        pf,
        vec![f0.into(), clamped.into(), back.into(), as_float.into()],
    );

    k.comment("float to int8 with round-to-nearest and saturation");
    let q = k.cvt_with(Some(CvtRound::Rni), true, Type::S8, Type::F32, x0);
    let pq = elem_addr(&mut k, ptrs[5], i, 1);
    k.st(Space::Global, Type::S8, pq, vec![q.into()]);
    k.place(&done);
    k.ret();
    (m, module(target, k))
}

/// 64-bit index math with int64 dims: Y[r, c] = X[r, min(c * 2, K - 1)] for c < K, one block
/// per row, columns strided by the block; all offsets are s64.
pub fn index64(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"index64","params":[
            {"name":"X","dtype":"float32","shape":[{"dim":"M"},{"dim":"K"}],"access":"read"},
            {"name":"Y","dtype":"float32","shape":[{"dim":"M"},{"dim":"K"}],"access":"write"}],
            "dims":[{"name":"M","dtype":"int64"},{"name":"K","dtype":"int64"}],
            "grid":[{"dim":"M"}],"block":[256],"shared_bytes":{"int":0}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    let x = k.global_ptr(&t[0]);
    let y = k.global_ptr(&t[1]);
    let kk = k.ld_param(&d[1]);
    let bid = k.special(SpecialReg::CtaidX);
    let tid = k.special(SpecialReg::TidX);
    let row = k.cvt(Type::U64, Type::U32, bid);
    let col = k.cvt(Type::U64, Type::U32, tid);
    let row_base = k.int(IntOp::Mul(MulMode::Lo), Type::S64, row, kk);
    let last = k.int(IntOp::Sub, Type::S64, kk, 1i64);
    let (top, done) = (k.label("loop"), k.label("done"));
    let empty = k.setp(Cmp::Ge, Type::S64, col, kk);
    k.bra_if(Guard::when(empty), &done);
    k.place(&top);
    let twice = k.int(IntOp::Shl, Type::B64, col, 1u32);
    let src_col = k.int(IntOp::Min, Type::S64, twice, last);
    let src_idx = k.add(Type::S64, row_base, src_col);
    let src_off = k.int(IntOp::Shl, Type::B64, src_idx, 2u32);
    let src = k.add(Type::S64, x, src_off);
    let v = k.ld(Space::Global, Type::F32, Address::reg(src));
    let dst_idx = k.add(Type::S64, row_base, col);
    let dst_off = k.int(IntOp::Mul(MulMode::Lo), Type::S64, dst_idx, 4i64);
    let dst = k.add(Type::S64, y, dst_off);
    k.st(Space::Global, Type::F32, Address::reg(dst), vec![v.into()]);
    k.emit(Op::Int {
        op: IntOp::Add,
        ty: Type::S64,
        dst: col,
        a: col.into(),
        b: 256i64.into(),
    });
    let more = k.setp(Cmp::Lt, Type::S64, col, kk);
    k.bra_if(Guard::when(more), &top);
    k.place(&done);
    k.ret();
    (m, module(target, k))
}

/// One warp computes C[16, 8] = A[16, 16] · B[16, 8] (f16 in, f32 out) for the first
/// min(M, 16) rows of A: 16-byte `cp.async` into shared memory (the zero-fill form for A's
/// rows past M, a predicated one for B), commit / wait, `ldmatrix.x4` for A,
/// `ldmatrix.x2.trans` for B (row-major K x N), one `mma.sync.m16n8k16`, guarded fp32 stores.
pub fn mma_ldmatrix_cp_async(target: Target) -> (Manifest, Module) {
    let m = manifest(
        target,
        r#"{"entry":"mma_tile","params":[
            {"name":"A","dtype":"float16","shape":[{"dim":"M"},{"int":16}],"access":"read"},
            {"name":"B","dtype":"float16","shape":[{"int":16},{"int":8}],"access":"read"},
            {"name":"C","dtype":"float32","shape":[{"dim":"M"},{"int":8}],"access":"write"}],
            "dims":[{"name":"M","dtype":"int32"}],
            "grid":[{"int":1}],"block":[32],"shared_bytes":{"int":768}}"#,
    );
    let mut k = KernelBuilder::new(&m.kernels[0].entry);
    let (t, d) = k.params_from_manifest(&m);
    k.reqntid([32, 1, 1]);
    let smem = k.dynamic_shared("smem", 16);
    let a = k.global_ptr(&t[0]);
    let b = k.global_ptr(&t[1]);
    let c = k.global_ptr(&t[2]);
    let rows = k.ld_param(&d[0]);
    let lane = k.special(SpecialReg::TidX);
    let base = k.mov(Type::U32, Operand::Symbol(smem));
    k.comment("A: 512 bytes at smem[0], one 16-byte chunk per lane; rows past M read as zeros");
    let chunk = k.int(IntOp::Shl, Type::B32, lane, 4u32);
    let a_src = elem_addr(&mut k, a, chunk, 1);
    let a_dst = k.add(Type::U32, base, chunk);
    let a_row = k.int(IntOp::Shr, Type::U32, lane, 1);
    let a_in = k.setp(Cmp::Lt, Type::U32, a_row, rows);
    let a_bytes = k.selp(Type::U32, 16, 0, a_in);
    k.emit(Op::CpAsync {
        cache: CacheOp::Cg,
        dst: Address::reg(a_dst),
        src: a_src,
        size: 16,
        src_size: Some(a_bytes.into()),
    });
    k.comment("B: 256 bytes at smem[512], copied by lanes 0..15");
    let b_lane = k.setp(Cmp::Lt, Type::U32, lane, 16);
    let b_src = elem_addr(&mut k, b, chunk, 1);
    k.emit_guarded(
        Guard::when(b_lane),
        Op::CpAsync {
            cache: CacheOp::Cg,
            dst: Address::reg(a_dst).offset(512),
            src: b_src,
            size: 16,
            src_size: None,
        },
    );
    k.emit(Op::CpAsyncCommit);
    k.emit(Op::CpAsyncWait { pending: 0 });
    k.bar_sync();
    k.comment("ldmatrix: lane t supplies row t % 16, column block 8 * (t / 16)");
    let row = k.int(IntOp::And, Type::B32, lane, 15);
    let colblk = k.int(IntOp::Shr, Type::U32, lane, 4);
    let row_off = k.int(IntOp::Shl, Type::B32, row, 5u32);
    let col_off = k.int(IntOp::Shl, Type::B32, colblk, 4u32);
    let a_row_addr = k.add(Type::U32, base, row_off);
    let a_addr = k.add(Type::U32, a_row_addr, col_off);
    let afrag: Vec<Reg> = (0..4).map(|_| k.new_reg(Type::B32)).collect();
    k.emit(Op::Ldmatrix {
        num: LdmatrixNum::X4,
        trans: false,
        dsts: afrag.clone(),
        addr: Address::reg(a_addr),
    });
    k.comment("B is K-major in memory: .trans gives the mma's column fragment (lane t: row k = t)");
    let b_row = k.int(IntOp::Shl, Type::B32, row, 4u32);
    let b_addr = k.add(Type::U32, base, b_row);
    let bfrag: Vec<Reg> = (0..2).map(|_| k.new_reg(Type::B32)).collect();
    k.emit(Op::Ldmatrix {
        num: LdmatrixNum::X2,
        trans: true,
        dsts: bfrag.clone(),
        addr: Address::reg(b_addr).offset(512),
    });
    let acc: Vec<Reg> = (0..4).map(|_| k.mov(Type::F32, 0.0f32)).collect();
    let out: Vec<Reg> = (0..4).map(|_| k.new_reg(Type::F32)).collect();
    k.emit(Op::Mma {
        shape: MmaShape::M16n8k16,
        acc_ty: Type::F32,
        ab: MmaInput::F16,
        d: out.clone(),
        a: afrag,
        b: bfrag,
        c: acc,
    });
    k.comment("C fragment: lane owns rows lane/4 and lane/4 + 8, columns 2*(lane%4) + {0,1}");
    let group = k.int(IntOp::Shr, Type::U32, lane, 2);
    let quad = k.int(IntOp::And, Type::B32, lane, 3);
    let idx = k.mad(MulMode::Lo, Type::S32, group, 4, quad);
    let idx2 = k.int(IntOp::Shl, Type::B32, idx, 1u32);
    let p0 = elem_addr(&mut k, c, idx2, 4);
    let in0 = k.setp(Cmp::Lt, Type::U32, group, rows);
    let group8 = k.add(Type::U32, group, 8);
    let in1 = k.setp(Cmp::Lt, Type::U32, group8, rows);
    for (inside, addr, lanes) in [
        (in0, p0.clone(), &out[0..2]),
        (in1, p0.offset(8 * 8 * 4), &out[2..4]),
    ] {
        k.emit_guarded(
            Guard::when(inside),
            Op::St {
                space: Space::Global,
                ty: Type::F32,
                addr,
                srcs: lanes.iter().map(|&r| r.into()).collect(),
            },
        );
    }
    k.ret();
    (m, module(target, k))
}
