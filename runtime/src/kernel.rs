//! `Kernel`: a loaded tlc kernel file (module + one function per manifest entry + manifest).
//! Loading reads the manifest, JIT-loads the PTX from memory with the driver's error log,
//! looks up every entry and raises each one's dynamic shared memory limit when it needs more
//! than 48 KB. Launching checks every argument against the manifest first, then launches the
//! entries in order on one stream — the GPU's, or the caller's for tensors given by address
//! (`launch_raw`, or `prepare` once and `launch_prepared` per launch) — so each sees what
//! the previous one wrote, passing each the tensors' pointers, the bound dims and the TMA
//! tensor maps (encoded once per distinct tensor and cached, `tensor_map.rs`).

use crate::buffer::DeviceTensor;
use crate::check::{
    check_align, check_args, check_raw_args, plan, prepare_launch, ArgSpec, LaunchPlan,
    PreparedLaunch, RawArg,
};
use crate::device::Gpu;
use crate::driver::{driver_err, error_name};
use crate::error::{Result, RuntimeError};
use crate::manifest::{Dims, Manifest, DEFAULT_SHARED_LIMIT};
use crate::tensor_map::{encode_tiled, map_args, TensorMap, TensorMapCache};
use crate::timing::time_ms;
use cudarc::driver::result;
use cudarc::driver::sys::{self, CUfunction_attribute, CUjit_option, CUresult};
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use tlc_ir::DType;

/// Size of the buffer the JIT writes its error log into.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded module, unloaded on drop.
#[derive(Debug)]
struct Module {
    gpu: Gpu,
    raw: sys::CUmodule,
}

impl Drop for Module {
    fn drop(&mut self) {
        // At process exit the driver unloads it (`driver::process_exiting`).
        if !crate::driver::is_exiting() && self.gpu.bind().is_ok() {
            // SAFETY: loaded by `cuModuleLoadDataEx` and unloaded only here; the kernel's
            // function handle dies with the `Kernel` that owns this module.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

/// One entry of the module.
#[derive(Debug)]
struct Function {
    raw: sys::CUfunction,
    /// The dynamic shared memory limit currently set on `raw`.
    shared_limit: AtomicU32,
}

/// A tlc kernel file loaded on a GPU: its entries (one per `T.Kernel` of the source).
#[derive(Debug)]
pub struct Kernel {
    // The functions are only valid while `module` lives; all die together with the Kernel.
    funcs: Vec<Function>,
    module: Module,
    manifest: Manifest,
    /// The encoded tensor maps of earlier launches, so relaunching on the same tensors (a
    /// timing loop) does not call the driver per map.
    maps: TensorMapCache,
}

// SAFETY: CUfunction handles may be used from any thread whose current context owns them;
// every use binds the context first.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

/// One kernel parameter value; launches pass a pointer to each, and the driver copies as
/// many bytes as the entry declares (8, 4, 8, or 128 for a tensor map).
enum Slot {
    Ptr(u64),
    I32(i32),
    I64(i64),
    Map(TensorMap),
}

impl Kernel {
    /// Loads `ptx` (with its manifest line) on `gpu`; the driver assembles it.
    pub fn load(gpu: &Gpu, ptx: &str) -> Result<Kernel> {
        Kernel::load_with(gpu, ptx, None)
    }

    /// Loads `cubin`, ptxas's assembly of `ptx` for the GPU's architecture, with the manifest
    /// of `ptx`: the driver does not assemble the PTX again (a tuning run loads many
    /// configs it has assembled already). A cubin the driver refuses (another toolkit's
    /// ELF version, another architecture) is an error, as a refused PTX is.
    pub fn load_assembled(gpu: &Gpu, ptx: &str, cubin: &[u8]) -> Result<Kernel> {
        Kernel::load_with(gpu, ptx, Some(cubin))
    }

    fn load_with(gpu: &Gpu, ptx: &str, cubin: Option<&[u8]>) -> Result<Kernel> {
        let manifest = Manifest::from_ptx(ptx)?;
        if !manifest.target.runs_on(gpu.capability()) {
            return Err(RuntimeError::TargetMismatch {
                target: manifest.target.name().to_string(),
                device: gpu.name().to_string(),
                capability: gpu.capability(),
            });
        }
        let module = match cubin {
            Some(image) => load_module(gpu, Image::Cubin(image))?,
            None => load_module(gpu, Image::Ptx(ptx))?,
        };
        let mut funcs = Vec::with_capacity(manifest.kernels.len());
        for k in &manifest.kernels {
            let entry = CString::new(k.entry.as_str())
                .map_err(|_| RuntimeError::BadManifest("entry contains a NUL byte".into()))?;
            // SAFETY: `module.raw` is a live module.
            let raw = match unsafe { result::module::get_function(module.raw, entry) } {
                Ok(f) => f,
                Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => {
                    return Err(RuntimeError::EntryNotFound {
                        entry: k.entry.clone(),
                    })
                }
                Err(e) => return Err(driver_err("cuModuleGetFunction")(e)),
            };
            funcs.push(Function {
                raw,
                shared_limit: AtomicU32::new(DEFAULT_SHARED_LIMIT),
            });
        }
        let kernel = Kernel {
            funcs,
            module,
            manifest,
            maps: TensorMapCache::default(),
        };
        // A constant shared size is known now: set the limit at load time, as promised.
        // (A negative or dim-dependent size is left to `plan` at launch.)
        for (i, k) in kernel.manifest.kernels.iter().enumerate() {
            let constant = Dims::default().eval(&k.shared_bytes);
            if let Some(bytes) = constant.ok().and_then(|b| u32::try_from(b).ok()) {
                kernel.ensure_shared_limit(i, bytes)?;
            }
        }
        Ok(kernel)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn gpu(&self) -> &Gpu {
        &self.module.gpu
    }

    /// The kernel's cache of encoded tensor maps (its `encodes()` counts driver encodes).
    pub fn tensor_map_cache(&self) -> &TensorMapCache {
        &self.maps
    }

    /// The tensor maps of a launch over `args` (checked against the manifest), in the
    /// manifest's order: from the cache, or encoded by the driver.
    fn tensor_maps(&self, described: &[(&[usize], u64)]) -> Result<Vec<TensorMap>> {
        if self.manifest.tensor_maps.is_empty() {
            return Ok(Vec::new());
        }
        let all = map_args(&self.manifest, described)?;
        self.gpu().bind()?;
        self.manifest
            .tensor_maps
            .iter()
            .zip(&all)
            .map(|(desc, a)| self.maps.get_or_encode(a, |a| encode_tiled(&desc.param, a)))
            .collect()
    }

    /// Checks the arguments against the manifest and computes the launch configuration,
    /// without launching.
    pub fn plan(&self, args: &[&DeviceTensor]) -> Result<LaunchPlan> {
        for (p, a) in self.manifest.params.iter().zip(args) {
            if !a.gpu().same_context(self.gpu()) {
                return Err(RuntimeError::WrongDevice {
                    param: p.name.clone(),
                });
            }
        }
        let described: Vec<(DType, &[usize])> =
            args.iter().map(|a| (a.dtype(), a.shape())).collect();
        check_args(&self.manifest, &described)
    }

    /// Launches every entry, in order, on the GPU's default stream, asynchronously: results
    /// are visible to the next download (which waits), and errors inside a kernel surface
    /// there or at `Gpu::synchronize`. Every argument is checked first. Outputs are written
    /// in place.
    pub fn launch(&self, args: &[&DeviceTensor]) -> Result<()> {
        let plan = self.plan(args)?;
        self.launch_planned(&plan, &described(args), self.gpu().stream().cu_stream())
    }

    /// Launches on tensors given by device address (memory another library owns, e.g. a
    /// PyTorch tensor), on `stream` (a raw `CUstream`; 0 is the legacy default stream),
    /// asynchronously. Every argument is checked first (`check::check_raw_args`: layout,
    /// then count, dtype and shape). The caller keeps the memory alive and on this kernel's
    /// GPU until the launch has run.
    pub fn launch_raw(&self, args: &[RawArg], stream: u64) -> Result<LaunchPlan> {
        let plan = check_raw_args(&self.manifest, args)?;
        let described: Vec<(&[usize], u64)> = args.iter().map(|a| (a.shape, a.ptr)).collect();
        self.launch_planned(&plan, &described, raw_stream(stream))?;
        Ok(plan)
    }

    /// Checks a launch signature once (`check::prepare_launch`) for
    /// [`Kernel::launch_prepared`]; `None` arguments are outputs the caller allocates with
    /// the shapes it returns.
    pub fn prepare(
        &self,
        args: &[Option<ArgSpec>],
        given: &[(&str, i64)],
    ) -> Result<PreparedLaunch> {
        prepare_launch(&self.manifest, args, given)
    }

    /// Launches a prepared signature on tensors at `ptrs` (one per parameter, in order, of
    /// the prepared dtypes, shapes and strides: the caller's promise, which is what it
    /// keyed the preparation on), on `stream`, asynchronously. Only the addresses are
    /// checked here (alignment).
    pub fn launch_prepared(
        &self,
        prepared: &PreparedLaunch,
        ptrs: &[u64],
        stream: u64,
    ) -> Result<()> {
        if ptrs.len() != prepared.shapes.len() || ptrs.len() != self.manifest.params.len() {
            return Err(RuntimeError::ArgCount {
                entry: self.manifest.entries(),
                expected: self.manifest.params.len(),
                found: ptrs.len(),
            });
        }
        for (p, &ptr) in self.manifest.params.iter().zip(ptrs) {
            check_align(&p.name, ptr)?;
        }
        let described: Vec<(&[usize], u64)> = prepared
            .shapes
            .iter()
            .zip(ptrs)
            .map(|(s, &ptr)| (s.as_slice(), ptr))
            .collect();
        self.launch_planned(&prepared.plan, &described, raw_stream(stream))
    }

    /// Times the kernel: `warmup` untimed launches, then `iters` launches each between a
    /// pair of CUDA events (enqueued back to back, see `timing.rs`). A launch is every entry
    /// in order, so a multi-kernel file is timed as a whole. Returns the milliseconds of each
    /// timed launch.
    pub fn time(&self, args: &[&DeviceTensor], warmup: usize, iters: usize) -> Result<Vec<f32>> {
        let plan = self.plan(args)?;
        let described = described(args);
        let stream = self.gpu().stream().cu_stream();
        time_ms(self.gpu(), warmup, iters, || {
            self.launch_planned(&plan, &described, stream)
        })
    }

    /// Launches the planned entries on `args` (shape and device address of each, checked
    /// against the manifest) on `stream`.
    fn launch_planned(
        &self,
        plan: &LaunchPlan,
        args: &[(&[usize], u64)],
        stream: sys::CUstream,
    ) -> Result<()> {
        // Nothing runs (every grid has a zero axis, e.g. N = 0): no map is encoded, since a
        // tensor with an empty dimension has none, and the launch is a no-op as before.
        if plan.kernels.iter().all(|k| k.is_empty()) {
            return Ok(());
        }
        let scratch = Scratch::alloc(self, plan, stream)?;
        let result = self.launch_with(plan, args, &scratch, stream);
        // Freed on the stream after the kernels, whether or not they launched.
        let freed = scratch.free(stream);
        result.and(freed)
    }

    /// [`Kernel::launch_planned`] with the launch's scratch tensors allocated.
    fn launch_with(
        &self,
        plan: &LaunchPlan,
        args: &[(&[usize], u64)],
        scratch: &Scratch,
        stream: sys::CUstream,
    ) -> Result<()> {
        let mut slots: Vec<Slot> = args.iter().map(|&(_, ptr)| Slot::Ptr(ptr)).collect();
        slots.extend(scratch.tensors.iter().map(|(_, ptr)| Slot::Ptr(*ptr)));
        for (decl, (_, value)) in self.manifest.dims.iter().zip(plan.dims.iter()) {
            slots.push(match decl.dtype {
                // `bind_dims` checked that int32 dims fit.
                DType::Int32 => Slot::I32(i32::try_from(value).unwrap_or(i32::MAX)),
                _ => Slot::I64(value),
            });
        }
        // Encoded before the first launch, so a tensor TMA cannot describe is refused before
        // any kernel writes an output.
        let mut described: Vec<(&[usize], u64)> = args.to_vec();
        described.extend(scratch.tensors.iter().map(|(s, p)| (s.as_slice(), *p)));
        slots.extend(self.tensor_maps(&described)?.into_iter().map(Slot::Map));
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| match s {
                Slot::Ptr(v) => v as *mut u64 as *mut c_void,
                Slot::I32(v) => v as *mut i32 as *mut c_void,
                Slot::I64(v) => v as *mut i64 as *mut c_void,
                Slot::Map(v) => v as *mut TensorMap as *mut c_void,
            })
            .collect();
        // Every entry's shared memory is settled before the first launch, so a refused one
        // does not leave the outputs half written.
        // So is every cooperative entry's grid: it must fit on the GPU at once.
        for (i, k) in plan.kernels.iter().enumerate() {
            if !k.is_empty() {
                self.ensure_shared_limit(i, k.shared_bytes)?;
                if let (true, Some(func)) = (self.cooperative(i), self.funcs.get(i)) {
                    crate::cooperative::check_resident(self.gpu(), func.raw, k)?;
                }
            }
        }
        for (i, (func, k)) in self.funcs.iter().zip(&plan.kernels).enumerate() {
            if k.is_empty() {
                continue;
            }
            if self.cooperative(i) {
                self.gpu().bind()?;
                // SAFETY: as for `cuLaunchKernel` below.
                unsafe { crate::cooperative::launch(func.raw, k, stream, &mut params) }?;
                continue;
            }
            let [gx, gy, gz] = k.grid;
            let [bx, by, bz] = k.block;
            self.gpu().bind()?;
            // SAFETY: the argument count, dtypes and shapes match the manifest, which
            // describes every entry's parameter list (tensor pointers, dims, then 128-byte
            // tensor maps); `slots` outlives the call, which copies the values.
            unsafe {
                result::launch_kernel(
                    func.raw,
                    (gx, gy, gz),
                    (bx, by, bz),
                    k.shared_bytes,
                    stream,
                    &mut params,
                )
            }
            .map_err(|e| RuntimeError::Driver {
                call: "cuLaunchKernel",
                code: error_name(&e),
                message: format!(
                    "launching `{}` with grid {:?}, block {:?}, {} bytes of shared memory",
                    k.entry, k.grid, k.block, k.shared_bytes
                ),
            })?;
        }
        Ok(())
    }

    /// Whether entry `i` is launched cooperatively (it has grid barriers).
    fn cooperative(&self, i: usize) -> bool {
        self.manifest.kernels.get(i).is_some_and(|k| k.cooperative)
    }

    /// The GPU this kernel runs on, bound to the calling thread (for driver calls).
    fn bound_gpu(&self) -> Result<&Gpu> {
        self.gpu().bind()?;
        Ok(self.gpu())
    }

    /// Raises entry `i`'s `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` when `bytes`
    /// exceeds the limit set so far (48 KB by default): the attribute is per function.
    fn ensure_shared_limit(&self, i: usize, bytes: u32) -> Result<()> {
        let (Some(func), Some(k)) = (self.funcs.get(i), self.manifest.kernels.get(i)) else {
            return Err(RuntimeError::BadManifest(format!("no kernel {i}")));
        };
        if bytes <= func.shared_limit.load(Ordering::Relaxed) {
            return Ok(());
        }
        let max = self.gpu().max_shared_optin();
        if bytes > max {
            return Err(RuntimeError::LaunchConfig(format!(
                "kernel `{}` needs {bytes} bytes of dynamic shared memory; {} allows at most \
                 {max} per block",
                k.entry,
                self.gpu().name()
            )));
        }
        self.gpu().bind()?;
        let value = i32::try_from(bytes).unwrap_or(i32::MAX);
        // SAFETY: `func.raw` belongs to the live module.
        unsafe {
            result::function::set_function_attribute(
                func.raw,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                value,
            )
        }
        .map_err(driver_err("cuFuncSetAttribute"))?;
        func.shared_limit.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Evaluates the launch configuration for explicit dims (no tensors needed).
    pub fn plan_for_dims(&self, dims: Dims) -> Result<LaunchPlan> {
        plan(&self.manifest, dims)
    }
}

/// A stream handle as an integer (what torch's `cuda_stream` or CuPy hands out) as the
/// driver's type.
fn raw_stream(stream: u64) -> sys::CUstream {
    stream as usize as sys::CUstream
}

/// The (shape, device address) of each tensor: what a launch passes and maps.
fn described<'a>(args: &[&'a DeviceTensor]) -> Vec<(&'a [usize], u64)> {
    args.iter().map(|a| (a.shape(), a.device_ptr())).collect()
}

/// What `cuModuleLoadDataEx` loads.
enum Image<'a> {
    /// PTX text, which the driver assembles.
    Ptx(&'a str),
    /// An ELF image from ptxas.
    Cubin(&'a [u8]),
}

/// `cuModuleLoadDataEx` with an error-log buffer, so a rejected image reports why.
fn load_module(gpu: &Gpu, image: Image) -> Result<Module> {
    let text;
    let bytes: &[u8] = match image {
        Image::Ptx(ptx) => {
            text = CString::new(ptx).map_err(|e| RuntimeError::PtxLoad {
                code: "invalid PTX text".into(),
                log: format!("the PTX contains a NUL byte at offset {}", e.nul_position()),
            })?;
            text.as_bytes_with_nul()
        }
        Image::Cubin(elf) => elf,
    };
    let mut log = vec![0u8; JIT_LOG_BYTES];
    let mut options = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The driver reads option values as pointer-sized words: the buffer, then its size.
    let mut values: [*mut c_void; 2] = [
        log.as_mut_ptr() as *mut c_void,
        JIT_LOG_BYTES as *mut c_void,
    ];
    let mut raw: sys::CUmodule = std::ptr::null_mut();
    gpu.bind()?;
    // SAFETY: `bytes` is a NUL-terminated PTX string or a whole ELF image (the driver reads
    // its size from the ELF header); `options`/`values` have 2 entries and `log` outlives
    // the call.
    let status = unsafe {
        sys::cuModuleLoadDataEx(
            &mut raw,
            bytes.as_ptr() as *const c_void,
            2,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    if status != CUresult::CUDA_SUCCESS {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(log.get(..end).unwrap_or(&[])).into_owned();
        return Err(RuntimeError::PtxLoad {
            code: error_name(&result::DriverError(status)),
            log: text,
        });
    }
    Ok(Module {
        gpu: gpu.clone(),
        raw,
    })
}

/// The function's own global tensors (`T.alloc_global`, the manifest's `scratch`) for one
/// launch: allocated on the launch's stream (stream-ordered, so concurrent launches on
/// other streams, and graph captures, each get their own), zero-filled there, and freed
/// there after the kernels.
struct Scratch {
    /// (shape, device address) per scratch tensor, in manifest order; 0 for an empty one.
    tensors: Vec<(Vec<usize>, u64)>,
}

impl Scratch {
    fn alloc(kernel: &Kernel, plan: &LaunchPlan, stream: sys::CUstream) -> Result<Scratch> {
        let mut out = Scratch {
            tensors: Vec::new(),
        };
        if kernel.manifest.scratch.is_empty() {
            return Ok(out);
        }
        kernel.bound_gpu()?;
        for p in &kernel.manifest.scratch {
            let lookup = |n: &str| plan.dims.get(n);
            let mut shape = Vec::with_capacity(p.shape.len());
            for e in &p.shape {
                let v = e.eval(&lookup)?;
                let v = usize::try_from(v).map_err(|_| {
                    RuntimeError::LaunchConfig(format!(
                        "the scratch tensor `{}` would have a dimension of {v}",
                        p.name
                    ))
                })?;
                shape.push(v);
            }
            let (_, bytes) = crate::buffer::tensor_bytes(p.dtype, &shape)?;
            let ptr = if bytes == 0 {
                0
            } else {
                // SAFETY: a plain stream-ordered allocation on this kernel's context (bound
                // above); freed by `free` on the same stream.
                let ptr = unsafe { result::malloc_async(stream, bytes) }.map_err(|e| {
                    RuntimeError::Driver {
                        call: "cuMemAllocAsync",
                        code: error_name(&e),
                        message: format!("{bytes} bytes for the scratch tensor `{}`", p.name),
                    }
                });
                let ptr = match ptr {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = out.free(stream);
                        return Err(e);
                    }
                };
                out.tensors.push((shape, ptr));
                // SAFETY: `ptr` holds `bytes` bytes, allocated on `stream` just above.
                if let Err(e) = unsafe { result::memset_d8_async(ptr, 0, bytes, stream) } {
                    let _ = out.free(stream);
                    return Err(RuntimeError::Driver {
                        call: "cuMemsetD8Async",
                        code: error_name(&e),
                        message: format!("zeroing the scratch tensor `{}`", p.name),
                    });
                }
                continue;
            };
            out.tensors.push((shape, ptr));
        }
        Ok(out)
    }

    /// Frees every tensor on `stream` (after the work enqueued before).
    fn free(&self, stream: sys::CUstream) -> Result<()> {
        let mut first = Ok(());
        for &(_, ptr) in &self.tensors {
            if ptr == 0 {
                continue;
            }
            // SAFETY: allocated by `alloc` on `stream`, freed once.
            if let Err(e) = unsafe { result::free_async(ptr, stream) } {
                if first.is_ok() {
                    first = Err(RuntimeError::Driver {
                        call: "cuMemFreeAsync",
                        code: error_name(&e),
                        message: "freeing a scratch tensor".into(),
                    });
                }
            }
        }
        first
    }
}
