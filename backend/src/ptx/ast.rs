//! The PTX AST: a module of entry kernels whose bodies are typed instructions over virtual
//! registers. Nothing here is a string of PTX: every opcode, modifier and operand is an enum
//! or a typed value, so codegen cannot misspell an instruction and a later pass can read
//! which registers an instruction defines and uses (`Inst::defs` / `Inst::uses`).
//!
//! Operand order always follows the PTX ISA (destination first). The few instructions whose
//! operand order is surprising say so on their variant.

use std::fmt;
pub use tlc_ir::Target;

/// A PTX ISA version, printed as `.version MAJOR.MINOR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PtxVersion {
    pub major: u32,
    pub minor: u32,
}

impl PtxVersion {
    /// The ISA of a module whose kernels take TMA tensor maps: 8.3, the version of the
    /// hand-written TMA kernel that passed on an H100 (`runtime/examples/tma_copy.ptx`).
    /// ptxas itself accepts `cvta.param` (the tensor map's generic address) from 7.7, but
    /// only 8.3 was measured; modules without maps keep their target's version.
    pub const TENSOR_MAPS: PtxVersion = PtxVersion { major: 8, minor: 3 };

    /// The ISA of a module with a vector `red` (`red.global.add.v2.f32`): 8.1, where the PTX
    /// ISA introduced them (ptxas refuses them under 8.0).
    pub const VECTOR_RED: PtxVersion = PtxVersion { major: 8, minor: 1 };

    /// The target's PTX ISA version (its description's `ptx_isa`: 8.0 for both targets, the
    /// lowest that has `sm_90a`; any CUDA 12.x ptxas or driver accepts it).
    pub fn for_target(target: Target) -> PtxVersion {
        let (major, minor) = target.desc().ptx_isa;
        PtxVersion { major, minor }
    }
}

impl fmt::Display for PtxVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A PTX module: `.version`, `.target`, `.address_size 64`, and its kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub version: PtxVersion,
    pub target: Target,
    pub kernels: Vec<Kernel>,
}

impl Module {
    pub fn new(target: Target) -> Module {
        Module {
            version: PtxVersion::for_target(target),
            target,
            kernels: Vec::new(),
        }
    }

    pub fn with_kernel(mut self, kernel: Kernel) -> Module {
        self.kernels.push(kernel);
        self
    }
}

/// One `.visible .entry`.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// In PTX parameter order (for tlc: tensor pointers, then dims; see `docs/manifest.md`).
    pub params: Vec<Param>,
    /// Shared-memory variables this kernel uses, printed at module scope before it.
    pub shared: Vec<SharedVar>,
    /// Per-thread `.local` arrays, declared at the top of the body.
    pub locals: Vec<LocalVar>,
    /// Constant byte arrays in global memory (`vprintf`'s format strings), printed at
    /// module scope before the kernel.
    pub strings: Vec<GlobalBytes>,
    /// `.reqntid x, y, z`: the exact block shape, which lets ptxas budget registers.
    pub reqntid: Option<[u32; 3]>,
    /// `.maxnreg N`.
    pub maxnreg: Option<u32>,
    /// `.minnctapersm N`: ptxas budgets registers so that N blocks fit on one SM (with
    /// `.reqntid`, this fixes the register count at entry, which `setmaxnreg` needs).
    pub minnctapersm: Option<u32>,
    /// `.reqnctapercluster x, y, z`: the kernel runs in thread-block clusters of this
    /// shape (a plain launch becomes a cluster launch).
    pub reqnctapercluster: Option<[u32; 3]>,
    pub body: Vec<Stmt>,
}

/// A kernel parameter: `.param .u64 NAME`, or a byte array passed by value,
/// `.param .align A .b8 NAME[N]` (a TMA tensor map).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The full PTX symbol (the builder makes it `<entry>_param_<name>` for scalars,
    /// `<entry>_tmap<i>` for tensor maps).
    pub symbol: String,
    /// The scalar's type; `.b8` for a byte array.
    pub ty: Type,
    /// `Some` for a byte array: its alignment and length.
    pub bytes: Option<ParamBytes>,
}

/// The shape of a by-value byte-array parameter: `.align ALIGN .b8 NAME[LEN]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamBytes {
    pub align: u32,
    pub len: u32,
}

/// A `.shared` array at module scope: `.extern .shared .align A .b8 NAME[];` for the
/// dynamic arena (`bytes: None`), `.shared .align A .b8 NAME[BYTES];` for a static one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedVar {
    pub name: String,
    pub align: u32,
    pub bytes: Option<u32>,
}

impl SharedVar {
    /// The dynamic shared arena, `.extern .shared .align 16 .b8 smem[];`.
    pub fn dynamic(name: &str) -> SharedVar {
        SharedVar {
            name: name.to_string(),
            align: 16,
            bytes: None,
        }
    }
}

/// A per-thread array in local memory: `.local .align A .b8 NAME[BYTES];`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalVar {
    pub name: String,
    pub align: u32,
    pub bytes: u32,
}

/// `.global .align 1 .b8 NAME[N] = {…};`: constant bytes (a NUL-terminated string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalBytes {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// A line of a kernel body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Inst(Inst),
    Label(Label),
    /// `// text` (one line: newlines are printed as spaces).
    Comment(String),
}

/// A branch target, printed `$L__<hint>_<id>` (the id keeps it unique, the hint readable).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label {
    pub id: u32,
    pub hint: String,
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "$L__{}_{}", self.hint, self.id)
    }
}

/// The register classes: how registers are declared (`.reg .b32 %r<N>;`) and named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RegClass {
    /// `.pred`, `%p`.
    Pred,
    /// `.b16`, `%h`: f16 / bf16 scalars, 16-bit integers (and 8-bit loads).
    B16,
    /// `.b32`, `%r`: 32-bit integers, packed f16x2 / bf16x2.
    B32,
    /// `.b64`, `%rd`: 64-bit integers and addresses.
    B64,
    /// `.f32`, `%f`.
    F32,
    /// `.f64`, `%fd`.
    F64,
}

impl RegClass {
    pub const ALL: [RegClass; 6] = [
        RegClass::Pred,
        RegClass::B16,
        RegClass::B32,
        RegClass::B64,
        RegClass::F32,
        RegClass::F64,
    ];

    pub fn prefix(self) -> &'static str {
        match self {
            RegClass::Pred => "%p",
            RegClass::B16 => "%h",
            RegClass::B32 => "%r",
            RegClass::B64 => "%rd",
            RegClass::F32 => "%f",
            RegClass::F64 => "%fd",
        }
    }

    /// The declaration type, `.b32` in `.reg .b32 %r<N>;`.
    pub fn decl_type(self) -> &'static str {
        match self {
            RegClass::Pred => ".pred",
            RegClass::B16 => ".b16",
            RegClass::B32 => ".b32",
            RegClass::B64 => ".b64",
            RegClass::F32 => ".f32",
            RegClass::F64 => ".f64",
        }
    }

    /// The register class that holds a value of `ty`.
    pub fn of(ty: Type) -> RegClass {
        match ty {
            Type::Pred => RegClass::Pred,
            Type::B8 | Type::U8 | Type::S8 => RegClass::B16,
            Type::B16 | Type::U16 | Type::S16 | Type::F16 | Type::Bf16 => RegClass::B16,
            Type::B32 | Type::U32 | Type::S32 | Type::F16x2 | Type::Bf16x2 => RegClass::B32,
            Type::B64 | Type::U64 | Type::S64 => RegClass::B64,
            Type::F32 => RegClass::F32,
            Type::F64 => RegClass::F64,
        }
    }
}

/// A virtual register: a class and an id unique within that class in one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reg {
    pub class: RegClass,
    pub id: u32,
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.class.prefix(), self.id)
    }
}

/// Instruction and memory types (the `.u32` in `add.u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Pred,
    B8,
    B16,
    B32,
    B64,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    F16x2,
    Bf16,
    Bf16x2,
    F32,
    F64,
}

impl Type {
    pub fn suffix(self) -> &'static str {
        match self {
            Type::Pred => ".pred",
            Type::B8 => ".b8",
            Type::B16 => ".b16",
            Type::B32 => ".b32",
            Type::B64 => ".b64",
            Type::U8 => ".u8",
            Type::U16 => ".u16",
            Type::U32 => ".u32",
            Type::U64 => ".u64",
            Type::S8 => ".s8",
            Type::S16 => ".s16",
            Type::S32 => ".s32",
            Type::S64 => ".s64",
            Type::F16 => ".f16",
            Type::F16x2 => ".f16x2",
            Type::Bf16 => ".bf16",
            Type::Bf16x2 => ".bf16x2",
            Type::F32 => ".f32",
            Type::F64 => ".f64",
        }
    }

    /// Size in bytes (a predicate counts as 1).
    pub fn bytes(self) -> u32 {
        match self {
            Type::Pred | Type::B8 | Type::U8 | Type::S8 => 1,
            Type::B16 | Type::U16 | Type::S16 | Type::F16 | Type::Bf16 => 2,
            Type::B32 | Type::U32 | Type::S32 | Type::F32 | Type::F16x2 | Type::Bf16x2 => 4,
            Type::B64 | Type::U64 | Type::S64 | Type::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            Type::F16 | Type::F16x2 | Type::Bf16 | Type::Bf16x2 | Type::F32 | Type::F64
        )
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Type::S8 | Type::S16 | Type::S32 | Type::S64)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.suffix())
    }
}

/// Read-only special registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialReg {
    TidX,
    TidY,
    TidZ,
    NtidX,
    NtidY,
    NtidZ,
    CtaidX,
    CtaidY,
    CtaidZ,
    NctaidX,
    NctaidY,
    NctaidZ,
    LaneId,
    WarpId,
}

impl SpecialReg {
    pub fn name(self) -> &'static str {
        match self {
            SpecialReg::TidX => "%tid.x",
            SpecialReg::TidY => "%tid.y",
            SpecialReg::TidZ => "%tid.z",
            SpecialReg::NtidX => "%ntid.x",
            SpecialReg::NtidY => "%ntid.y",
            SpecialReg::NtidZ => "%ntid.z",
            SpecialReg::CtaidX => "%ctaid.x",
            SpecialReg::CtaidY => "%ctaid.y",
            SpecialReg::CtaidZ => "%ctaid.z",
            SpecialReg::NctaidX => "%nctaid.x",
            SpecialReg::NctaidY => "%nctaid.y",
            SpecialReg::NctaidZ => "%nctaid.z",
            SpecialReg::LaneId => "%laneid",
            SpecialReg::WarpId => "%warpid",
        }
    }
}

/// A source operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(Reg),
    /// An integer immediate, printed in decimal.
    Imm(i64),
    /// An f32 immediate, printed bit-exact as `0f3F800000`.
    F32(f32),
    /// An f64 immediate, printed bit-exact as `0d3FF0000000000000`.
    F64(f64),
    Special(SpecialReg),
    /// The address of a variable (`mov.u32 %r1, smem;`).
    Symbol(String),
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Operand {
        Operand::Reg(r)
    }
}

impl From<i64> for Operand {
    fn from(v: i64) -> Operand {
        Operand::Imm(v)
    }
}

impl From<i32> for Operand {
    fn from(v: i32) -> Operand {
        Operand::Imm(i64::from(v))
    }
}

impl From<u32> for Operand {
    fn from(v: u32) -> Operand {
        Operand::Imm(i64::from(v))
    }
}

impl From<f32> for Operand {
    fn from(v: f32) -> Operand {
        Operand::F32(v)
    }
}

impl From<SpecialReg> for Operand {
    fn from(s: SpecialReg) -> Operand {
        Operand::Special(s)
    }
}

/// A memory address `[base+offset]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub base: AddrBase,
    pub offset: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrBase {
    /// A 64-bit address, or a 32-bit one for `.shared`.
    Reg(Reg),
    /// A variable or parameter symbol.
    Symbol(String),
}

impl Address {
    pub fn reg(r: Reg) -> Address {
        Address {
            base: AddrBase::Reg(r),
            offset: 0,
        }
    }

    pub fn symbol(name: &str) -> Address {
        Address {
            base: AddrBase::Symbol(name.to_string()),
            offset: 0,
        }
    }

    /// The same base, `bytes` further on.
    pub fn offset(mut self, bytes: i64) -> Address {
        self.offset = self.offset.wrapping_add(bytes);
        self
    }
}

/// State spaces of loads, stores and `cvta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    Param,
    Local,
}

impl Space {
    pub fn suffix(self) -> &'static str {
        match self {
            Space::Global => ".global",
            Space::Shared => ".shared",
            Space::Param => ".param",
            Space::Local => ".local",
        }
    }
}

/// `.v2` / `.v4` vector width of a load or store (`One` prints nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VecWidth {
    One,
    V2,
    V4,
}

impl VecWidth {
    pub fn lanes(self) -> usize {
        match self {
            VecWidth::One => 1,
            VecWidth::V2 => 2,
            VecWidth::V4 => 4,
        }
    }

    pub fn from_lanes(n: usize) -> Option<VecWidth> {
        match n {
            1 => Some(VecWidth::One),
            2 => Some(VecWidth::V2),
            4 => Some(VecWidth::V4),
            _ => None,
        }
    }
}

/// The multiply modes: `.lo` (low half, same width), `.hi`, `.wide` (double width result).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MulMode {
    Lo,
    Hi,
    Wide,
}

/// Integer and bitwise binary ops with `d = a op b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntOp {
    Add,
    Sub,
    Mul(MulMode),
    /// Truncating division (C semantics), not floor division.
    Div,
    /// C remainder (sign of the dividend).
    Rem,
    Min,
    Max,
    /// `shl.bN`: the shift amount is always a `.u32` operand.
    Shl,
    /// `shr.{u,s}N`: logical for unsigned, arithmetic for signed types.
    Shr,
    And,
    Or,
    Xor,
}

/// Floating-point rounding of arithmetic (`.rn` etc.).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FRound {
    Rn,
    Rz,
    Rm,
    Rp,
}

impl FRound {
    pub fn suffix(self) -> &'static str {
        match self {
            FRound::Rn => ".rn",
            FRound::Rz => ".rz",
            FRound::Rm => ".rm",
            FRound::Rp => ".rp",
        }
    }
}

/// Floating-point binary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatOp {
    Add,
    Sub,
    Mul,
    /// `div` needs a rounding (`.rn` is IEEE) or `Approx`/`Full` via `FloatMode`.
    Div,
    Min,
    Max,
}

/// How a floating-point op rounds: `Default` prints nothing (add/sub/mul default to `.rn`
/// but may be fused by ptxas into an fma, an explicit `.rn` forbids that).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatMode {
    Default,
    Round(FRound),
    Approx,
    /// `.approx.ftz`: subnormal inputs and results flushed to zero.
    ApproxFtz,
    Full,
}

/// Unary ops: `neg`, `abs` (ints and floats), `not` and `popc`/`clz`/`brev` (bit types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Abs,
    Not,
    Popc,
    Clz,
    Brev,
}

/// Floating-point special functions (`rcp`, `sqrt`, `rsqrt`, `ex2`, `lg2`, `sin`, `cos`,
/// `tanh`); with `FloatMode::Approx` or a rounding (`rcp.rn.f32`, `sqrt.rn.f32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatFn {
    Rcp,
    Sqrt,
    Rsqrt,
    Ex2,
    Lg2,
    Sin,
    Cos,
    Tanh,
}

/// `setp` comparisons. `Lo`/`Ls`/`Hi`/`Hs` are the unsigned spellings; the `*u` forms and
/// `Num`/`Nan` are float comparisons that are true on NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

impl Cmp {
    pub fn suffix(self) -> &'static str {
        match self {
            Cmp::Eq => ".eq",
            Cmp::Ne => ".ne",
            Cmp::Lt => ".lt",
            Cmp::Le => ".le",
            Cmp::Gt => ".gt",
            Cmp::Ge => ".ge",
            Cmp::Lo => ".lo",
            Cmp::Ls => ".ls",
            Cmp::Hi => ".hi",
            Cmp::Hs => ".hs",
            Cmp::Equ => ".equ",
            Cmp::Neu => ".neu",
            Cmp::Ltu => ".ltu",
            Cmp::Leu => ".leu",
            Cmp::Gtu => ".gtu",
            Cmp::Geu => ".geu",
            Cmp::Num => ".num",
            Cmp::Nan => ".nan",
        }
    }
}

/// `.and` / `.or` / `.xor`: how `setp` combines its comparison with a predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoolOp {
    And,
    Or,
    Xor,
}

impl BoolOp {
    pub fn suffix(self) -> &'static str {
        match self {
            BoolOp::And => ".and",
            BoolOp::Or => ".or",
            BoolOp::Xor => ".xor",
        }
    }
}

/// A predicate guard `@%p` / `@!%p` (also a predicate operand `%p` / `!%p`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    pub pred: Reg,
    pub negated: bool,
}

impl Guard {
    pub fn when(pred: Reg) -> Guard {
        Guard {
            pred,
            negated: false,
        }
    }

    pub fn unless(pred: Reg) -> Guard {
        Guard {
            pred,
            negated: true,
        }
    }
}

impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negated {
            write!(f, "!{}", self.pred)
        } else {
            write!(f, "{}", self.pred)
        }
    }
}

/// Rounding of `cvt`: float roundings (`.rn` …) for results that are floats, integer
/// roundings (`.rni` …) for float → int. PTX requires one exactly where precision can be
/// lost (float → narrower float, float → int, int → float); see `Op::Cvt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CvtRound {
    Rn,
    Rz,
    Rm,
    Rp,
    /// `.rna` (to nearest, ties away): only `cvt.rna.tf32.f32`.
    Rna,
    Rni,
    Rzi,
    Rmi,
    Rpi,
}

impl CvtRound {
    pub fn suffix(self) -> &'static str {
        match self {
            CvtRound::Rn => ".rn",
            CvtRound::Rz => ".rz",
            CvtRound::Rm => ".rm",
            CvtRound::Rp => ".rp",
            CvtRound::Rna => ".rna",
            CvtRound::Rni => ".rni",
            CvtRound::Rzi => ".rzi",
            CvtRound::Rmi => ".rmi",
            CvtRound::Rpi => ".rpi",
        }
    }
}

/// The two 8-bit float formats of the `cvt` instructions: `.e4m3x2` (OCP E4M3FN) and
/// `.e5m2x2` (OCP E5M2), two values packed in a `.b16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Kind {
    E4m3,
    E5m2,
}

impl Fp8Kind {
    pub fn suffix(self) -> &'static str {
        match self {
            Fp8Kind::E4m3 => ".e4m3x2",
            Fp8Kind::E5m2 => ".e5m2x2",
        }
    }
}

/// The operand types of `wgmma.mma_async` from shared memory: `.f16`, `.bf16` (k16, both
/// majors) and `.e4m3`, `.e5m2` (k32, K-major only; the two may mix). The k and the majors
/// are `tlc_ir::wgmma`'s facts of the IR dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgmmaInput {
    F16,
    Bf16,
    E4m3,
    E5m2,
    /// int8 (`.s8`), into an int32 accumulator (`.s32`).
    S8,
}

impl WgmmaInput {
    /// The input type of IR dtype `d`, if wgmma takes it.
    pub fn of(d: tlc_ir::DType) -> Option<WgmmaInput> {
        use tlc_ir::DType;
        Some(match d {
            DType::Float16 => WgmmaInput::F16,
            DType::BFloat16 => WgmmaInput::Bf16,
            DType::Float8E4M3 => WgmmaInput::E4m3,
            DType::Float8E5M2 => WgmmaInput::E5m2,
            DType::Int8 => WgmmaInput::S8,
            _ => return None,
        })
    }

    pub fn dtype(self) -> tlc_ir::DType {
        use tlc_ir::DType;
        match self {
            WgmmaInput::F16 => DType::Float16,
            WgmmaInput::Bf16 => DType::BFloat16,
            WgmmaInput::E4m3 => DType::Float8E4M3,
            WgmmaInput::E5m2 => DType::Float8E5M2,
            WgmmaInput::S8 => DType::Int8,
        }
    }

    pub fn suffix(self) -> &'static str {
        match self {
            WgmmaInput::F16 => ".f16",
            WgmmaInput::Bf16 => ".bf16",
            WgmmaInput::E4m3 => ".e4m3",
            WgmmaInput::E5m2 => ".e5m2",
            WgmmaInput::S8 => ".s8",
        }
    }

    /// The accumulator's type suffix: `.s32` for integer inputs, else `.f32`.
    pub fn accumulator(self) -> &'static str {
        match self {
            WgmmaInput::S8 => ".s32",
            _ => ".f32",
        }
    }

    /// Whether the instruction takes the scale immediates `imm-scale-a`, `imm-scale-b`
    /// (the floating-point forms; the integer form has none).
    pub fn scalable(self) -> bool {
        !matches!(self, WgmmaInput::S8)
    }

    /// The instruction's k.
    pub fn k(self) -> i64 {
        tlc_ir::wgmma::instruction_k(self.dtype()).unwrap_or(16)
    }

    /// Whether the instruction has transpose operands (`imm-trans-a`, `imm-trans-b`).
    pub fn transposable(self) -> bool {
        !tlc_ir::wgmma::k_major_only(self.dtype())
    }
}

/// Where a `wgmma.mma_async` takes A from: a shared-memory descriptor (a 64-bit register),
/// or registers (the register-A form: four `.b32` words of two 16-bit elements each, the
/// lower element in the low half).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WgmmaA {
    Desc(Reg),
    Regs([Reg; 4]),
}

/// `cp.async` cache policy: `.ca` (L1 + L2; 4, 8 or 16 bytes) or `.cg` (L2 only; 16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheOp {
    Ca,
    Cg,
}

/// How `shfl.sync` picks the source lane `j` of lane `l` (`b` its lane operand): `.bfly`
/// `l ^ b`, `.down` `l + b` (lanes past 31 keep their own value), `.up` `l - b` (lanes
/// below 0 keep theirs), `.idx` lane `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    Bfly,
    Down,
    Up,
    Idx,
}

impl ShflMode {
    pub fn suffix(self) -> &'static str {
        match self {
            ShflMode::Bfly => ".bfly",
            ShflMode::Down => ".down",
            ShflMode::Up => ".up",
            ShflMode::Idx => ".idx",
        }
    }

    /// The `c` operand over a whole warp: the segment's last lane (`0x1f`), except for
    /// `.up`, whose clamp is the segment's first lane (0).
    pub fn clamp(self) -> u32 {
        match self {
            ShflMode::Up => 0,
            ShflMode::Bfly | ShflMode::Down | ShflMode::Idx => 0x1f,
        }
    }
}

/// Number of 8x8 matrices an `ldmatrix` loads: `.x1`, `.x2`, `.x4` (1, 2, 4 destination
/// registers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LdmatrixNum {
    X1,
    X2,
    X4,
}

impl LdmatrixNum {
    /// The form loading `num` matrices (1, 2 or 4).
    pub fn of(num: i64) -> Option<LdmatrixNum> {
        match num {
            1 => Some(LdmatrixNum::X1),
            2 => Some(LdmatrixNum::X2),
            4 => Some(LdmatrixNum::X4),
            _ => None,
        }
    }

    pub fn regs(self) -> usize {
        match self {
            LdmatrixNum::X1 => 1,
            LdmatrixNum::X2 => 2,
            LdmatrixNum::X4 => 4,
        }
    }
}

/// `mma.sync` shapes tlc uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaShape {
    /// `m16n8k16`: A 4 regs, B 2 regs, C/D 4 f32 regs (f16/bf16 inputs).
    M16n8k16,
    /// `m16n8k8`: A 2 regs, B 1 reg, C/D 4 f32 regs.
    M16n8k8,
    /// `m16n8k32`: A 4 regs, B 2 regs, C/D 4 s32 regs (s8 inputs, four to a register).
    M16n8k32,
    /// `m16n8k64`: A 4 regs, B 2 regs, C/D 4 s32 regs (s4 inputs, eight to a register).
    M16n8k64,
}

/// The multiplicands' type of an `mma.sync` (`.f16`, `.bf16`, `.s8`, `.s4`): a type of
/// the instruction, not of a register (an s4 lives eight to a b32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaInput {
    F16,
    Bf16,
    S8,
    S4,
}

impl MmaInput {
    pub fn suffix(self) -> &'static str {
        match self {
            MmaInput::F16 => ".f16",
            MmaInput::Bf16 => ".bf16",
            MmaInput::S8 => ".s8",
            MmaInput::S4 => ".s4",
        }
    }
}

/// One instruction with its optional guard.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    pub guard: Option<Guard>,
    pub op: Op,
}

impl From<Op> for Inst {
    fn from(op: Op) -> Inst {
        Inst { guard: None, op }
    }
}

/// The instructions.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `mov.T d, a` (a register, immediate, special register or a symbol's address).
    Mov { ty: Type, dst: Reg, src: Operand },
    /// `mov.bN d, {a, b, ...}`: packs lanes into one register; the FIRST lane is the LOW
    /// half (`mov.b32 %r1, {%h_lo, %h_hi};`).
    Pack {
        ty: Type,
        dst: Reg,
        srcs: Vec<Operand>,
    },
    /// `mov.bN {d0, d1, ...}, a`: the inverse of `Pack` (first destination = low half).
    Unpack { ty: Type, dsts: Vec<Reg>, src: Reg },
    /// `add/sub/mul/div/rem/min/max/shl/shr/and/or/xor.T d, a, b`. With `Mul(Wide)` the
    /// type is the SOURCE type (`mul.wide.u32` writes a 64-bit register).
    Int {
        op: IntOp,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    /// `mad.{lo,hi,wide}.T d, a, b, c` = a * b + c (`Wide`: `c` and `d` are double width).
    Mad {
        mode: MulMode,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    /// Floating-point `add/sub/mul/div/min/max{.rnd}{.ftz}.T d, a, b`.
    Float {
        op: FloatOp,
        mode: FloatMode,
        ftz: bool,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    /// `fma.rnd{.ftz}{.sat}.T d, a, b, c` (the rounding is mandatory for fma).
    Fma {
        round: FRound,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    /// `neg/abs/not/popc/clz/brev.T d, a` (`popc`/`clz` write a `.u32` result).
    Unary {
        op: UnOp,
        ty: Type,
        dst: Reg,
        src: Operand,
    },
    /// `rcp/sqrt/rsqrt/ex2/lg2/sin/cos/tanh.{approx|rnd}{.ftz}.T d, a`.
    FloatFn {
        func: FloatFn,
        mode: FloatMode,
        ftz: bool,
        ty: Type,
        dst: Reg,
        src: Operand,
    },
    /// `setp.cmp{.bool}.T p, a, b{, c}`: p = (a cmp b) [bool c].
    Setp {
        cmp: Cmp,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        combine: Option<(BoolOp, Guard)>,
    },
    /// `selp.T d, a, b, p`: d = p ? a : b.
    Selp {
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        pred: Reg,
    },
    /// `bra{.uni} L` (guard it with `Inst::guard` for a conditional branch).
    Bra { target: Label, uni: bool },
    /// `ld{.space}{.nc}{.vN}.T d, [addr]` (`.nc` only for `.global`: read-only data path).
    Ld {
        space: Space,
        nc: bool,
        ty: Type,
        dsts: Vec<Reg>,
        addr: Address,
    },
    /// `st{.space}{.vN}.T [addr], a`.
    St {
        space: Space,
        ty: Type,
        addr: Address,
        srcs: Vec<Operand>,
    },
    /// `red{.space}.add{.noftz}{.vN}.T [addr], a`: an atomic add with no result (`.noftz`
    /// for the 16-bit float types and their packed pairs, as PTX requires). Several sources
    /// make the vector form (`.global` only, sm_90 and PTX ISA 8.1: `TargetDesc::vector_red`),
    /// each element added atomically on its own.
    RedAdd {
        space: Space,
        ty: Type,
        addr: Address,
        srcs: Vec<Operand>,
    },
    /// `atom{.space}.add.T d, [addr], a`: the atomic add of `red` that also returns the
    /// element's old value in `d`.
    AtomAdd {
        space: Space,
        ty: Type,
        dst: Reg,
        addr: Address,
        src: Operand,
    },
    /// `atom.release.gpu.global.add.u32 d, [addr], a`: a grid barrier's arrival
    /// (`codegen/grid_sync.rs`). The release makes the writes the block ordered before it
    /// (its `bar.sync`) visible to every thread that acquires the count it leaves.
    AtomAddRelease {
        dst: Reg,
        addr: Address,
        src: Operand,
    },
    /// `ld.acquire.gpu.global.u32 d, [addr]`: a grid barrier's wait reads the count (each
    /// read a fresh load, never one value reused).
    LdAcquire { dst: Reg, addr: Address },
    /// `fence.acq_rel.gpu`: around a grid barrier's arrival and wait, as cooperative
    /// groups' `grid.sync()` fences (`__threadfence()`), so the block's plain accesses on
    /// either side are ordered with the other blocks' at GPU scope.
    FenceAcqRelGpu,
    /// `cvta{.to}.space.u64 d, a`: generic ↔ state-space address.
    Cvta {
        to_space: bool,
        space: Space,
        dst: Reg,
        src: Reg,
    },
    /// `cvt{.rnd}{.ftz}{.sat}.D.S d, a`.
    Cvt {
        round: Option<CvtRound>,
        ftz: bool,
        sat: bool,
        dst_ty: Type,
        src_ty: Type,
        dst: Reg,
        src: Operand,
    },
    /// `cvt.rnd{.relu}.{f16x2|bf16x2}.f32 d, a, b`: two f32 into one packed register.
    /// NOTE the PTX order: `a` goes to the UPPER half, `b` to the LOWER half.
    CvtPack {
        round: CvtRound,
        relu: bool,
        dst_ty: Type,
        dst: Reg,
        hi: Operand,
        lo: Operand,
    },
    /// `bfe.{u32|s32} d, a, pos, len`: the `len` bits of `a` from bit `pos`, zero- (`.u32`)
    /// or sign-extended (`.s32`).
    Bfe {
        ty: Type,
        dst: Reg,
        src: Operand,
        pos: Operand,
        len: Operand,
    },
    /// `bfi.b32 d, a, b, pos, len`: `b` with its `len` bits from bit `pos` replaced by the
    /// low `len` bits of `a`.
    Bfi {
        dst: Reg,
        a: Operand,
        b: Operand,
        pos: Operand,
        len: Operand,
    },
    /// `cvt.rn.satfinite.{e4m3x2|e5m2x2}.f32 d, hi, lo` (sm_89+): two f32 rounded to the
    /// fp8 format (to nearest even, saturating to ± max finite, NaN kept) into the two bytes
    /// of the `.b16` `d`. NOTE the PTX order: `hi` goes to the UPPER byte.
    CvtToFp8x2 {
        kind: Fp8Kind,
        dst: Reg,
        hi: Operand,
        lo: Operand,
    },
    /// `cvt.rn.f16x2.{e4m3x2|e5m2x2} d, a` (sm_89+): the two fp8 bytes of the `.b16` `a`
    /// into the f16 halves of the `.b32` `d` (low byte to low half), exactly.
    CvtFromFp8x2 { kind: Fp8Kind, dst: Reg, src: Reg },
    /// `bar.sync id{, threads}`.
    BarSync { id: u32, threads: Option<u32> },
    /// `bar.arrive id, threads`.
    BarArrive { id: u32, threads: u32 },
    /// `shfl.sync.{mode}.b32 d, a, lane, c, member_mask`: `d` = `a` of the lane `mode`
    /// picks with `lane` (an immediate or a register) within the segments and clamp that
    /// `c` encodes (`ShflMode::clamp` over the whole warp); every lane of `member_mask`
    /// executes it together.
    Shfl {
        mode: ShflMode,
        dst: Reg,
        src: Reg,
        lane: Operand,
        c: Operand,
        member_mask: Operand,
    },
    /// `cp.async.{ca|cg}.shared.global [dst], [src], size{, src_size}`: with `src_size`
    /// fewer than `size` bytes are read and the rest zero-filled (masked tails).
    CpAsync {
        cache: CacheOp,
        dst: Address,
        src: Address,
        size: u32,
        src_size: Option<Operand>,
    },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group N` (at most N groups still pending).
    CpAsyncWait { pending: u32 },
    /// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 {d...}, [addr]`.
    Ldmatrix {
        num: LdmatrixNum,
        trans: bool,
        dsts: Vec<Reg>,
        addr: Address,
    },
    /// `mma.sync.aligned.SHAPE.row.col.ACC.AB.AB.ACC {d}, {a}, {b}, {c}` with `ab` F16
    /// or Bf16 and `acc_ty` F32 (four f32 registers in `c` and `d`) — or F16 with F16
    /// multiplicands (two b32 registers of f16x2 in `c` and `d`).
    Mma {
        shape: MmaShape,
        acc_ty: Type,
        ab: MmaInput,
        d: Vec<Reg>,
        a: Vec<Reg>,
        b: Vec<Reg>,
        c: Vec<Reg>,
    },
    /// `fence.proxy.async.shared::cta` (sm_90): earlier generic-proxy shared-memory accesses
    /// of this thread are ordered before later async-proxy ones (wgmma, TMA).
    FenceProxyAsync,
    /// `wgmma.fence.sync.aligned`.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned N`.
    WgmmaWait { pending: u32 },
    /// `wgmma.mma_async.sync.aligned.m64nNkK.f32.A.B {d}, a, desc_b, scale_d, 1, 1,
    /// trans_a, trans_b`: `d` the `n / 2` f32 accumulators (read unless `scale_d` is false,
    /// and written), `a` A's descriptor or its four registers ([`WgmmaA`]; the register
    /// form has no `trans_a`), the descriptors 64-bit registers, `scale_d` a predicate; `K`
    /// the inputs' k (16, or 32 for fp8, whose form has no transpose operands).
    Wgmma {
        n: u32,
        a_ty: WgmmaInput,
        b_ty: WgmmaInput,
        d: Vec<Reg>,
        a: WgmmaA,
        desc_b: Reg,
        scale_d: Reg,
        trans_a: bool,
        trans_b: bool,
    },
    /// `setmaxnreg.{inc|dec}.sync.aligned.u32 N`.
    SetMaxNReg { inc: bool, n: u32 },
    /// `mbarrier.init.shared::cta.b64 [addr], count` (sm_90 form; `addr` a shared address).
    MbarrierInit { addr: Address, count: u32 },
    /// `mbarrier.arrive.shared::cta.b64 _, [addr]`, or with `expect_tx`
    /// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [addr], tx`: one arrival (after adding
    /// `tx` pending transaction bytes); the returned state is discarded (`_`).
    MbarrierArrive {
        addr: Address,
        expect_tx: Option<u32>,
    },
    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [addr], parity`: `p` is true once the
    /// phase of `parity`'s parity has completed (a `.b32` register or immediate; its low bit
    /// counts). It may return false after a time-out, so it runs in a loop.
    MbarrierTryWait {
        dst: Reg,
        addr: Address,
        parity: Operand,
    },
    /// `cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    /// [dst], [tmap, {c...}], [bar]`: the TMA box at `coords` (`.s32` registers, INNERMOST
    /// first, N of them) through the tensor map at generic address `tmap` into shared memory
    /// at `dst`, its bytes completing on the mbarrier at `bar`.
    /// With `multicast` (a `.b16` register, the CTA mask), `….multicast::cluster [dst],
    /// [tmap, {c…}], [bar], mask`: the box lands at `dst` and completes on `bar` in every
    /// block of the cluster whose bit is set.
    TmaLoad {
        dst: Address,
        tmap: Reg,
        coords: Vec<Reg>,
        bar: Address,
        multicast: Option<Reg>,
    },
    /// `mapa.shared::cluster.u32 dst, addr, rank`: the shared::cluster address of the byte
    /// at shared::cta address `addr` (a `.u32` register) in block `rank` of the cluster.
    Mapa { dst: Reg, addr: Reg, rank: Operand },
    /// `mbarrier.arrive.shared::cluster.b64 _, [addr]`: one arrival on the mbarrier at
    /// shared::cluster address `addr` (a `mapa` result), with the default release at CTA
    /// scope (CUTLASS's cluster barrier does the same: the releasing consumers' reads of the
    /// stage are retired wgmma reads, and nothing they wrote is handed over). `.release.cluster`
    /// measured 40 % slower on a multicast GEMM (docs/perf.md, "Clusters").
    MbarrierArriveCluster { addr: Reg },
    /// `barrier.cluster.arrive.release.aligned`: this thread's arrival on the cluster
    /// barrier, releasing its earlier accesses at cluster scope.
    ClusterArrive,
    /// `barrier.cluster.wait.acquire.aligned`: waits until every thread of the cluster has
    /// arrived (acquire).
    ClusterWait,
    /// `ret`.
    Ret,
    /// `call.uni (r), vprintf, (format, args)`: CUDA's device printf, with the generic
    /// addresses of the format string and of the argument buffer (each argument at an
    /// offset aligned to its size). Printed as a scope of its own that declares the call's
    /// parameters; the module declares `vprintf` (`.extern .func`).
    Vprintf { format: Reg, args: Reg },
}

impl Inst {
    /// Registers this instruction writes.
    pub fn defs(&self) -> Vec<Reg> {
        match &self.op {
            Op::Mov { dst, .. }
            | Op::Pack { dst, .. }
            | Op::Int { dst, .. }
            | Op::Mad { dst, .. }
            | Op::Float { dst, .. }
            | Op::Fma { dst, .. }
            | Op::Unary { dst, .. }
            | Op::FloatFn { dst, .. }
            | Op::Setp { dst, .. }
            | Op::Selp { dst, .. }
            | Op::Cvta { dst, .. }
            | Op::Cvt { dst, .. }
            | Op::CvtPack { dst, .. }
            | Op::Bfe { dst, .. }
            | Op::Bfi { dst, .. }
            | Op::CvtToFp8x2 { dst, .. }
            | Op::CvtFromFp8x2 { dst, .. }
            | Op::Shfl { dst, .. } => vec![*dst],
            Op::Unpack { dsts, .. } | Op::Ld { dsts, .. } | Op::Ldmatrix { dsts, .. } => {
                dsts.clone()
            }
            Op::Mma { d, .. } | Op::Wgmma { d, .. } => d.clone(),
            Op::MbarrierTryWait { dst, .. }
            | Op::Mapa { dst, .. }
            | Op::AtomAdd { dst, .. }
            | Op::AtomAddRelease { dst, .. }
            | Op::LdAcquire { dst, .. } => vec![*dst],
            Op::FenceProxyAsync
            | Op::FenceAcqRelGpu
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait { .. }
            | Op::SetMaxNReg { .. }
            | Op::MbarrierInit { .. }
            | Op::MbarrierArrive { .. }
            | Op::MbarrierArriveCluster { .. }
            | Op::ClusterArrive
            | Op::ClusterWait
            | Op::TmaLoad { .. } => Vec::new(),
            Op::St { .. }
            | Op::RedAdd { .. }
            | Op::Bra { .. }
            | Op::BarSync { .. }
            | Op::BarArrive { .. }
            | Op::CpAsync { .. }
            | Op::CpAsyncCommit
            | Op::CpAsyncWait { .. }
            | Op::Ret
            | Op::Vprintf { .. } => Vec::new(),
        }
    }

    /// Registers this instruction reads (its guard included).
    pub fn uses(&self) -> Vec<Reg> {
        let mut out = Vec::new();
        if let Some(g) = &self.guard {
            out.push(g.pred);
        }
        let mut op = |o: &Operand| {
            if let Operand::Reg(r) = o {
                out.push(*r);
            }
        };
        let mut addr_regs = Vec::new();
        let mut addr = |a: &Address| {
            if let AddrBase::Reg(r) = &a.base {
                addr_regs.push(*r);
            }
        };
        let mut regs = Vec::new();
        match &self.op {
            Op::Mov { src, .. } => op(src),
            Op::Pack { srcs, .. } => srcs.iter().for_each(&mut op),
            Op::Unpack { src, .. } => regs.push(*src),
            Op::Shfl {
                src,
                lane,
                c,
                member_mask,
                ..
            } => {
                regs.push(*src);
                op(lane);
                op(c);
                op(member_mask);
            }
            Op::Int { a, b, .. } | Op::Float { a, b, .. } => {
                op(a);
                op(b);
            }
            Op::Mad { a, b, c, .. } | Op::Fma { a, b, c, .. } => {
                op(a);
                op(b);
                op(c);
            }
            Op::Unary { src, .. } | Op::FloatFn { src, .. } | Op::Cvt { src, .. } => op(src),
            Op::Setp { a, b, combine, .. } => {
                op(a);
                op(b);
                if let Some((_, g)) = combine {
                    regs.push(g.pred);
                }
            }
            Op::Selp { a, b, pred, .. } => {
                op(a);
                op(b);
                regs.push(*pred);
            }
            Op::CvtPack { hi, lo, .. } | Op::CvtToFp8x2 { hi, lo, .. } => {
                op(hi);
                op(lo);
            }
            Op::Bfe { src, pos, len, .. } => {
                op(src);
                op(pos);
                op(len);
            }
            Op::Bfi { a, b, pos, len, .. } => {
                op(a);
                op(b);
                op(pos);
                op(len);
            }
            Op::CvtFromFp8x2 { src, .. } => regs.push(*src),
            Op::Ld { addr: a, .. } | Op::Ldmatrix { addr: a, .. } => addr(a),
            Op::St { addr: a, srcs, .. } => {
                addr(a);
                srcs.iter().for_each(&mut op);
            }
            Op::RedAdd { addr: a, srcs, .. } => {
                addr(a);
                srcs.iter().for_each(&mut op);
            }
            Op::AtomAdd { addr: a, src, .. } | Op::AtomAddRelease { addr: a, src, .. } => {
                addr(a);
                op(src);
            }
            Op::LdAcquire { addr: a, .. } => addr(a),
            Op::Cvta { src, .. } => regs.push(*src),
            Op::CpAsync {
                dst, src, src_size, ..
            } => {
                addr(dst);
                addr(src);
                if let Some(s) = src_size {
                    op(s);
                }
            }
            Op::Mma { a, b, c, .. } => {
                regs.extend(a);
                regs.extend(b);
                regs.extend(c);
            }
            Op::Wgmma {
                d,
                a,
                desc_b,
                scale_d,
                ..
            } => {
                regs.extend(d);
                match a {
                    WgmmaA::Desc(r) => regs.push(*r),
                    WgmmaA::Regs(words) => regs.extend(words),
                }
                regs.extend([*desc_b, *scale_d]);
            }
            Op::MbarrierInit { addr: a, .. } | Op::MbarrierArrive { addr: a, .. } => addr(a),
            Op::MbarrierTryWait {
                addr: a, parity, ..
            } => {
                addr(a);
                op(parity);
            }
            Op::TmaLoad {
                dst,
                tmap,
                coords,
                bar,
                multicast,
            } => {
                addr(dst);
                addr(bar);
                regs.push(*tmap);
                regs.extend(coords);
                regs.extend(multicast);
            }
            Op::Mapa { addr: a, rank, .. } => {
                regs.push(*a);
                op(rank);
            }
            Op::MbarrierArriveCluster { addr: a } => regs.push(*a),
            Op::FenceProxyAsync
            | Op::FenceAcqRelGpu
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait { .. }
            | Op::SetMaxNReg { .. } => {}
            Op::Bra { .. }
            | Op::BarSync { .. }
            | Op::BarArrive { .. }
            | Op::CpAsyncCommit
            | Op::CpAsyncWait { .. }
            | Op::ClusterArrive
            | Op::ClusterWait
            | Op::Ret => {}
            Op::Vprintf { format, args } => regs.extend([*format, *args]),
        }
        out.extend(addr_regs);
        out.extend(regs);
        out
    }
}
