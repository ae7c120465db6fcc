//! Argument checking and launch planning as a pure function of the manifest and the
//! arguments' (dtype, shape): everything a launch verifies before it touches the driver, so
//! it is tested without a GPU.

use crate::error::{Result, RuntimeError};
use crate::manifest::{axis, Dims, Launch, Manifest};
use tlc_ir::DType;

/// Largest grid size per axis (x, y, z), from the CUDA programming guide.
pub const MAX_GRID: [i64; 3] = [(1 << 31) - 1, 65535, 65535];

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

/// Checks the count, dtype and shape of every argument against the manifest, binds the
/// symbolic dims and evaluates grid, block and dynamic shared memory.
pub fn check_args(m: &Manifest, args: &[(DType, &[usize])]) -> Result<LaunchPlan> {
    if args.len() != m.params.len() {
        return Err(RuntimeError::ArgCount {
            entry: m.entries(),
            expected: m.params.len(),
            found: args.len(),
        });
    }
    for (p, (dtype, _)) in m.params.iter().zip(args) {
        if p.dtype != *dtype {
            return Err(RuntimeError::ArgDtype {
                param: p.name.clone(),
                expected: p.dtype.name().to_string(),
                found: dtype.name().to_string(),
            });
        }
    }
    let shapes: Vec<&[usize]> = args.iter().map(|(_, s)| *s).collect();
    let dims = m.bind_dims(&shapes)?;
    plan(m, dims)
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
