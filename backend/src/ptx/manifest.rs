//! Checks that every kernel's PTX parameter list is the one its launch manifest promises
//! (`docs/manifest.md`): a `.u64` per tensor in order, then a scalar per dim in order —
//! `.u32`/`.s32` for an int32 dim, `.u64`/`.s64` for an int64 one — then a
//! `.align 64 .b8 [128]` array per tensor map in order, and that the module's
//! entries are the manifest's, in its order, and targets agree. A mismatch is a compiler bug that would otherwise surface as a kernel
//! reading garbage arguments at launch, so codegen checks before it writes the file.

use super::ast::{Kernel, Module, ParamBytes, Type};
use super::builder::TENSOR_MAP_PARAM;
use tlc_abi::manifest::Manifest;
use tlc_ir::DType;

/// `Ok` when `module` holds exactly the manifest's entries, in order, for the manifest's
/// target, each with the prescribed parameter list; otherwise a message naming the first
/// difference.
pub fn check_manifest(module: &Module, manifest: &Manifest) -> Result<(), String> {
    if module.target != manifest.target {
        return Err(format!(
            "the module targets {} but the manifest says {}",
            module.target, manifest.target
        ));
    }
    let names: Vec<&str> = module.kernels.iter().map(|k| k.name.as_str()).collect();
    let entries: Vec<&str> = manifest.kernels.iter().map(|k| k.entry.as_str()).collect();
    if names != entries {
        return Err(format!(
            "the module's entries are [{}] but the manifest lists [{}]",
            names.join(", "),
            entries.join(", ")
        ));
    }
    let expected: Vec<(String, Slot)> = manifest
        .params
        .iter()
        .chain(&manifest.scratch)
        .map(|p| (format!("tensor `{}`", p.name), Slot::Scalar(&[Type::U64])))
        .chain(manifest.dims.iter().map(|d| {
            let tys: &[Type] = match d.dtype {
                DType::Int64 => &[Type::U64, Type::S64],
                _ => &[Type::U32, Type::S32],
            };
            (format!("dim `{}`", d.name), Slot::Scalar(tys))
        }))
        .chain(manifest.tensor_maps.iter().enumerate().map(|(i, m)| {
            (
                format!("tensor map {i} (of `{}`)", m.param),
                Slot::TensorMap,
            )
        }))
        .collect();
    for kernel in &module.kernels {
        check_params(kernel, manifest, &expected)?;
    }
    Ok(())
}

/// What one parameter slot of the manifest's list may be.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// A scalar of one of these types.
    Scalar(&'static [Type]),
    /// A 128-byte tensor map, at least 64-byte aligned.
    TensorMap,
}

/// One entry's parameter list against the manifest's (`expected`: what each slot may be).
fn check_params(
    kernel: &Kernel,
    manifest: &Manifest,
    expected: &[(String, Slot)],
) -> Result<(), String> {
    if kernel.params.len() != expected.len() {
        return Err(format!(
            "entry `{}` has {} parameters but the manifest needs {} ({} tensors + {} dims + {} \
             tensor maps)",
            kernel.name,
            kernel.params.len(),
            expected.len(),
            manifest.params.len() + manifest.scratch.len(),
            manifest.dims.len(),
            manifest.tensor_maps.len()
        ));
    }
    for (i, (p, (what, slot))) in kernel.params.iter().zip(expected).enumerate() {
        let (ok, want) = match slot {
            Slot::Scalar(tys) => (
                p.bytes.is_none() && tys.contains(&p.ty),
                tys.iter()
                    .map(|t| t.suffix())
                    .collect::<Vec<_>>()
                    .join(" or "),
            ),
            Slot::TensorMap => (
                matches!(p.bytes, Some(ParamBytes { align, len })
                    if len == TENSOR_MAP_PARAM.len && align >= TENSOR_MAP_PARAM.align),
                format!(
                    ".align {} .b8 [{}]",
                    TENSOR_MAP_PARAM.align, TENSOR_MAP_PARAM.len
                ),
            ),
        };
        if !ok {
            let has = match p.bytes {
                None => p.ty.suffix().to_string(),
                Some(ParamBytes { align, len }) => format!(".align {align} .b8 [{len}]"),
            };
            return Err(format!(
                "parameter {i} (`{}`) is {has} but the manifest's {what} needs {want}",
                p.symbol,
            ));
        }
    }
    Ok(())
}
