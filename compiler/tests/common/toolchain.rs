//! Finding and running ptxas: every test that assembles emitted PTX goes through
//! [`ptxas_log`]. Included by path from other crates' tests too
//! (`tests/tests/tilelang_examples.rs`), next to `immediates.rs`, so it names only its
//! sibling module and std.

use super::immediates;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (the parent of the crate whose test includes this file).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn runs(ptxas: &Path) -> bool {
    Command::new(ptxas)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The ptxas the tests assemble with: `$TLC_PTXAS`, else `.tools/` (scripts/install-ptxas.sh),
/// else `PATH`. Missing ptxas fails the test, never skips it.
pub fn ptxas() -> PathBuf {
    const HOW: &str = "run ./scripts/install-ptxas.sh (it installs ptxas into .tools/) or set \
                       TLC_PTXAS to a ptxas binary";
    if let Some(p) = std::env::var_os("TLC_PTXAS") {
        let p = PathBuf::from(p);
        assert!(runs(&p), "TLC_PTXAS={} does not run: {HOW}", p.display());
        return p;
    }
    let local = root().join(".tools/nvcc/nvidia/cuda_nvcc/bin/ptxas");
    if runs(&local) {
        return local;
    }
    let on_path = PathBuf::from("ptxas");
    assert!(runs(&on_path), "ptxas was not found: {HOW}");
    on_path
}

/// ptxas's warning codes for serialized wgmma (C7510–C7515) and ignored `setmaxnreg`
/// (C7508).
pub const HOPPER_WARNINGS: [&str; 7] = [
    "C7508", "C7510", "C7511", "C7512", "C7513", "C7514", "C7515",
];

/// Runs `ptxas -arch=ARCH -v` on the PTX file `file` and returns its whole log (stdout then
/// stderr); `Err` carries the log when ptxas rejects the file — or when an instruction of
/// the file carries an immediate its type does not hold, which ptxas accepts silently
/// (`immediates`), or when ptxas serializes wgmma or ignores `setmaxnreg`
/// (`HOPPER_WARNINGS`): every test that assembles emitted PTX checks all three.
pub fn ptxas_log(file: &Path, arch: &str) -> Result<String, String> {
    let ptx = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let bad = immediates::overflowing_immediates(&ptx);
    if !bad.is_empty() {
        return Err(format!(
            "{}: immediates that do not fit their type:\n{}",
            file.display(),
            bad.join("\n")
        ));
    }
    let out = Command::new(ptxas())
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(file)
        .arg("-o")
        .arg(file.with_extension(format!("{arch}.cubin")))
        .output()
        .map_err(|e| format!("running ptxas: {e}"))?;
    let log = format!("{}{}", text(&out.stdout), text(&out.stderr));
    // The Hopper warnings that cost the most speed while still assembling: wgmma serialized
    // (C7510–C7515, e.g. an accumulator touched by ordinary code inside the pipeline) and
    // `setmaxnreg` ignored (C7508). None is accepted.
    let hopper: Vec<&str> = log
        .lines()
        .filter(|l| HOPPER_WARNINGS.iter().any(|code| l.contains(code)))
        .collect();
    if !hopper.is_empty() {
        return Err(format!(
            "{}: ptxas -arch={arch} serializes wgmma or ignores setmaxnreg:\n{}",
            file.display(),
            hopper.join("\n")
        ));
    }
    if out.status.success() {
        Ok(log)
    } else {
        Err(format!(
            "ptxas -arch={arch} rejected {}:\n{log}",
            file.display()
        ))
    }
}
