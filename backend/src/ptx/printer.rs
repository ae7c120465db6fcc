//! Prints the PTX AST as PTX text in the layout nvcc uses, so the output reads like familiar
//! PTX: directives flush left, one instruction per line as `\topcode \toperands;`, labels
//! flush left, and per-class register declarations `.reg .b32 \t%r<N>;` sized from the
//! highest register id the body mentions (ids start at 1, so `%r<N>` declares `%r0..%rN-1`).

use super::ast::*;
use std::collections::BTreeSet;
use std::fmt::Write;
use tlc_abi::manifest::Manifest;

/// The module as PTX text (no manifest line).
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    let _ = writeln!(out, ".version {}", m.version);
    let _ = writeln!(out, ".target {}", m.target.name());
    out.push_str(".address_size 64\n");
    // CUDA's device printf, for kernels that print (`T.print`).
    let prints = m.kernels.iter().any(|k| {
        k.body.iter().any(|s| {
            matches!(
                s,
                Stmt::Inst(Inst {
                    op: Op::Vprintf { .. },
                    ..
                })
            )
        })
    });
    if prints {
        out.push_str(
            "\n.extern .func (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n",
        );
    }
    // A shared variable two kernels both use is declared once.
    let mut declared = BTreeSet::new();
    for k in &m.kernels {
        out.push('\n');
        let mut any = false;
        for g in &k.strings {
            any = true;
            let bytes: Vec<String> = g.bytes.iter().map(u8::to_string).collect();
            let _ = writeln!(
                out,
                ".global .align 1 .b8 {}[{}] = {{{}}};",
                g.name,
                g.bytes.len(),
                bytes.join(", ")
            );
        }
        for s in &k.shared {
            if !declared.insert(s.name.clone()) {
                continue;
            }
            any = true;
            match s.bytes {
                None => {
                    let _ = writeln!(out, ".extern .shared .align {} .b8 {}[];", s.align, s.name);
                }
                Some(n) => {
                    let _ = writeln!(out, ".shared .align {} .b8 {}[{n}];", s.align, s.name);
                }
            }
        }
        if any {
            out.push('\n');
        }
        print_kernel(&mut out, k);
    }
    out
}

/// The file `tlc compile` writes: the manifest line, then the module.
pub fn print_with_manifest(m: &Module, manifest: &Manifest) -> String {
    manifest.prepend_to(&print_module(m))
}

fn print_kernel(out: &mut String, k: &Kernel) {
    let _ = write!(out, ".visible .entry {}(", k.name);
    for (i, p) in k.params.iter().enumerate() {
        let sep = if i + 1 < k.params.len() { "," } else { "" };
        match p.bytes {
            None => {
                let _ = write!(out, "\n\t.param {} {}{sep}", p.ty, p.symbol);
            }
            Some(ParamBytes { align, len }) => {
                let _ = write!(
                    out,
                    "\n\t.param .align {align} .b8 {}[{len}]{sep}",
                    p.symbol
                );
            }
        }
    }
    if !k.params.is_empty() {
        out.push('\n');
    }
    out.push_str(")\n");
    if let Some([x, y, z]) = k.reqntid {
        let _ = writeln!(out, ".reqntid {x}, {y}, {z}");
    }
    if let Some(n) = k.maxnreg {
        let _ = writeln!(out, ".maxnreg {n}");
    }
    if let Some(n) = k.minnctapersm {
        let _ = writeln!(out, ".minnctapersm {n}");
    }
    if let Some([x, y, z]) = k.reqnctapercluster {
        let _ = writeln!(out, ".reqnctapercluster {x}, {y}, {z}");
    }
    out.push_str("{\n");
    let counts = register_counts(k);
    let mut any = false;
    for class in RegClass::ALL {
        let n = counts[class as usize];
        if n > 0 {
            any = true;
            let _ = writeln!(
                out,
                "\t.reg {} \t{}<{}>;",
                class.decl_type(),
                class.prefix(),
                n
            );
        }
    }
    for l in &k.locals {
        any = true;
        let _ = writeln!(
            out,
            "\t.local .align {} .b8 \t{}[{}];",
            l.align, l.name, l.bytes
        );
    }
    if any {
        out.push('\n');
    }
    for s in &k.body {
        match s {
            Stmt::Label(l) => {
                let _ = writeln!(out, "{l}:");
            }
            Stmt::Comment(c) => {
                let _ = writeln!(out, "\t// {}", c.replace(['\n', '\r'], " "));
            }
            Stmt::Inst(Inst {
                op: Op::Vprintf { format, args },
                ..
            }) => {
                // A scope of its own: the call's parameters are declared where it is made.
                let _ = write!(
                    out,
                    "\t{{\n\t.param .b64 vprintf_p0;\n\tst.param.b64 \t[vprintf_p0], {format};\n\t\
                     .param .b64 vprintf_p1;\n\tst.param.b64 \t[vprintf_p1], {args};\n\t\
                     .param .b32 vprintf_r;\n\tcall.uni (vprintf_r), vprintf, (vprintf_p0, vprintf_p1);\n\t}}\n"
                );
            }
            Stmt::Inst(i) => {
                out.push('\t');
                print_inst(out, i);
                out.push_str(";\n");
            }
        }
    }
    out.push_str("}\n");
}

/// One more than the highest id per register class (indexed by `RegClass as usize`).
fn register_counts(k: &Kernel) -> [u32; 6] {
    let mut counts = [0u32; 6];
    for s in &k.body {
        if let Stmt::Inst(i) = s {
            for r in i.defs().into_iter().chain(i.uses()) {
                let c = &mut counts[r.class as usize];
                *c = (*c).max(r.id.saturating_add(1));
            }
        }
    }
    counts
}

/// An instruction without its indentation and `;`, e.g. `@%p1 bra \t$L__done_1`.
pub fn inst_to_string(i: &Inst) -> String {
    let mut s = String::new();
    print_inst(&mut s, i);
    s
}

fn print_inst(out: &mut String, i: &Inst) {
    if let Some(g) = &i.guard {
        let _ = write!(out, "@{g} ");
    }
    let (opcode, operands) = render(&i.op);
    out.push_str(&opcode);
    if !operands.is_empty() {
        out.push_str(" \t");
        out.push_str(&operands.join(", "));
    }
}

fn operand(o: &Operand) -> String {
    match o {
        Operand::Reg(r) => r.to_string(),
        Operand::Imm(v) => v.to_string(),
        // Hex is bit-exact, so no float ever changes on its way through the text.
        Operand::F32(v) => format!("0f{:08X}", v.to_bits()),
        Operand::F64(v) => format!("0d{:016X}", v.to_bits()),
        Operand::Special(s) => s.name().to_string(),
        Operand::Symbol(s) => s.clone(),
    }
}

fn address(a: &Address) -> String {
    let base = match &a.base {
        AddrBase::Reg(r) => r.to_string(),
        AddrBase::Symbol(s) => s.clone(),
    };
    // `[%rd1+-16]` is how nvcc writes a negative offset; ptxas accepts it.
    match a.offset {
        0 => format!("[{base}]"),
        off => format!("[{base}+{off}]"),
    }
}

fn reg_list(rs: &[Reg]) -> String {
    let items: Vec<String> = rs.iter().map(Reg::to_string).collect();
    format!("{{{}}}", items.join(", "))
}

fn operand_list(os: &[Operand]) -> String {
    let items: Vec<String> = os.iter().map(operand).collect();
    format!("{{{}}}", items.join(", "))
}

fn vec_suffix(lanes: usize) -> &'static str {
    match lanes {
        2 => ".v2",
        4 => ".v4",
        8 => ".v8",
        _ => "",
    }
}

fn float_mode(m: FloatMode) -> &'static str {
    match m {
        FloatMode::Default => "",
        FloatMode::Round(r) => r.suffix(),
        FloatMode::Approx => ".approx",
        FloatMode::ApproxFtz => ".approx.ftz",
        FloatMode::Full => ".full",
    }
}

fn ftz(on: bool) -> &'static str {
    if on {
        ".ftz"
    } else {
        ""
    }
}

/// The opcode with all its modifiers, and the operands in PTX order.
fn render(op: &Op) -> (String, Vec<String>) {
    let o = operand;
    match op {
        Op::Mov { ty, dst, src } => (format!("mov{ty}"), vec![dst.to_string(), o(src)]),
        Op::Pack { ty, dst, srcs } => (
            format!("mov{ty}"),
            vec![dst.to_string(), operand_list(srcs)],
        ),
        Op::Unpack { ty, dsts, src } => (format!("mov{ty}"), vec![reg_list(dsts), src.to_string()]),
        Op::Int {
            op: iop,
            ty,
            dst,
            a,
            b,
        } => {
            let name = match iop {
                IntOp::Add => "add",
                IntOp::Sub => "sub",
                IntOp::Mul(MulMode::Lo) => "mul.lo",
                IntOp::Mul(MulMode::Hi) => "mul.hi",
                IntOp::Mul(MulMode::Wide) => "mul.wide",
                IntOp::Div => "div",
                IntOp::Rem => "rem",
                IntOp::Min => "min",
                IntOp::Max => "max",
                IntOp::Shl => "shl",
                IntOp::Shr => "shr",
                IntOp::And => "and",
                IntOp::Or => "or",
                IntOp::Xor => "xor",
            };
            (format!("{name}{ty}"), vec![dst.to_string(), o(a), o(b)])
        }
        Op::Mad {
            mode,
            ty,
            dst,
            a,
            b,
            c,
        } => {
            let m = match mode {
                MulMode::Lo => ".lo",
                MulMode::Hi => ".hi",
                MulMode::Wide => ".wide",
            };
            (
                format!("mad{m}{ty}"),
                vec![dst.to_string(), o(a), o(b), o(c)],
            )
        }
        Op::Float {
            op: fop,
            mode,
            ftz: z,
            ty,
            dst,
            a,
            b,
        } => {
            let name = match fop {
                FloatOp::Add => "add",
                FloatOp::Sub => "sub",
                FloatOp::Mul => "mul",
                FloatOp::Div => "div",
                FloatOp::Min => "min",
                FloatOp::Max => "max",
            };
            (
                format!("{name}{}{}{ty}", float_mode(*mode), ftz(*z)),
                vec![dst.to_string(), o(a), o(b)],
            )
        }
        Op::Fma {
            round,
            ty,
            dst,
            a,
            b,
            c,
        } => (
            format!("fma{}{ty}", round.suffix()),
            vec![dst.to_string(), o(a), o(b), o(c)],
        ),
        Op::Unary {
            op: uop,
            ty,
            dst,
            src,
        } => {
            let name = match uop {
                UnOp::Neg => "neg",
                UnOp::Abs => "abs",
                UnOp::Not => "not",
                UnOp::Popc => "popc",
                UnOp::Clz => "clz",
                UnOp::Brev => "brev",
            };
            (format!("{name}{ty}"), vec![dst.to_string(), o(src)])
        }
        Op::FloatFn {
            func,
            mode,
            ftz: z,
            ty,
            dst,
            src,
        } => {
            let name = match func {
                FloatFn::Rcp => "rcp",
                FloatFn::Sqrt => "sqrt",
                FloatFn::Rsqrt => "rsqrt",
                FloatFn::Ex2 => "ex2",
                FloatFn::Lg2 => "lg2",
                FloatFn::Sin => "sin",
                FloatFn::Cos => "cos",
                FloatFn::Tanh => "tanh",
            };
            (
                format!("{name}{}{}{ty}", float_mode(*mode), ftz(*z)),
                vec![dst.to_string(), o(src)],
            )
        }
        Op::Setp {
            cmp,
            ty,
            dst,
            a,
            b,
            combine,
        } => {
            let mut args = vec![dst.to_string(), o(a), o(b)];
            let bop = match combine {
                Some((bop, g)) => {
                    args.push(g.to_string());
                    bop.suffix()
                }
                None => "",
            };
            (format!("setp{}{bop}{ty}", cmp.suffix()), args)
        }
        Op::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        } => (
            format!("selp{ty}"),
            vec![dst.to_string(), o(a), o(b), pred.to_string()],
        ),
        Op::Bra { target, uni } => (
            if *uni { "bra.uni" } else { "bra" }.to_string(),
            vec![target.to_string()],
        ),
        Op::Ld {
            space,
            nc,
            ty,
            dsts,
            addr,
        } => {
            let nc = if *nc { ".nc" } else { "" };
            let d = match dsts.as_slice() {
                [one] => one.to_string(),
                many => reg_list(many),
            };
            (
                format!("ld{}{nc}{}{ty}", space.suffix(), vec_suffix(dsts.len())),
                vec![d, address(addr)],
            )
        }
        Op::St {
            space,
            ty,
            addr,
            srcs,
        } => {
            let s = match srcs.as_slice() {
                [one] => o(one),
                many => operand_list(many),
            };
            (
                format!("st{}{}{ty}", space.suffix(), vec_suffix(srcs.len())),
                vec![address(addr), s],
            )
        }
        Op::RedAdd {
            space,
            ty,
            addr,
            srcs,
        } => {
            let noftz = if matches!(ty, Type::F16 | Type::Bf16 | Type::F16x2 | Type::Bf16x2) {
                ".noftz"
            } else {
                ""
            };
            let s = match srcs.as_slice() {
                [one] => o(one),
                many => operand_list(many),
            };
            (
                format!(
                    "red{}.add{noftz}{}{ty}",
                    space.suffix(),
                    vec_suffix(srcs.len())
                ),
                vec![address(addr), s],
            )
        }
        Op::AtomAdd {
            space,
            ty,
            dst,
            addr,
            src,
        } => (
            format!("atom{}.add{ty}", space.suffix()),
            vec![dst.to_string(), address(addr), o(src)],
        ),
        Op::AtomAddRelease { dst, addr, src } => (
            "atom.release.gpu.global.add.u32".to_string(),
            vec![dst.to_string(), address(addr), o(src)],
        ),
        Op::LdAcquire { dst, addr } => (
            "ld.acquire.gpu.global.u32".to_string(),
            vec![dst.to_string(), address(addr)],
        ),
        Op::Cvta {
            to_space,
            space,
            dst,
            src,
        } => {
            let to = if *to_space { ".to" } else { "" };
            (
                format!("cvta{to}{}.u64", space.suffix()),
                vec![dst.to_string(), src.to_string()],
            )
        }
        Op::Cvt {
            round,
            ftz: z,
            sat,
            dst_ty,
            src_ty,
            dst,
            src,
        } => {
            let r = round.map_or("", CvtRound::suffix);
            let sat = if *sat { ".sat" } else { "" };
            (
                format!("cvt{r}{}{sat}{dst_ty}{src_ty}", ftz(*z)),
                vec![dst.to_string(), o(src)],
            )
        }
        Op::CvtPack {
            round,
            relu,
            dst_ty,
            dst,
            hi,
            lo,
        } => {
            let relu = if *relu { ".relu" } else { "" };
            (
                format!("cvt{}{relu}{dst_ty}.f32", round.suffix()),
                vec![dst.to_string(), o(hi), o(lo)],
            )
        }
        Op::Bfe {
            ty,
            dst,
            src,
            pos,
            len,
        } => (
            format!("bfe{ty}"),
            vec![dst.to_string(), o(src), o(pos), o(len)],
        ),
        Op::Bfi {
            dst,
            a,
            b,
            pos,
            len,
        } => (
            "bfi.b32".to_string(),
            vec![dst.to_string(), o(a), o(b), o(pos), o(len)],
        ),
        Op::CvtToFp8x2 { kind, dst, hi, lo } => (
            format!("cvt.rn.satfinite{}.f32", kind.suffix()),
            vec![dst.to_string(), o(hi), o(lo)],
        ),
        Op::CvtFromFp8x2 { kind, dst, src } => (
            format!("cvt.rn.f16x2{}", kind.suffix()),
            vec![dst.to_string(), src.to_string()],
        ),
        Op::Shfl {
            mode,
            dst,
            src,
            lane,
            c,
            member_mask,
        } => (
            format!("shfl.sync{}.b32", mode.suffix()),
            vec![
                dst.to_string(),
                src.to_string(),
                operand(lane),
                operand(c),
                match member_mask {
                    Operand::Imm(m) => format!("0x{:08x}", m & 0xFFFF_FFFF),
                    m => operand(m),
                },
            ],
        ),
        Op::BarSync { id, threads } => {
            let mut args = vec![id.to_string()];
            if let Some(t) = threads {
                args.push(t.to_string());
            }
            ("bar.sync".to_string(), args)
        }
        Op::BarArrive { id, threads } => (
            "bar.arrive".to_string(),
            vec![id.to_string(), threads.to_string()],
        ),
        Op::CpAsync {
            cache,
            dst,
            src,
            size,
            src_size,
        } => {
            let c = match cache {
                CacheOp::Ca => ".ca",
                CacheOp::Cg => ".cg",
            };
            let mut args = vec![address(dst), address(src), size.to_string()];
            if let Some(s) = src_size {
                args.push(o(s));
            }
            (format!("cp.async{c}.shared.global"), args)
        }
        Op::CpAsyncCommit => ("cp.async.commit_group".to_string(), Vec::new()),
        Op::CpAsyncWait { pending } => {
            ("cp.async.wait_group".to_string(), vec![pending.to_string()])
        }
        Op::Ldmatrix {
            num,
            trans,
            dsts,
            addr,
        } => {
            let n = match num {
                LdmatrixNum::X1 => ".x1",
                LdmatrixNum::X2 => ".x2",
                LdmatrixNum::X4 => ".x4",
            };
            let t = if *trans { ".trans" } else { "" };
            (
                format!("ldmatrix.sync.aligned.m8n8{n}{t}.shared.b16"),
                vec![reg_list(dsts), address(addr)],
            )
        }
        Op::Mma {
            shape,
            acc_ty,
            ab,
            d,
            a,
            b,
            c,
        } => {
            let s = match shape {
                MmaShape::M16n8k16 => ".m16n8k16",
                MmaShape::M16n8k8 => ".m16n8k8",
                MmaShape::M16n8k32 => ".m16n8k32",
                MmaShape::M16n8k64 => ".m16n8k64",
            };
            let ab = ab.suffix();
            (
                format!("mma.sync.aligned{s}.row.col{acc_ty}{ab}{ab}{acc_ty}"),
                vec![reg_list(d), reg_list(a), reg_list(b), reg_list(c)],
            )
        }
        Op::FenceProxyAsync => ("fence.proxy.async.shared::cta".to_string(), Vec::new()),
        Op::FenceAcqRelGpu => ("fence.acq_rel.gpu".to_string(), Vec::new()),
        Op::WgmmaFence => ("wgmma.fence.sync.aligned".to_string(), Vec::new()),
        Op::WgmmaCommit => ("wgmma.commit_group.sync.aligned".to_string(), Vec::new()),
        Op::WgmmaWait { pending } => (
            "wgmma.wait_group.sync.aligned".to_string(),
            vec![pending.to_string()],
        ),
        Op::Wgmma {
            n,
            a_ty,
            b_ty,
            d,
            a,
            desc_b,
            scale_d,
            trans_a,
            trans_b,
        } => {
            let a_text = match a {
                WgmmaA::Desc(r) => r.to_string(),
                WgmmaA::Regs(words) => reg_list(words),
            };
            let mut args = vec![reg_list(d), a_text, desc_b.to_string(), scale_d.to_string()];
            if a_ty.scalable() {
                args.extend(["1".to_string(), "1".to_string()]);
            }
            // The fp8 forms take no transpose operands (K-major only); the register-A form
            // only B's (register A is K-major).
            if a_ty.transposable() && b_ty.transposable() {
                if let WgmmaA::Desc(_) = a {
                    args.push(u8::from(*trans_a).to_string());
                }
                args.push(u8::from(*trans_b).to_string());
            }
            (
                format!(
                    "wgmma.mma_async.sync.aligned.m64n{n}k{}{}{}{}",
                    a_ty.k(),
                    a_ty.accumulator(),
                    a_ty.suffix(),
                    b_ty.suffix()
                ),
                args,
            )
        }
        Op::SetMaxNReg { inc, n } => (
            format!(
                "setmaxnreg.{}.sync.aligned.u32",
                if *inc { "inc" } else { "dec" }
            ),
            vec![n.to_string()],
        ),
        Op::MbarrierInit { addr, count } => (
            "mbarrier.init.shared::cta.b64".to_string(),
            vec![address(addr), count.to_string()],
        ),
        Op::MbarrierArrive { addr, expect_tx } => {
            let mut args = vec!["_".to_string(), address(addr)];
            let tx = match expect_tx {
                Some(bytes) => {
                    args.push(bytes.to_string());
                    ".expect_tx"
                }
                None => "",
            };
            (format!("mbarrier.arrive{tx}.shared::cta.b64"), args)
        }
        Op::MbarrierTryWait { dst, addr, parity } => (
            "mbarrier.try_wait.parity.shared::cta.b64".to_string(),
            vec![dst.to_string(), address(addr), o(parity)],
        ),
        Op::TmaLoad {
            dst,
            tmap,
            coords,
            bar,
            multicast,
        } => {
            let mut args = vec![
                address(dst),
                format!("[{tmap}, {}]", reg_list(coords)),
                address(bar),
            ];
            args.extend(multicast.map(|m| m.to_string()));
            (
                format!(
                    "cp.async.bulk.tensor.{}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{}",
                    coords.len(),
                    if multicast.is_some() { ".multicast::cluster" } else { "" }
                ),
                args,
            )
        }
        Op::Mapa { dst, addr, rank } => (
            "mapa.shared::cluster.u32".to_string(),
            vec![dst.to_string(), addr.to_string(), o(rank)],
        ),
        Op::MbarrierArriveCluster { addr } => (
            "mbarrier.arrive.shared::cluster.b64".to_string(),
            vec!["_".to_string(), format!("[{addr}]")],
        ),
        Op::ClusterArrive => (
            "barrier.cluster.arrive.release.aligned".to_string(),
            Vec::new(),
        ),
        Op::ClusterWait => (
            "barrier.cluster.wait.acquire.aligned".to_string(),
            Vec::new(),
        ),
        Op::Ret => ("ret".to_string(), Vec::new()),
        // Printed as a scope by `print_kernel`; this is its call line.
        Op::Vprintf { format, args } => (
            "call.uni".to_string(),
            vec![format!("(vprintf_r), vprintf, ({format}, {args})")],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::builder::{default_cvt_round, KernelBuilder};

    fn reg(class: RegClass, id: u32) -> Reg {
        Reg { class, id }
    }

    #[test]
    fn registers_print_with_their_class_prefix() {
        let names: Vec<String> = RegClass::ALL
            .iter()
            .map(|&c| reg(c, 7).to_string())
            .collect();
        assert_eq!(names, ["%p7", "%h7", "%r7", "%rd7", "%f7", "%fd7"]);
    }

    #[test]
    fn float_immediates_are_bit_exact_hex() {
        assert_eq!(operand(&Operand::F32(1.0)), "0f3F800000");
        assert_eq!(operand(&Operand::F32(-0.0)), "0f80000000");
        assert_eq!(operand(&Operand::F32(f32::INFINITY)), "0f7F800000");
        assert_eq!(operand(&Operand::F64(1.0)), "0d3FF0000000000000");
        assert_eq!(operand(&Operand::Imm(-3)), "-3");
    }

    #[test]
    fn addresses_guards_and_vectors() {
        let rd = reg(RegClass::B64, 2);
        let p = reg(RegClass::Pred, 1);
        let f: Vec<Reg> = (1..=4).map(|i| reg(RegClass::F32, i)).collect();
        let ld = Inst {
            guard: Some(Guard::unless(p)),
            op: Op::Ld {
                space: Space::Global,
                nc: true,
                ty: Type::F32,
                dsts: f.clone(),
                addr: Address::reg(rd).offset(-16),
            },
        };
        assert_eq!(
            inst_to_string(&ld),
            "@!%p1 ld.global.nc.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd2+-16]"
        );
        let st = Inst::from(Op::St {
            space: Space::Shared,
            ty: Type::B32,
            addr: Address::symbol("smem").offset(8),
            srcs: vec![Operand::Imm(0), f[0].into()],
        });
        assert_eq!(inst_to_string(&st), "st.shared.v2.b32 \t[smem+8], {0, %f1}");
    }

    /// `red` as ptxas 12.9 accepts it: `.noftz` on the 16-bit floats and their packed
    /// pairs, the vector suffix before the type (checked against ptxas for sm_90a, PTX 8.1).
    #[test]
    fn red_forms() {
        let rd = reg(RegClass::B64, 3);
        let f: Vec<Operand> = (1..=4).map(|i| reg(RegClass::F32, i).into()).collect();
        let red = |ty, srcs: Vec<Operand>| {
            inst_to_string(&Inst::from(Op::RedAdd {
                space: Space::Global,
                ty,
                addr: Address::reg(rd).offset(8),
                srcs,
            }))
        };
        assert_eq!(
            red(Type::F32, f[..1].to_vec()),
            "red.global.add.f32 \t[%rd3+8], %f1"
        );
        assert_eq!(
            red(Type::F32, f[..2].to_vec()),
            "red.global.add.v2.f32 \t[%rd3+8], {%f1, %f2}"
        );
        assert_eq!(
            red(Type::F32, f.clone()),
            "red.global.add.v4.f32 \t[%rd3+8], {%f1, %f2, %f3, %f4}"
        );
        let r = |i| Operand::from(reg(RegClass::B32, i));
        assert_eq!(
            red(Type::F16x2, vec![r(1)]),
            "red.global.add.noftz.f16x2 \t[%rd3+8], %r1"
        );
        assert_eq!(
            red(Type::Bf16x2, vec![r(1), r(2)]),
            "red.global.add.noftz.v2.bf16x2 \t[%rd3+8], {%r1, %r2}"
        );
    }

    #[test]
    fn cvt_pack_puts_the_first_ptx_source_in_the_upper_half() {
        let mut k = KernelBuilder::new("k");
        let lo = k.new_reg(Type::F32);
        let hi = k.new_reg(Type::F32);
        let d = k.cvt_pack(Type::Bf16x2, lo, hi);
        let kernel = k.finish();
        let Some(Stmt::Inst(i)) = kernel.body.last() else {
            panic!("no instruction");
        };
        assert_eq!(d, reg(RegClass::B32, 1));
        assert_eq!(inst_to_string(i), "cvt.rn.bf16x2.f32 \t%r1, %f2, %f1");
    }

    #[test]
    fn cvt_roundings_follow_the_ptx_rules() {
        use Type::*;
        assert_eq!(default_cvt_round(F16, F32), Some(CvtRound::Rn));
        assert_eq!(default_cvt_round(Bf16, F16), Some(CvtRound::Rn));
        assert_eq!(default_cvt_round(F32, F16), None);
        assert_eq!(default_cvt_round(F32, F32), None);
        assert_eq!(default_cvt_round(S32, F32), Some(CvtRound::Rzi));
        assert_eq!(default_cvt_round(F32, U64), Some(CvtRound::Rn));
        assert_eq!(default_cvt_round(U64, U32), None);
    }

    #[test]
    fn declarations_cover_the_highest_register_shared_is_declared_once_and_locals_in_the_body() {
        let mut k = KernelBuilder::new("a");
        k.dynamic_shared("smem", 16);
        let p = k.setp(Cmp::Lt, Type::S32, 1, 2);
        let r = k.selp(Type::S32, 1, 0, p);
        let x = k.new_reg(Type::S32);
        let _unused = k.new_reg(Type::S32);
        k.emit(Op::Int {
            op: IntOp::Add,
            ty: Type::S32,
            dst: x,
            a: r.into(),
            b: Operand::Special(SpecialReg::TidX),
        });
        let top = k.label("top");
        k.place(&top);
        k.comment("two\nlines");
        k.ret();
        let mut b = KernelBuilder::new("b");
        b.dynamic_shared("smem", 16);
        let acc = b.local_array("__local_acc", 4, 16);
        let a = b.mov(Type::U32, Operand::Symbol(acc));
        b.st(
            Space::Local,
            Type::F32,
            Address::reg(a).offset(4),
            vec![Operand::F32(1.0)],
        );
        b.ret();
        let m = Module::new(Target::Sm90a)
            .with_kernel(k.finish())
            .with_kernel(b.finish());
        let text = print_module(&m);
        let expected = "\
.version 8.0
.target sm_90a
.address_size 64

.extern .shared .align 16 .b8 smem[];

.visible .entry a()
{
\t.reg .pred \t%p<2>;
\t.reg .b32 \t%r<3>;

\tsetp.lt.s32 \t%p1, 1, 2;
\tselp.s32 \t%r1, 1, 0, %p1;
\tadd.s32 \t%r2, %r1, %tid.x;
$L__top_1:
\t// two lines
\tret;
}

.visible .entry b()
{
\t.reg .b32 \t%r<2>;
\t.local .align 4 .b8 \t__local_acc[16];

\tmov.u32 \t%r1, __local_acc;
\tst.local.f32 \t[%r1+4], 0f3F800000;
\tret;
}
";
        assert_eq!(text, expected);
    }
}
