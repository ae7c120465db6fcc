//! cuBLASLt's FP8 GEMM, the speed peer of tlc's FP8 kernels in the same process: row-major
//! `D[m,n] = bf16(sa · sb · Σ_k A[m,k]·B[n,k])` with A (m, k) and B (n, k) float8_e4m3, D
//! bfloat16, float32 accumulation, and ONE float32 scale per operand (device pointers,
//! `CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER`). cuBLASLt on Hopper has no 1×128 / 128×128
//! block scaling, so the peer does the same multiply-adds as a block-scaled kernel without
//! its per-block rescaling: the same FLOPs, a fair speed reference, not a numerical one.
//!
//! Layout: cuBLASLt is column-major and its FP8 GEMM on Hopper takes only the "TN" form (A
//! transposed, B not). Row-major `D = A·Bᵀ` is column-major `Dᵀ (n×m) = op(B)·A`, where B's
//! bytes read column-major are the k×n matrix `Bᵀ` (so op = T, ld k) and A's are the k×m
//! matrix `Aᵀ` (op = N, ld k): exactly TN, with D's ld n. The algorithm is the first of
//! `cublasLtMatmulAlgoGetHeuristic` with a 32 MiB workspace; `Fp8Gemm` keeps it, so timed
//! runs do no host-side search.
//!
//! libcublasLt is opened at run time (cudarc's `dynamic-loading`): without it
//! [`CublasLt::new`] returns `RuntimeError::NoCublasLt`.

use crate::buffer::DeviceTensor;
use crate::device::Gpu;
use crate::driver::cublaslt_available;
use crate::error::{Result, RuntimeError};
use crate::timing::time_ms;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys::{
    self as lt_sys, cublasComputeType_t, cublasLtMatmulDescAttributes_t as DescAttr,
    cublasLtMatmulPreferenceAttributes_t as PrefAttr, cudaDataType,
};
use std::ffi::c_void;
use tlc_ir::DType;

/// The workspace cuBLASLt's algorithms may use (what the heuristic is told).
pub const WORKSPACE_BYTES: usize = 32 << 20;

fn lt_err(call: &str) -> impl Fn(lt::CublasError) -> RuntimeError + '_ {
    move |e| RuntimeError::CublasLt(format!("{call} failed: {:?}", e.0))
}

/// The `(m, n, k)` of the FP8 GEMM over A (m, k), B (n, k), D (m, n): A and B
/// float8_e4m3, D bfloat16, every size in 1..=i32::MAX. The error names the operand, the
/// expected and the found value.
pub fn fp8_gemm_dims(
    a: (DType, &[usize]),
    b: (DType, &[usize]),
    d: (DType, &[usize]),
) -> Result<(usize, usize, usize)> {
    for (name, (dtype, shape), want) in [
        ("A", a, DType::Float8E4M3),
        ("B", b, DType::Float8E4M3),
        ("D", d, DType::BFloat16),
    ] {
        if dtype != want {
            return Err(RuntimeError::CublasLt(format!(
                "{name} is {dtype}; expected {want}"
            )));
        }
        if shape.len() != 2 {
            return Err(RuntimeError::CublasLt(format!(
                "{name} has shape {shape:?}; expected a matrix"
            )));
        }
    }
    let (m, k, n) = (a.1[0], a.1[1], b.1[0]);
    if b.1[1] != k {
        return Err(RuntimeError::CublasLt(format!(
            "B has shape {:?}; expected [{n}, {k}] (K = {k} from A)",
            b.1
        )));
    }
    if d.1 != [m, n] {
        return Err(RuntimeError::CublasLt(format!(
            "D has shape {:?}; expected [{m}, {n}]",
            d.1
        )));
    }
    for (what, v) in [("m", m), ("n", n), ("k", k)] {
        if v == 0 || i32::try_from(v).is_err() {
            return Err(RuntimeError::CublasLt(format!(
                "{what} = {v} must lie in 1..={}",
                i32::MAX
            )));
        }
    }
    Ok((m, n, k))
}

/// A cuBLASLt handle on a GPU, with the workspace and the unit scale its FP8 GEMMs use;
/// destroyed on drop.
#[derive(Debug)]
pub struct CublasLt {
    gpu: Gpu,
    handle: lt_sys::cublasLtHandle_t,
    workspace: DeviceTensor,
    /// One float32 1.0 on the device: both operands' per-tensor scale.
    one: DeviceTensor,
}

impl Drop for CublasLt {
    fn drop(&mut self) {
        if self.gpu.bind().is_ok() {
            // SAFETY: created in `CublasLt::new`, destroyed only here; every `Fp8Gemm`
            // borrows `self`, so none outlives the handle.
            let _ = unsafe { lt::destroy_handle(self.handle) };
        }
    }
}

impl CublasLt {
    /// Creates a handle on `gpu`. Without libcublasLt: `RuntimeError::NoCublasLt`.
    pub fn new(gpu: &Gpu) -> Result<CublasLt> {
        if !cublaslt_available() {
            return Err(RuntimeError::NoCublasLt);
        }
        gpu.bind()?;
        // cudarc panics on a missing symbol (an old library): report it as not found.
        let handle = std::panic::catch_unwind(lt::create_handle)
            .map_err(|_| RuntimeError::NoCublasLt)?
            .map_err(lt_err("cublasLtCreate"))?;
        // Built before the handle is owned by a `CublasLt`, so free it by hand on failure.
        let buffers = DeviceTensor::zeros(gpu, DType::UInt8, &[WORKSPACE_BYTES])
            .and_then(|w| DeviceTensor::from_slice(gpu, &[1], &[1.0f32]).map(|one| (w, one)));
        match buffers {
            Ok((workspace, one)) => Ok(CublasLt {
                gpu: gpu.clone(),
                handle,
                workspace,
                one,
            }),
            Err(e) => {
                // SAFETY: created above and not stored anywhere.
                let _ = unsafe { lt::destroy_handle(handle) };
                Err(e)
            }
        }
    }

    /// Prepares row-major `D = A·Bᵀ` (A (m, k), B (n, k) float8_e4m3, D (m, n) bfloat16,
    /// both scales 1): descriptors, layouts and the heuristic's algorithm. An error when the
    /// operands are wrong or cuBLASLt has no algorithm for them (its words).
    pub fn fp8_gemm<'a>(
        &'a self,
        a: &'a DeviceTensor,
        b: &'a DeviceTensor,
        d: &'a DeviceTensor,
    ) -> Result<Fp8Gemm<'a>> {
        let (m, n, k) = fp8_gemm_dims(
            (a.dtype(), a.shape()),
            (b.dtype(), b.shape()),
            (d.dtype(), d.shape()),
        )?;
        for t in [a, b, d] {
            if !t.gpu().same_context(&self.gpu) {
                return Err(RuntimeError::CublasLt(
                    "operands live on a different GPU than the cuBLASLt handle".into(),
                ));
            }
        }
        self.gpu.bind()?;
        let (m, n, k) = (m as u64, n as u64, k as u64);
        let mut g = Fp8Gemm {
            lt: self,
            a,
            b,
            d,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            algo: None,
        };
        // Filled one by one so `Drop` frees whatever was created when a later step fails.
        g.desc = lt::create_matmul_desc(
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cudaDataType::CUDA_R_32F,
        )
        .map_err(lt_err("cublasLtMatmulDescCreate"))?;
        // cublasOperation_t as int32: N = 0, T = 1.
        let (trans, no_trans): (i32, i32) = (1, 0);
        let scale = self.one.device_ptr() as *const c_void;
        // SAFETY: `desc` is live; each buffer holds the attribute's documented type (int32
        // for the transposes, a device pointer for the scales) for the call's duration.
        unsafe {
            set_desc(g.desc, DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, &trans)?;
            set_desc(g.desc, DescAttr::CUBLASLT_MATMUL_DESC_TRANSB, &no_trans)?;
            set_desc(
                g.desc,
                DescAttr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                &scale,
            )?;
            set_desc(
                g.desc,
                DescAttr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                &scale,
            )?;
        }
        let layout = |t, rows, cols, ld| {
            lt::create_matrix_layout(t, rows, cols, ld as i64)
                .map_err(lt_err("cublasLtMatrixLayoutCreate"))
        };
        // cuBLASLt's A is our B (k × n, ld k, transposed), its B our A (k × m, ld k), D n × m.
        g.layouts[0] = layout(cudaDataType::CUDA_R_8F_E4M3, k, n, k)?;
        g.layouts[1] = layout(cudaDataType::CUDA_R_8F_E4M3, k, m, k)?;
        g.layouts[2] = layout(cudaDataType::CUDA_R_16BF, n, m, n)?;
        let pref = lt::create_matmul_pref().map_err(lt_err("cublasLtMatmulPreferenceCreate"))?;
        let ws = WORKSPACE_BYTES as u64;
        // SAFETY: all descriptors are live; `ws` is a u64 as the attribute requires. The
        // preference is destroyed right after the query whatever its outcome.
        let heuristic = unsafe {
            let set = lt::set_matmul_pref_attribute(
                pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const u64 as *const c_void,
                std::mem::size_of::<u64>(),
            )
            .map_err(lt_err("cublasLtMatmulPreferenceSetAttribute"));
            let found = set.and_then(|()| {
                lt::get_matmul_algo_heuristic(
                    self.handle,
                    g.desc,
                    g.layouts[0],
                    g.layouts[1],
                    g.layouts[2],
                    g.layouts[2],
                    pref,
                )
                .map_err(|e| {
                    RuntimeError::CublasLt(format!(
                        "no FP8 (e4m3 x e4m3 -> bf16, TN) algorithm for m = {m}, n = {n}, k = \
                         {k}: cublasLtMatmulAlgoGetHeuristic says {:?}",
                        e.0
                    ))
                })
            });
            let _ = lt::destroy_matmul_pref(pref);
            found?
        };
        if heuristic.workspaceSize > WORKSPACE_BYTES {
            return Err(RuntimeError::CublasLt(format!(
                "the heuristic's algorithm wants {} workspace bytes, more than the {} offered",
                heuristic.workspaceSize, WORKSPACE_BYTES
            )));
        }
        g.algo = Some(heuristic.algo);
        Ok(g)
    }
}

/// Sets one matmul-descriptor attribute from a typed value.
///
/// # Safety
/// `desc` must be live and `T` the attribute's type.
unsafe fn set_desc<T>(desc: lt_sys::cublasLtMatmulDesc_t, attr: DescAttr, value: &T) -> Result<()> {
    lt::set_matmul_desc_attribute(
        desc,
        attr,
        value as *const T as *const c_void,
        std::mem::size_of::<T>(),
    )
    .map_err(lt_err("cublasLtMatmulDescSetAttribute"))
}

/// One prepared FP8 GEMM over fixed operands; its descriptors are destroyed on drop.
#[derive(Debug)]
pub struct Fp8Gemm<'a> {
    lt: &'a CublasLt,
    a: &'a DeviceTensor,
    b: &'a DeviceTensor,
    d: &'a DeviceTensor,
    desc: lt_sys::cublasLtMatmulDesc_t,
    /// cuBLASLt's A (our B), B (our A), C = D.
    layouts: [lt_sys::cublasLtMatrixLayout_t; 3],
    algo: Option<lt_sys::cublasLtMatmulAlgo_t>,
}

impl Drop for Fp8Gemm<'_> {
    fn drop(&mut self) {
        if self.lt.gpu.bind().is_err() {
            return;
        }
        // SAFETY: each was created by `fp8_gemm` (null when it was not) and is destroyed only
        // here.
        unsafe {
            for l in self.layouts {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
        }
    }
}

impl Fp8Gemm<'_> {
    /// Enqueues the GEMM on the GPU's default stream.
    pub fn run(&self) -> Result<()> {
        let Some(algo) = self.algo.as_ref() else {
            return Err(RuntimeError::CublasLt("the GEMM was not prepared".into()));
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let lt = self.lt;
        lt.gpu.bind()?;
        // SAFETY: descriptors, layouts and algorithm were made for these live operands by
        // `fp8_gemm` (shapes and dtypes checked); C is D with beta = 0; the workspace is
        // `WORKSPACE_BYTES`, at least what the algorithm asked for.
        unsafe {
            lt::matmul(
                lt.handle,
                self.desc,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                self.b.device_ptr() as *const c_void,
                self.layouts[0],
                self.a.device_ptr() as *const c_void,
                self.layouts[1],
                self.d.device_ptr() as *const c_void,
                self.layouts[2],
                self.d.device_ptr() as *mut c_void,
                self.layouts[2],
                algo,
                lt.workspace.device_ptr() as *mut c_void,
                WORKSPACE_BYTES,
                lt.gpu.stream().cu_stream() as _,
            )
        }
        .map_err(lt_err("cublasLtMatmul"))
    }

    /// Times the GEMM like `Kernel::time`: milliseconds of each timed run.
    pub fn time(&self, warmup: usize, iters: usize) -> Result<Vec<f32>> {
        time_ms(&self.lt.gpu, warmup, iters, || self.run())
    }
}
