//! Argument checking and launch planning as a pure function of the manifest and the
//! arguments' (dtype, shape): everything a launch verifies before it touches the driver, so
//! it is tested without a GPU.

use crate::error::{Result, RuntimeError};
use crate::manifest::{axis, Dims, Launch, Manifest};
use tlc_ir::DType;

/// Largest grid size per axis (x, y, z), from the CUDA programming guide (the one
/// definition is the IR's, which the verifier checks constant grids against).
pub const MAX_GRID: [i64; 3] = tlc_ir::target::MAX_GRID_DIMS;

/// What a launch needs once the arguments are known to fit the manifest: the bound dims and
/// one configuration per kernel, in launch order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    pub dims: Dims,
    pub kernels: Vec<KernelPlan>,
}

/// The launch configuration of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    pub entry: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl KernelPlan {
    /// A grid with a zero axis (e.g. `ceildiv(N, 256)` with N = 0) has nothing to run; the
    /// launch is skipped instead of failing in the driver.
    pub fn is_empty(&self) -> bool {
        self.grid.contains(&0)
    }
}

/// The byte alignment every tensor argument's address must have: vector loads and stores
/// and TMA move 16-byte granules, and the runtime's own allocations always meet it.
pub const ARG_ALIGN: u64 = 16;

/// A tensor argument given by its device address: memory another library owns (a PyTorch
/// tensor), described by what the launch checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawArg<'a> {
    /// The device address of element 0.
    pub ptr: u64,
    pub dtype: DType,
    pub shape: &'a [usize],
    /// Strides in elements, as the owner reports them; `None` means C-contiguous.
    pub strides: Option<&'a [i64]>,
}

/// [`check_args`] for tensors given by address: first each one's layout (C-contiguous,
/// address aligned to [`ARG_ALIGN`]), since kernels index row-major from element 0 and
/// load 16-byte vectors.
pub fn check_raw_args(m: &Manifest, args: &[RawArg]) -> Result<LaunchPlan> {
    for (p, a) in m.params.iter().zip(args) {
        check_align(&p.name, a.ptr)?;
    }
    let specs: Vec<Option<ArgSpec>> = args
        .iter()
        .map(|a| {
            Some(ArgSpec {
                dtype: a.dtype,
                shape: a.shape,
                strides: a.strides,
            })
        })
        .collect();
    Ok(prepare_launch(m, &specs, &[])?.plan)
}

/// What a launch depends on besides the addresses: an argument's dtype, shape and element
/// strides (`None`: C-contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgSpec<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub strides: Option<&'a [i64]>,
}

/// A launch checked once for one signature (the arguments' dtypes, shapes and strides and
/// the dims given by name): every launch with that signature reuses it, and only the
/// addresses are checked again (`check_align`). This is what keeps a launch from Python
/// cheap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedLaunch {
    pub plan: LaunchPlan,
    /// Every parameter's shape, in order: the given ones, and those of the outputs left
    /// to the caller to allocate.
    pub shapes: Vec<Vec<usize>>,
    /// The parameters given as `None`: outputs the caller allocates with `shapes`.
    pub to_allocate: Vec<usize>,
}

/// Checks a launch's signature against the manifest: the count, each given argument's
/// dtype, strides (C-contiguous) and shape; binds the dims (from the shapes and `given`),
/// computes the shapes of the missing arguments (`None`, outputs to allocate) and the
/// launch configuration.
pub fn prepare_launch(
    m: &Manifest,
    args: &[Option<ArgSpec>],
    given: &[(&str, i64)],
) -> Result<PreparedLaunch> {
    if args.len() != m.params.len() {
        return Err(RuntimeError::ArgCount {
            entry: m.entries(),
            expected: m.params.len(),
            found: args.len(),
        });
    }
    for (p, a) in m.params.iter().zip(args) {
        let Some(a) = a else { continue };
        check_strides(&p.name, a)?;
        if p.dtype != a.dtype {
            return Err(RuntimeError::ArgDtype {
                param: p.name.clone(),
                expected: p.dtype.name().to_string(),
                found: a.dtype.name().to_string(),
            });
        }
    }
    let shapes: Vec<Option<&[usize]>> = args.iter().map(|a| a.map(|a| a.shape)).collect();
    let dims = m.bind_dims_with(&shapes, given)?;
    let mut all = Vec::with_capacity(args.len());
    let mut to_allocate = Vec::new();
    for (i, a) in args.iter().enumerate() {
        all.push(match a {
            Some(a) => a.shape.to_vec(),
            None => {
                to_allocate.push(i);
                m.shape_of(i, &dims)?
            }
        });
    }
    Ok(PreparedLaunch {
        plan: plan(m, dims)?,
        shapes: all,
        to_allocate,
    })
}

/// The address rule of a tensor given by address: aligned to [`ARG_ALIGN`].
pub fn check_align(param: &str, ptr: u64) -> Result<()> {
    if ptr.is_multiple_of(ARG_ALIGN) {
        return Ok(());
    }
    Err(RuntimeError::ArgLayout {
        param: param.to_string(),
        message: format!(
            "needs an address aligned to {ARG_ALIGN} bytes, but the argument's is {ptr:#x} \
             ({} bytes past a {ARG_ALIGN}-byte boundary)",
            ptr % ARG_ALIGN
        ),
    })
}

/// The stride rule of a tensor given by address: C-contiguous (kernels index row-major).
fn check_strides(param: &str, a: &ArgSpec) -> Result<()> {
    let bad = |message: String| {
        Err(RuntimeError::ArgLayout {
            param: param.to_string(),
            message,
        })
    };
    let Some(strides) = a.strides else {
        return Ok(());
    };
    if strides.len() != a.shape.len() {
        return bad(format!(
            "has {} strides for a shape of rank {}",
            strides.len(),
            a.shape.len()
        ));
    }
    // A dimension of extent 1 is never stepped over, so its stride does not matter.
    let mut expected: i64 = 1;
    for (d, (&extent, &stride)) in a.shape.iter().zip(strides).enumerate().rev() {
        if extent != 1 && stride != expected {
            return bad(format!(
                "needs a C-contiguous tensor (strides {}) but the argument has strides {} \
                 (dimension {d}); pass `.contiguous()`",
                fmt_list(&contiguous_strides(a.shape)),
                fmt_list(strides)
            ));
        }
        expected = expected.saturating_mul(i64::try_from(extent).unwrap_or(i64::MAX));
    }
    Ok(())
}

/// The element strides of a C-contiguous tensor of `shape`.
fn contiguous_strides(shape: &[usize]) -> Vec<i64> {
    let mut out = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        let extent = i64::try_from(shape[d + 1]).unwrap_or(i64::MAX);
        out[d] = out[d + 1].saturating_mul(extent);
    }
    out
}

fn fmt_list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("({})", items.join(", "))
}

/// Checks the count, dtype and shape of every argument against the manifest, binds the
/// symbolic dims and evaluates grid, block and dynamic shared memory.
pub fn check_args(m: &Manifest, args: &[(DType, &[usize])]) -> Result<LaunchPlan> {
    let specs: Vec<Option<ArgSpec>> = args
        .iter()
        .map(|&(dtype, shape)| {
            Some(ArgSpec {
                dtype,
                shape,
                strides: None,
            })
        })
        .collect();
    Ok(prepare_launch(m, &specs, &[])?.plan)
}

/// Evaluates the launch configuration of every kernel for bound dims; a kernel's grid or
/// shared memory out of range is an error naming it when there are several.
pub fn plan(m: &Manifest, dims: Dims) -> Result<LaunchPlan> {
    let several = m.kernels.len() > 1;
    let mut kernels = Vec::with_capacity(m.kernels.len());
    for k in &m.kernels {
        let planned = plan_kernel(k, &dims).map_err(|e| match e {
            RuntimeError::LaunchConfig(msg) if several => {
                RuntimeError::LaunchConfig(format!("kernel `{}`: {msg}", k.entry))
            }
            e => e,
        })?;
        kernels.push(planned);
    }
    Ok(LaunchPlan { dims, kernels })
}

fn plan_kernel(k: &Launch, dims: &Dims) -> Result<KernelPlan> {
    let mut grid = [1u32; 3];
    for (i, e) in k.grid.iter().enumerate() {
        let v = dims.eval(e)?;
        let max = MAX_GRID.get(i).copied().unwrap_or(0);
        if !(0..=max).contains(&v) {
            return Err(RuntimeError::LaunchConfig(format!(
                "grid.{} = {e} is {v} with {dims}; it must lie in 0..={max}",
                axis(i)
            )));
        }
        if let Some(slot) = grid.get_mut(i) {
            *slot = u32::try_from(v).unwrap_or(u32::MAX);
        }
    }
    // `.reqnctapercluster` makes the launch a cluster launch: the grid must be whole
    // clusters (the driver's error would not say which axis).
    for (i, (&g, &c)) in grid.iter().zip(&k.cluster).enumerate() {
        if c > 1 && g % c != 0 {
            let e = k.grid.get(i).map_or(String::new(), ToString::to_string);
            return Err(RuntimeError::LaunchConfig(format!(
                "grid.{} = {e} is {g} with {dims}; the kernel runs in clusters of {c} blocks \
                 along {}, so it must be a multiple of {c}",
                axis(i),
                axis(i)
            )));
        }
    }
    let mut block = [1u32; 3];
    for (slot, b) in block.iter_mut().zip(&k.block) {
        *slot = *b;
    }
    let smem = dims.eval(&k.shared_bytes)?;
    let shared_bytes = u32::try_from(smem).map_err(|_| {
        RuntimeError::LaunchConfig(format!(
            "shared_bytes = {} is {smem} with {dims}; it must lie in 0..={}",
            k.shared_bytes,
            u32::MAX
        ))
    })?;
    Ok(KernelPlan {
        entry: k.entry.clone(),
        grid,
        block,
        shared_bytes,
    })
}
