//! Checks that a kernel's PTX parameter list is the one its launch manifest promises
//! (`docs/manifest.md`): a `.u64` per tensor in order, then a scalar per dim in order —
//! `.u32`/`.s32` for an int32 dim, `.u64`/`.s64` for an int64 one — and that entry names and
//! targets agree. A mismatch is a compiler bug that would otherwise surface as a kernel
//! reading garbage arguments at launch, so codegen checks before it writes the file.

use super::ast::{Module, Type};
use tlc_ir::DType;
use tlc_runtime::manifest::Manifest;

/// `Ok` when `module` holds the manifest's entry for the manifest's target with the
/// prescribed parameter list; otherwise a message naming the first difference.
pub fn check_manifest(module: &Module, manifest: &Manifest) -> Result<(), String> {
    if module.target != manifest.target {
        return Err(format!(
            "the module targets {} but the manifest says {}",
            module.target, manifest.target
        ));
    }
    let Some(kernel) = module.kernels.iter().find(|k| k.name == manifest.entry) else {
        return Err(format!("the module has no entry `{}`", manifest.entry));
    };
    let expected: Vec<(String, &[Type])> = manifest
        .params
        .iter()
        .map(|p| (format!("tensor `{}`", p.name), &[Type::U64][..]))
        .chain(manifest.dims.iter().map(|d| {
            let tys: &[Type] = match d.dtype {
                DType::Int64 => &[Type::U64, Type::S64],
                _ => &[Type::U32, Type::S32],
            };
            (format!("dim `{}`", d.name), tys)
        }))
        .collect();
    if kernel.params.len() != expected.len() {
        return Err(format!(
            "entry `{}` has {} parameters but the manifest needs {} ({} tensors + {} dims)",
            kernel.name,
            kernel.params.len(),
            expected.len(),
            manifest.params.len(),
            manifest.dims.len()
        ));
    }
    for (i, (p, (what, tys))) in kernel.params.iter().zip(&expected).enumerate() {
        if !tys.contains(&p.ty) {
            return Err(format!(
                "parameter {i} (`{}`) is {} but the manifest's {what} needs {}",
                p.symbol,
                p.ty,
                tys.iter()
                    .map(|t| t.suffix())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
    }
    Ok(())
}
