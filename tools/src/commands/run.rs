//! `tlc run FILE --interp`: runs a kernel on the CPU with the reference interpreter.
//!
//! Parameters come from `--input NAME=X.npy` or are drawn from the seeded uniform
//! distribution on [-1, 1) (`tlc_ir::interp::random`); `-D` binds symbolic dims (others are
//! read off the input shapes). With `--save-dir DIR`, every parameter is written to
//! `DIR/NAME.npy` after the run: inputs as used, outputs as produced.

use crate::tunables::{self, Tuning};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;
use tlc::diagnostics::SourceFile;
use tlc::frontend::UserError;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::{Diagnostic, PrimFunc};

/// What `tlc run --interp` was asked to do.
pub struct RunArgs<'a> {
    pub file: &'a Path,
    pub defines: &'a [String],
    pub inputs: &'a [String],
    pub seed: u64,
    pub save_dir: Option<&'a Path>,
    /// How the tunables `-D` leaves open are chosen.
    pub tuning: Tuning,
    /// `--device`: `(atol, rtol)` that widen the per-dtype tolerance of float outputs
    /// (`--atol`, `--rtol`), for kernels whose float16 intermediates or float32 atomics the
    /// GPU may round or order otherwise than the interpreter.
    pub widen: Option<(f64, f64)>,
}

/// Runs the kernel and returns the report printed on stdout.
pub fn run(args: &RunArgs) -> Result<String, UserError> {
    let (file, func, _) = tunables::load(args.file, args.defines, &args.tuning)?;
    let given = load_inputs(&file, &func, args.inputs)?;
    let given_names: Vec<String> = given.keys().cloned().collect();
    let opts = RunOptions {
        seed: args.seed,
        threads: 0,
    };
    let start = Instant::now();
    let outputs = interp::run(&func, &HashMap::new(), given, &opts)
        .map_err(|d| UserError(file.render(&d)))?;
    let took = start.elapsed();

    let mut report = String::new();
    let _ = writeln!(
        report,
        "ran `{}` in the interpreter in {:.3} s",
        func.name.name,
        took.as_secs_f64()
    );
    for param in &func.params {
        let name = &param.name.name;
        let Some(tensor) = outputs.get(name) else {
            continue;
        };
        let origin = if given_names.contains(name) {
            "input".to_string()
        } else if func.is_scratch(name) {
            "the function's own tensor (T.alloc_global), zeros at the start".to_string()
        } else {
            format!("initialized randomly (seed {})", args.seed)
        };
        let _ = writeln!(
            report,
            "  {name}: {} {origin}; {}",
            tensor.describe(),
            stats(tensor)
        );
        if let Some(dir) = args.save_dir {
            let path = dir.join(format!("{name}.npy"));
            save(&path, tensor)?;
            let _ = writeln!(report, "    saved {}", path.display());
        }
    }
    Ok(report)
}

/// Parses `NAME=path.npy` and reads each file with the parameter's dtype. Every problem
/// with an input (a file that cannot be read, a wrong dtype, a corrupt or oversized header,
/// data that does not match the header, the same input twice) is located at the parameter,
/// as a wrong shape is (`interp::dims`); a name that is no parameter, at the function.
pub(crate) fn load_inputs(
    file: &SourceFile,
    func: &PrimFunc,
    specs: &[String],
) -> Result<HashMap<String, Tensor>, UserError> {
    let mut inputs = HashMap::new();
    for spec in specs {
        let (name, path) = spec
            .split_once('=')
            .ok_or_else(|| UserError::plain(format!("`--input {spec}`: expected NAME=path.npy")))?;
        let Some(param) = func.params.iter().find(|p| p.name.name == name) else {
            let names: Vec<&str> = func.params.iter().map(|p| p.name.name.as_str()).collect();
            let diag = Diagnostic::error(
                func.name.span,
                format!(
                    "`--input {spec}`: `{name}` is not a parameter of `{}` (parameters: {})",
                    func.name.name,
                    names.join(", ")
                ),
            );
            return Err(UserError(file.render(&diag)));
        };
        let at_param =
            |message: String| UserError(file.render(&Diagnostic::error(param.span, message)));
        let tensor = interp::read_npy_file(Path::new(path), param.dtype)
            .map_err(|e| at_param(format!("input `{name}`: {e}")))?;
        if inputs.insert(name.to_string(), tensor).is_some() {
            return Err(at_param(format!("`--input {name}=…` is given twice")));
        }
    }
    Ok(inputs)
}

pub(crate) fn save(path: &Path, tensor: &Tensor) -> Result<(), UserError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| UserError::plain(format!("cannot create {}: {e}", dir.display())))?;
    }
    interp::write_npy_file(path, tensor)
        .map_err(|e| UserError::plain(format!("cannot write {}: {e}", path.display())))
}

/// A one-line summary that makes two runs easy to compare by eye.
fn stats(tensor: &Tensor) -> String {
    let values = tensor.to_f64();
    if values.is_empty() {
        return "empty".to_string();
    }
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let nonfinite = values.len() - finite.len();
    let sum: f64 = finite.iter().sum();
    let absmax = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mean = if finite.is_empty() {
        f64::NAN
    } else {
        sum / finite.len() as f64
    };
    let mut s = format!("mean {mean:.6}, max |x| {absmax:.6}, sum {sum:.6}");
    if nonfinite > 0 {
        let _ = write!(s, ", {nonfinite} non-finite");
    }
    s
}
