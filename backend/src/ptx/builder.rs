//! `KernelBuilder`: how codegen writes a kernel. It hands out fresh virtual registers (ids
//! from 1 per class, never reused: PTX is virtual-register code and ptxas allocates the
//! machine registers), fresh labels, parameters named `<entry>_param_<name>`, and has one
//! helper per common instruction that creates its destination register and returns it.
//! Anything the helpers do not cover goes through `emit` with an `Op`.

use super::ast::*;
use tlc_abi::manifest::Manifest;
use tlc_ir::DType;

/// A declared kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamRef {
    pub symbol: String,
    pub ty: Type,
}

/// Builds one `Kernel`.
#[derive(Clone, Debug)]
pub struct KernelBuilder {
    kernel: Kernel,
    next_reg: [u32; 6],
    next_label: u32,
}

/// The rounding `cvt` needs for `dst ← src`, as PTX requires it: a float rounding (`.rn`)
/// when the result is a float that may lose precision (narrower float, or from an integer),
/// an integer rounding for float → integer (`.rzi`, C's truncation), none otherwise
/// (widening float, integer ↔ integer).
pub fn default_cvt_round(dst: Type, src: Type) -> Option<CvtRound> {
    match (dst.is_float(), src.is_float()) {
        (true, true) if dst.bytes() < src.bytes() || dst.bytes() == src.bytes() && dst != src => {
            Some(CvtRound::Rn)
        }
        (true, false) => Some(CvtRound::Rn),
        (false, true) => Some(CvtRound::Rzi),
        _ => None,
    }
}

/// The double-width type `mul.wide` / `mad.wide` produce.
pub fn wide(ty: Type) -> Type {
    match ty {
        Type::U16 => Type::U32,
        Type::S16 => Type::S32,
        Type::U32 => Type::U64,
        Type::S32 => Type::S64,
        other => other,
    }
}

/// A tensor map parameter: 128 bytes (`CUtensorMap`), 64-byte aligned (what CUDA's
/// `__grid_constant__ const CUtensorMap` gives; the runtime's `TensorMap` matches it).
pub const TENSOR_MAP_PARAM: ParamBytes = ParamBytes {
    align: 64,
    len: 128,
};

/// The PTX parameter type of a dim of the manifest (`int32` → `.u32`, `int64` → `.u64`).
pub fn dim_param_type(dtype: DType) -> Type {
    match dtype {
        DType::Int64 => Type::U64,
        _ => Type::U32,
    }
}

impl KernelBuilder {
    pub fn new(name: &str) -> KernelBuilder {
        KernelBuilder {
            kernel: Kernel {
                name: name.to_string(),
                params: Vec::new(),
                shared: Vec::new(),
                locals: Vec::new(),
                strings: Vec::new(),
                reqntid: None,
                maxnreg: None,
                minnctapersm: None,
                reqnctapercluster: None,
                body: Vec::new(),
            },
            next_reg: [1; 6],
            next_label: 1,
        }
    }

    pub fn name(&self) -> &str {
        &self.kernel.name
    }

    /// Declares `.param TY <entry>_param_<name>`.
    pub fn param(&mut self, name: &str, ty: Type) -> ParamRef {
        let symbol = format!("{}_param_{name}", self.kernel.name);
        self.kernel.params.push(Param {
            symbol: symbol.clone(),
            ty,
            bytes: None,
        });
        ParamRef { symbol, ty }
    }

    /// The symbol of tensor map parameter `index`: `<entry>_tmap<index>`.
    pub fn tensor_map_symbol(&self, index: usize) -> String {
        format!("{}_tmap{index}", self.kernel.name)
    }

    /// Declares the tensor map `.param .align 64 .b8 <entry>_tmap<index>[128]` and returns
    /// its symbol (`param_generic_address` takes its generic address).
    pub fn tensor_map_param(&mut self, index: usize) -> String {
        let symbol = self.tensor_map_symbol(index);
        self.kernel.params.push(Param {
            symbol: symbol.clone(),
            ty: Type::B8,
            bytes: Some(TENSOR_MAP_PARAM),
        });
        symbol
    }

    /// The generic address of a by-value parameter: `mov.u64 d, sym; cvta.param.u64 d, d`.
    /// TMA needs it for a tensor map (measured on an H100: the bare `.param` address from
    /// the `mov` alone faults as misaligned).
    pub fn param_generic_address(&mut self, symbol: &str) -> Reg {
        let param = self.mov(Type::U64, Operand::Symbol(symbol.to_string()));
        let dst = self.new_reg(Type::U64);
        self.emit(Op::Cvta {
            to_space: false,
            space: Space::Param,
            dst,
            src: param,
        });
        dst
    }

    /// Declares the parameters the manifest's launch contract prescribes: one `.u64` per
    /// tensor, in order, then one scalar per dim (`.u32` for int32, `.u64` for int64), then
    /// one 128-byte tensor map per entry of `tensor_maps`, in order.
    /// Returns (tensor params, dim params); map `i` is `tensor_map_symbol(i)`.
    pub fn params_from_manifest(&mut self, m: &Manifest) -> (Vec<ParamRef>, Vec<ParamRef>) {
        // The caller's tensors, then the function's own (`scratch`).
        let tensors = m
            .params
            .iter()
            .chain(&m.scratch)
            .map(|p| self.param(&p.name, Type::U64))
            .collect();
        let dims = m
            .dims
            .iter()
            .map(|d| self.param(&d.name, dim_param_type(d.dtype)))
            .collect();
        for i in 0..m.tensor_maps.len() {
            self.tensor_map_param(i);
        }
        (tensors, dims)
    }

    /// Declares the dynamic shared arena `.extern .shared .align ALIGN .b8 NAME[];` and
    /// returns its symbol (use it as an `Address::symbol` or `Operand::Symbol`).
    pub fn dynamic_shared(&mut self, name: &str, align: u32) -> String {
        let mut var = SharedVar::dynamic(name);
        var.align = align;
        self.kernel.shared.push(var);
        name.to_string()
    }

    /// Declares the per-thread array `.local .align ALIGN .b8 NAME[BYTES];` and returns its
    /// symbol (its address is `mov.u32 %r, NAME`, a 32-bit local address).
    pub fn local_array(&mut self, name: &str, align: u32, bytes: u32) -> String {
        self.kernel.locals.push(LocalVar {
            name: name.to_string(),
            align,
            bytes,
        });
        name.to_string()
    }

    /// Declares the constant string `text` (NUL-terminated) in global memory, named after
    /// the kernel (`__tlc_<entry>_str<N>`), and returns its symbol.
    pub fn global_string(&mut self, text: &str) -> String {
        let name = format!(
            "__tlc_{}_str{}",
            self.kernel.name,
            self.kernel.strings.len()
        );
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        self.kernel.strings.push(GlobalBytes {
            name: name.clone(),
            bytes,
        });
        name
    }

    /// The generic address of variable `symbol` of `space` (`mov.u64` of its address, then
    /// `cvta.SPACE.u64`).
    pub fn generic_address(&mut self, symbol: &str, space: Space) -> Reg {
        let window = self.mov(Type::U64, Operand::Symbol(symbol.to_string()));
        let dst = self.new_reg(Type::U64);
        self.emit(Op::Cvta {
            to_space: false,
            space,
            dst,
            src: window,
        });
        dst
    }

    /// Whether the kernel declares the `.local` array `name`.
    pub fn has_local(&self, name: &str) -> bool {
        self.kernel.locals.iter().any(|l| l.name == name)
    }

    /// `.reqntid x, y, z`.
    pub fn reqntid(&mut self, block: [u32; 3]) {
        self.kernel.reqntid = Some(block);
    }

    pub fn maxnreg(&mut self, n: u32) {
        self.kernel.maxnreg = Some(n);
    }

    /// `.minnctapersm n`.
    pub fn reqnctapercluster(&mut self, cluster: [u32; 3]) {
        self.kernel.reqnctapercluster = Some(cluster);
    }

    pub fn minnctapersm(&mut self, n: u32) {
        self.kernel.minnctapersm = Some(n);
    }

    /// A fresh register of the class that holds `ty`.
    pub fn new_reg(&mut self, ty: Type) -> Reg {
        self.new_reg_of(RegClass::of(ty))
    }

    pub fn new_reg_of(&mut self, class: RegClass) -> Reg {
        let slot = &mut self.next_reg[class as usize];
        let id = *slot;
        *slot += 1;
        Reg { class, id }
    }

    /// A fresh label (place it with `place`); `hint` makes the PTX readable (`$L__loop_3`).
    pub fn label(&mut self, hint: &str) -> Label {
        let id = self.next_label;
        self.next_label += 1;
        Label {
            id,
            hint: hint.to_string(),
        }
    }

    pub fn place(&mut self, label: &Label) {
        self.kernel.body.push(Stmt::Label(label.clone()));
    }

    pub fn comment(&mut self, text: &str) {
        self.kernel.body.push(Stmt::Comment(text.to_string()));
    }

    pub fn emit(&mut self, inst: impl Into<Inst>) {
        self.kernel.body.push(Stmt::Inst(inst.into()));
    }

    /// `@g op`.
    pub fn emit_guarded(&mut self, guard: Guard, op: Op) {
        self.emit(Inst {
            guard: Some(guard),
            op,
        });
    }

    pub fn finish(self) -> Kernel {
        self.kernel
    }

    // ---- helpers: each creates its destination and returns it ----

    /// `ld.param.T d, [param]`.
    pub fn ld_param(&mut self, p: &ParamRef) -> Reg {
        let dst = self.new_reg(p.ty);
        self.emit(Op::Ld {
            space: Space::Param,
            nc: false,
            ty: p.ty,
            dsts: vec![dst],
            addr: Address::symbol(&p.symbol),
        });
        dst
    }

    /// A tensor parameter as a global address: `ld.param.u64` then `cvta.to.global.u64`.
    pub fn global_ptr(&mut self, p: &ParamRef) -> Reg {
        let generic = self.ld_param(p);
        let dst = self.new_reg(Type::U64);
        self.emit(Op::Cvta {
            to_space: true,
            space: Space::Global,
            dst,
            src: generic,
        });
        dst
    }

    /// `mov.u32 d, %tid.x` etc.
    pub fn special(&mut self, s: SpecialReg) -> Reg {
        self.mov(Type::U32, Operand::Special(s))
    }

    pub fn mov(&mut self, ty: Type, src: impl Into<Operand>) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::Mov {
            ty,
            dst,
            src: src.into(),
        });
        dst
    }

    /// An integer op; `Mul(Wide)` gets a double-width destination.
    pub fn int(
        &mut self,
        op: IntOp,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Reg {
        let dst_ty = if op == IntOp::Mul(MulMode::Wide) {
            wide(ty)
        } else {
            ty
        };
        let dst = self.new_reg(dst_ty);
        self.emit(Op::Int {
            op,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
        });
        dst
    }

    pub fn add(&mut self, ty: Type, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        self.int(IntOp::Add, ty, a, b)
    }

    pub fn mul_wide(&mut self, ty: Type, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        self.int(IntOp::Mul(MulMode::Wide), ty, a, b)
    }

    /// `mad.{lo,hi,wide}.T d, a, b, c`.
    pub fn mad(
        &mut self,
        mode: MulMode,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        c: impl Into<Operand>,
    ) -> Reg {
        let dst = self.new_reg(if mode == MulMode::Wide { wide(ty) } else { ty });
        self.emit(Op::Mad {
            mode,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            c: c.into(),
        });
        dst
    }

    /// A float op with the default rounding.
    pub fn float(
        &mut self,
        op: FloatOp,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Reg {
        // div has no default rounding in PTX; .rn is the IEEE-correct one.
        let mode = if op == FloatOp::Div {
            FloatMode::Round(FRound::Rn)
        } else {
            FloatMode::Default
        };
        let dst = self.new_reg(ty);
        self.emit(Op::Float {
            op,
            mode,
            ftz: false,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
        });
        dst
    }

    /// `func{.mode}.T d, a` (no `.ftz`: subnormals are kept, as the interpreter keeps them).
    pub fn float_fn(
        &mut self,
        func: FloatFn,
        mode: FloatMode,
        ty: Type,
        src: impl Into<Operand>,
    ) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::FloatFn {
            func,
            mode,
            ftz: false,
            ty,
            dst,
            src: src.into(),
        });
        dst
    }

    /// `fma.rn.T d, a, b, c`.
    pub fn fma(
        &mut self,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        c: impl Into<Operand>,
    ) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::Fma {
            round: FRound::Rn,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            c: c.into(),
        });
        dst
    }

    pub fn unary(&mut self, op: UnOp, ty: Type, src: impl Into<Operand>) -> Reg {
        let dst_ty = if matches!(op, UnOp::Popc | UnOp::Clz) {
            Type::U32
        } else {
            ty
        };
        let dst = self.new_reg(dst_ty);
        self.emit(Op::Unary {
            op,
            ty,
            dst,
            src: src.into(),
        });
        dst
    }

    /// `setp.cmp.T p, a, b`.
    pub fn setp(
        &mut self,
        cmp: Cmp,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Reg {
        let dst = self.new_reg(Type::Pred);
        self.emit(Op::Setp {
            cmp,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            combine: None,
        });
        dst
    }

    /// `setp.cmp.bop.T p, a, b, c`: p = (a cmp b) bop c.
    pub fn setp_combined(
        &mut self,
        cmp: Cmp,
        bop: BoolOp,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        c: Guard,
    ) -> Reg {
        let dst = self.new_reg(Type::Pred);
        self.emit(Op::Setp {
            cmp,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            combine: Some((bop, c)),
        });
        dst
    }

    /// `selp.T d, a, b, p` (d = p ? a : b).
    pub fn selp(&mut self, ty: Type, a: impl Into<Operand>, b: impl Into<Operand>, p: Reg) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::Selp {
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            pred: p,
        });
        dst
    }

    /// `cvt` with the rounding PTX requires for this pair (`default_cvt_round`).
    pub fn cvt(&mut self, dst_ty: Type, src_ty: Type, src: impl Into<Operand>) -> Reg {
        self.cvt_with(
            default_cvt_round(dst_ty, src_ty),
            false,
            dst_ty,
            src_ty,
            src,
        )
    }

    /// `cvt` with an explicit rounding and `.sat`.
    pub fn cvt_with(
        &mut self,
        round: Option<CvtRound>,
        sat: bool,
        dst_ty: Type,
        src_ty: Type,
        src: impl Into<Operand>,
    ) -> Reg {
        let dst = self.new_reg(dst_ty);
        self.emit(Op::Cvt {
            round,
            ftz: false,
            sat,
            dst_ty,
            src_ty,
            dst,
            src: src.into(),
        });
        dst
    }

    /// Two f32 into one `f16x2` / `bf16x2` register with `lo` in the low half (so a
    /// little-endian store puts `lo` first in memory).
    pub fn cvt_pack(
        &mut self,
        dst_ty: Type,
        lo: impl Into<Operand>,
        hi: impl Into<Operand>,
    ) -> Reg {
        let dst = self.new_reg(dst_ty);
        self.emit(Op::CvtPack {
            round: CvtRound::Rn,
            relu: false,
            dst_ty,
            dst,
            hi: hi.into(),
            lo: lo.into(),
        });
        dst
    }

    /// `mov.bN d, {lanes...}` (first lane = low bits).
    pub fn pack(&mut self, ty: Type, lanes: Vec<Operand>) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::Pack {
            ty,
            dst,
            srcs: lanes,
        });
        dst
    }

    /// `mov.bN {d...}, src` into `n` registers of `lane_ty` (first = low bits).
    pub fn unpack(&mut self, ty: Type, lane_ty: Type, n: usize, src: Reg) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..n).map(|_| self.new_reg(lane_ty)).collect();
        self.emit(Op::Unpack {
            ty,
            dsts: dsts.clone(),
            src,
        });
        dsts
    }

    /// `ld.space.T d, [addr]`.
    pub fn ld(&mut self, space: Space, ty: Type, addr: Address) -> Reg {
        self.ld_widened(space, ty, ty, addr)
    }

    /// `ld.space.T d, [addr]` into a fresh register of `reg_ty`'s class, which may be wider
    /// than `ty` (an 8-bit load into a 32-bit register: sign-extended for `.s8`,
    /// zero-extended for `.u8`).
    pub fn ld_widened(&mut self, space: Space, ty: Type, reg_ty: Type, addr: Address) -> Reg {
        let dst = self.new_reg(reg_ty);
        self.emit(Op::Ld {
            space,
            nc: false,
            ty,
            dsts: vec![dst],
            addr,
        });
        dst
    }

    /// `bfe.T d, a, pos, len` (`T` `.u32` or `.s32`).
    pub fn bfe(&mut self, ty: Type, src: impl Into<Operand>, pos: u32, len: u32) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::Bfe {
            ty,
            dst,
            src: src.into(),
            pos: pos.into(),
            len: len.into(),
        });
        dst
    }

    /// `bfi.b32 d, a, b, pos, len`: `b` with bits `pos..pos+len` taken from `a`.
    pub fn bfi(&mut self, a: impl Into<Operand>, b: impl Into<Operand>, pos: u32, len: u32) -> Reg {
        let dst = self.new_reg(Type::B32);
        self.emit(Op::Bfi {
            dst,
            a: a.into(),
            b: b.into(),
            pos: pos.into(),
            len: len.into(),
        });
        dst
    }

    /// `ld.space.vN.T {d...}, [addr]`.
    pub fn ld_vec(&mut self, space: Space, ty: Type, width: VecWidth, addr: Address) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..width.lanes()).map(|_| self.new_reg(ty)).collect();
        self.emit(Op::Ld {
            space,
            nc: false,
            ty,
            dsts: dsts.clone(),
            addr,
        });
        dsts
    }

    /// `st.space{.vN}.T [addr], src` (a vector store when `srcs` has 2 or 4 entries).
    pub fn st(&mut self, space: Space, ty: Type, addr: Address, srcs: Vec<Operand>) {
        self.emit(Op::St {
            space,
            ty,
            addr,
            srcs,
        });
    }

    pub fn bra(&mut self, target: &Label) {
        self.emit(Op::Bra {
            target: target.clone(),
            uni: false,
        });
    }

    /// `@g bra target`.
    pub fn bra_if(&mut self, guard: Guard, target: &Label) {
        self.emit_guarded(
            guard,
            Op::Bra {
                target: target.clone(),
                uni: false,
            },
        );
    }

    /// `bar.sync 0`.
    pub fn bar_sync(&mut self) {
        self.emit(Op::BarSync {
            id: 0,
            threads: None,
        });
    }

    pub fn ret(&mut self) {
        self.emit(Op::Ret);
    }
}
