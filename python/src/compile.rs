//! `compile(name, text, defines, target)`: a kernel through the driver to PTX, as
//! `tlc compile` does it (its tunables resolved first, then `tlc::driver::compile_parsed`),
//! kept with what is needed to print any stage again (`Compiled.ir`, as `--stop-after`
//! prints it).

use crate::errors::compile_error;
use crate::{interpret, source};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::HashMap;
use tlc::diagnostics::SourceFile;
use tlc::driver::{compile_parsed, parse_target, Compiled as Output, Emit, RoadArgs};
use tlc::frontend::UserError;
use tlc_ir::{PrimFunc, Target};
use tlc_passes::{default_pipeline, Instrumentation};

/// A compiled kernel: its PTX (manifest line first), the manifest as JSON, and the bound
/// kernel the stages are printed from.
#[pyclass(frozen, module = "tlc._tlc")]
pub struct Compiled {
    #[pyo3(get)]
    ptx: String,
    #[pyo3(get)]
    manifest_json: String,
    file: SourceFile,
    /// The kernel as parsed, and the `-D` texts that bind it (every tunable's choice
    /// included): what the driver is given again to print a stage.
    parsed: PrimFunc,
    defines: Vec<String>,
    /// The bound kernel as the pipeline gets it (the `input` stage; `interpret` runs it).
    func: PrimFunc,
    target: Target,
    sms: Option<i64>,
}

#[pymethods]
impl Compiled {
    /// The target's name (`sm_80`, `sm_90a`).
    #[getter]
    fn target(&self) -> &'static str {
        self.target.name()
    }

    /// The stages `ir` prints, in pipeline order: `input`, every pass, `ptx`.
    fn stages(&self) -> Vec<String> {
        let mut names = vec!["input".to_string()];
        names.extend(
            default_pipeline(self.target)
                .iter()
                .map(|p| p.name().to_string()),
        );
        names.push("ptx".to_string());
        names
    }

    /// The text of one stage: `input` (the kernel as the pipeline gets it), a pass name
    /// (the IR after its first run, as `tlc compile --stop-after=PASS` prints it) or `ptx`.
    fn ir(&self, py: Python<'_>, stage: &str) -> PyResult<String> {
        match stage {
            "input" => return Ok(tlc_ir::printer::print_func(&self.func)),
            "ptx" => return Ok(self.ptx.clone()),
            _ => {}
        }
        let stages = self.stages();
        if !stages.iter().any(|s| s == stage) {
            return Err(PyValueError::new_err(format!(
                "unknown stage `{stage}`; the stages for {} are: {}",
                self.target.name(),
                stages.join(", ")
            )));
        }
        let opts = Instrumentation {
            stop_after: Some(stage.to_string()),
            ..Instrumentation::default()
        };
        let out = py.detach(|| {
            run_driver(
                &self.file,
                &self.parsed,
                &self.defines,
                self.target,
                self.sms,
                &opts,
                Emit::Tir,
            )
        });
        out.map(|(_, o)| o.text().to_string())
            .map_err(compile_error)
    }

    /// The same kernel compiled again with each `(dim, m)` declared a multiple of `m`
    /// (`tlc_ir::specialize::declare_multiples`, as `T.symbolic(dim, multiple_of=m)`
    /// would; the runtime checks it at launch), its tunables as chosen here: what a call
    /// with sizes known to be aligned runs (`Kernel` in tlc/__init__.py), since symbolic
    /// row strides proven 16-byte multiples get TMA and vector copies.
    fn variant(&self, py: Python<'_>, multiples: Vec<(String, i64)>) -> PyResult<Compiled> {
        let work = || -> Result<Compiled, UserError> {
            let parsed = tlc_ir::specialize::declare_multiples(&self.parsed, &multiples)
                .map_err(|d| UserError(self.file.render(&d)))?;
            let file = self.file.clone();
            build(file, parsed, self.defines.clone(), self.target, self.sms)
        };
        py.detach(work).map_err(compile_error)
    }

    /// Runs the kernel as compiled (its tunables bound) in the reference interpreter:
    /// `inputs` maps parameter names to `.npy` bytes, `dims` binds symbolic dims the shapes
    /// leave open; every parameter comes back, in order.
    #[pyo3(signature = (inputs, dims, seed=0))]
    fn interpret<'py>(
        &self,
        py: Python<'py>,
        inputs: HashMap<String, Vec<u8>>,
        dims: HashMap<String, i64>,
        seed: u64,
    ) -> PyResult<interpret::Arrays<'py>> {
        let out = py.detach(|| interpret::run(&self.file, &self.func, &inputs, &dims, seed));
        Ok(interpret::to_bytes(py, out.map_err(compile_error)?))
    }
}

/// The target to compile for: `given`, else the newest target GPU 0 runs (with its SM count
/// for persistent kernels), else `sm_80` as `tlc compile` defaults to.
fn resolve_target(given: Option<&str>) -> Result<(Target, Option<i64>), UserError> {
    if let Some(name) = given {
        return Ok((parse_target(name)?, None));
    }
    if let Ok(info) = tlc_tools::cache::device::gpu0() {
        if let Some(t) = Target::for_capability(info.capability) {
            return Ok((t, Some(i64::from(info.sm_count))));
        }
    }
    Ok((Target::Sm80, None))
}

/// `parsed` bound by `defines` compiled to PTX for `target`, kept with what prints its
/// stages again.
fn build(
    file: SourceFile,
    parsed: PrimFunc,
    defines: Vec<String>,
    target: Target,
    sms: Option<i64>,
) -> Result<Compiled, UserError> {
    let opts = Instrumentation::default();
    let (func, out) = run_driver(&file, &parsed, &defines, target, sms, &opts, Emit::Ptx)?;
    let Output::Ptx { text, manifest } = out else {
        return Err(UserError::plain(
            "the pipeline stopped before code generation",
        ));
    };
    let manifest_json = serde_json::to_string(&manifest)
        .map_err(|e| UserError::plain(format!("cannot write the manifest as JSON: {e}")))?;
    Ok(Compiled {
        ptx: text,
        manifest_json,
        file,
        parsed,
        defines,
        func,
        target,
        sms,
    })
}

/// The parsed kernel bound by `defines` through the driver for `target`: the bound kernel
/// as the pipeline gets it, and what the driver made of it.
fn run_driver(
    file: &SourceFile,
    parsed: &PrimFunc,
    defines: &[String],
    target: Target,
    sms: Option<i64>,
    opts: &Instrumentation,
    emit: Emit,
) -> Result<(PrimFunc, Output), UserError> {
    let road = RoadArgs {
        defines,
        target,
        sms,
        opts,
        emit,
    };
    let r = compile_parsed(file, parsed, &road, &mut std::io::sink())
        .map_err(|stop| stop.render(file, target))?;
    Ok((r.tile, r.compiled))
}

/// Compiles kernel source `text` (shown in diagnostics as `name`) with the `-D` bindings
/// `defines`; raises `CompileError` with the rendered diagnostics.
#[pyfunction]
#[pyo3(signature = (name, text, defines, target=None))]
pub fn compile(
    py: Python<'_>,
    name: &str,
    text: &str,
    defines: Vec<String>,
    target: Option<&str>,
) -> PyResult<Compiled> {
    let work = || -> Result<Compiled, UserError> {
        let (target, sms) = resolve_target(target)?;
        let (file, parsed, defines) = source::resolve(name, text, &defines, target)?;
        build(file, parsed, defines, target, sms)
    };
    py.detach(work).map_err(compile_error)
}
