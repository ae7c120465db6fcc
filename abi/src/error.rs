//! `RuntimeError`: every way loading or launching a kernel can fail, with messages that name
//! the parameter, the expected and the found value, or the driver's own words.

use std::fmt;

/// An error from the runtime. Nothing in this crate panics on bad input, a missing driver or
/// a failed driver call: it returns one of these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuntimeError {
    /// `libcuda.so` could not be opened: no NVIDIA driver on this machine.
    NoDriver,
    /// The driver is there but has no GPU with this ordinal.
    NoDevice { ordinal: usize, count: usize },
    /// A driver call failed. `call` is the CUDA function, `code` its `CUresult` name.
    Driver {
        call: &'static str,
        code: String,
        message: String,
    },
    /// `cuModuleLoadDataEx` rejected the PTX; `log` is the JIT compiler's error log.
    PtxLoad { code: String, log: String },
    /// The module loaded but has no `.entry` with the manifest's name.
    EntryNotFound { entry: String },
    /// The PTX carries no `// tlc-manifest:` line.
    MissingManifest,
    /// The manifest is malformed or inconsistent.
    BadManifest(String),
    /// The kernel was compiled for a target this GPU cannot run.
    TargetMismatch {
        target: String,
        device: String,
        capability: (i32, i32),
    },
    /// Wrong number of kernel arguments.
    ArgCount {
        entry: String,
        expected: usize,
        found: usize,
    },
    /// An argument's dtype differs from the manifest's.
    ArgDtype {
        param: String,
        expected: String,
        found: String,
    },
    /// An argument's rank differs from the manifest's.
    ArgRank {
        param: String,
        expected: usize,
        found: usize,
    },
    /// An argument's shape disagrees with the manifest (or with another argument); the
    /// message continues "parameter `A` ..." and says which dim and why.
    ArgShape { param: String, message: String },
    /// An argument given by address (`check::RawArg`) has a layout kernels cannot read:
    /// not C-contiguous, or misaligned. The message continues "parameter `A` ...".
    ArgLayout { param: String, message: String },
    /// A dim given by name is not the kernel's, is out of its range, or no argument binds
    /// a dim the caller did not give.
    Dim(String),
    /// Evaluating a dim expression failed (overflow, division by zero, unknown dim).
    Eval(String),
    /// The launch configuration computed from the manifest is out of the hardware's range.
    LaunchConfig(String),
    /// A host buffer does not match the tensor it is copied to or from.
    HostBuffer(String),
    /// Tensors from different GPUs were passed to one launch.
    WrongDevice { param: String },
    /// A TMA tensor map cannot describe the argument (a row stride or address off the
    /// 16-byte granule, a dimension out of range), or the driver refused to encode it. The
    /// message names the requirement and the found value, or the driver's words.
    TensorMap { param: String, message: String },
    /// `libcublas.so` could not be opened.
    NoCublas,
    /// A cuBLAS call failed, or its operands are unsupported.
    Cublas(String),
    /// `libcublasLt.so` could not be opened.
    NoCublasLt,
    /// A cuBLASLt call failed, or it has no algorithm for the operands.
    CublasLt(String),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::NoDriver => write!(
                f,
                "no CUDA driver found: could not open libcuda.so (is the NVIDIA driver \
                 installed, and is this a GPU machine?)"
            ),
            RuntimeError::NoDevice { ordinal, count } => write!(
                f,
                "no GPU with ordinal {ordinal}: the CUDA driver sees {count} device(s)"
            ),
            RuntimeError::Driver {
                call,
                code,
                message,
            } => write!(f, "CUDA driver call {call} failed: {code} ({message})"),
            RuntimeError::PtxLoad { code, log } => {
                write!(f, "the CUDA driver rejected the PTX ({code})")?;
                if log.trim().is_empty() {
                    write!(f, "; the JIT log is empty")
                } else {
                    write!(f, ":\n{}", log.trim_end())
                }
            }
            RuntimeError::EntryNotFound { entry } => write!(
                f,
                "the PTX module has no kernel `{entry}`, the entry named by its manifest"
            ),
            RuntimeError::MissingManifest => write!(
                f,
                "the PTX has no `// tlc-manifest: {{...}}` line at its top (was it written by \
                 `tlc compile`?)"
            ),
            RuntimeError::BadManifest(msg) => write!(f, "invalid launch manifest: {msg}"),
            RuntimeError::TargetMismatch {
                target,
                device,
                capability: (major, minor),
            } => write!(
                f,
                "the kernel targets {target} but the GPU ({device}) has compute capability \
                 {major}.{minor}"
            ),
            RuntimeError::ArgCount {
                entry,
                expected,
                found,
            } => write!(
                f,
                "kernel `{entry}` takes {expected} argument(s) but {found} were given"
            ),
            RuntimeError::ArgDtype {
                param,
                expected,
                found,
            } => write!(
                f,
                "parameter `{param}` expects dtype {expected} but the argument is {found}"
            ),
            RuntimeError::ArgRank {
                param,
                expected,
                found,
            } => write!(
                f,
                "parameter `{param}` expects a tensor of rank {expected} but the argument has \
                 rank {found}"
            ),
            RuntimeError::ArgShape { param, message } => {
                write!(f, "parameter `{param}` {message}")
            }
            RuntimeError::ArgLayout { param, message } => {
                write!(f, "parameter `{param}` {message}")
            }
            RuntimeError::Dim(msg) => f.write_str(msg),
            RuntimeError::Eval(msg) => write!(f, "cannot evaluate a dim expression: {msg}"),
            RuntimeError::LaunchConfig(msg) => write!(f, "invalid launch configuration: {msg}"),
            RuntimeError::HostBuffer(msg) => write!(f, "host buffer mismatch: {msg}"),
            RuntimeError::WrongDevice { param } => write!(
                f,
                "the argument for parameter `{param}` lives on a different GPU than the kernel"
            ),
            RuntimeError::TensorMap { param, message } => {
                write!(f, "parameter `{param}`: {message}")
            }
            RuntimeError::NoCublas => write!(
                f,
                "cuBLAS not found: could not open libcublas.so (put the CUDA toolkit's lib \
                 folder, e.g. /usr/local/cuda/targets/x86_64-linux/lib, on LD_LIBRARY_PATH)"
            ),
            RuntimeError::Cublas(msg) => write!(f, "cuBLAS: {msg}"),
            RuntimeError::NoCublasLt => write!(
                f,
                "cuBLASLt not found: could not open libcublasLt.so (put the CUDA toolkit's lib \
                 folder, e.g. /usr/local/cuda/targets/x86_64-linux/lib, on LD_LIBRARY_PATH)"
            ),
            RuntimeError::CublasLt(msg) => write!(f, "cuBLASLt: {msg}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// Shorthand used throughout the crate.
pub type Result<T> = std::result::Result<T, RuntimeError>;
