//! The manifest's JSON shapes, by version. Version 1 (one kernel) keeps `entry`, `grid`,
//! `block` and `shared_bytes` at the top level; version 2 (several kernels) moves them into
//! a `kernels` list; version 3 is version 2 plus `tensor_maps` (a `kernels` list even for
//! one kernel). `Manifest` is written through `Wire` so a manifest without tensor maps prints
//! exactly the version 1 or 2 line it always did, field for field, and is read back through
//! it so each version accepts only its own fields.

use super::{target_text, DimDecl, Launch, Manifest, Param, TensorMapDesc, MANIFEST_VERSION};
use crate::expr::DimExpr;
use serde::{Deserialize, Serialize};
use tlc_ir::Target;

/// Every field either version has, in the order version 1 always printed them.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Wire {
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entry: Option<String>,
    #[serde(with = "target_text")]
    target: Target,
    params: Vec<Param>,
    dims: Vec<DimDecl>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grid: Option<Vec<DimExpr>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    block: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shared_bytes: Option<DimExpr>,
    /// Version 1's cluster shape (absent: none), as `Launch::cluster` in a `kernels` list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<Vec<u32>>,
    /// Version 1's `Launch::cooperative` (absent: false). Added without a new version, as
    /// `cluster` was: a reader that predates it refuses it as an unknown field rather than
    /// launching a grid barrier plainly (which could hang).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cooperative: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kernels: Option<Vec<Launch>>,
    /// Last, so the fields before it print in the order versions 1 and 2 always had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tensor_maps: Option<Vec<TensorMapDesc>>,
    /// The function's own tensors (any version; absent: none). Added without a new
    /// version, as `cluster` was: a reader that predates it refuses it as an unknown field
    /// rather than launching without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scratch: Vec<Param>,
}

impl From<Manifest> for Wire {
    fn from(m: Manifest) -> Wire {
        let version = m.version();
        let mut wire = Wire {
            version,
            entry: None,
            target: m.target,
            params: m.params,
            scratch: m.scratch,
            dims: m.dims,
            grid: None,
            block: None,
            shared_bytes: None,
            cluster: None,
            cooperative: None,
            kernels: None,
            tensor_maps: None,
        };
        if version == 3 {
            wire.kernels = Some(m.kernels);
            wire.tensor_maps = Some(m.tensor_maps);
            return wire;
        }
        match <[Launch; 1]>::try_from(m.kernels) {
            Ok([one]) => {
                wire.entry = Some(one.entry);
                wire.grid = Some(one.grid);
                wire.block = Some(one.block);
                wire.shared_bytes = Some(one.shared_bytes);
                wire.cluster = (!one.cluster.is_empty()).then_some(one.cluster);
                wire.cooperative = one.cooperative.then_some(true);
            }
            Err(several) => wire.kernels = Some(several),
        }
        wire
    }
}

impl TryFrom<Wire> for Manifest {
    type Error = String;

    fn try_from(w: Wire) -> Result<Manifest, String> {
        let top_level = [
            ("entry", w.entry.is_some()),
            ("grid", w.grid.is_some()),
            ("block", w.block.is_some()),
            ("shared_bytes", w.shared_bytes.is_some()),
            ("cluster", w.cluster.is_some()),
            ("cooperative", w.cooperative.is_some()),
        ];
        let kernels = match w.version {
            1 => {
                if w.kernels.is_some() {
                    return Err(
                        "a version 1 manifest has no `kernels` list (that is version 2)".into(),
                    );
                }
                let missing = |field: &str| format!("missing field `{field}` (version 1)");
                vec![Launch {
                    entry: w.entry.ok_or_else(|| missing("entry"))?,
                    grid: w.grid.ok_or_else(|| missing("grid"))?,
                    block: w.block.ok_or_else(|| missing("block"))?,
                    shared_bytes: w.shared_bytes.ok_or_else(|| missing("shared_bytes"))?,
                    cluster: w.cluster.unwrap_or_default(),
                    cooperative: w.cooperative.unwrap_or(false),
                }]
            }
            v @ (2 | 3) => {
                if let Some((field, _)) = top_level.iter().find(|(_, present)| *present) {
                    return Err(format!(
                        "a version {v} manifest has `{field}` inside each entry of `kernels`, \
                         not at the top level"
                    ));
                }
                w.kernels
                    .ok_or_else(|| format!("missing field `kernels` (version {v})"))?
            }
            v => {
                return Err(format!(
                    "version {v} is not supported (this runtime reads versions 1 to \
                     {MANIFEST_VERSION})"
                ))
            }
        };
        let tensor_maps = match (w.version, w.tensor_maps) {
            (v @ (1 | 2), Some(_)) => {
                return Err(format!(
                    "a version {v} manifest has no `tensor_maps` (that is version 3)"
                ))
            }
            (3, None) => return Err("missing field `tensor_maps` (version 3)".into()),
            // Without maps the file is version 1 or 2; accepting it as 3 would give one
            // manifest two spellings.
            (3, Some(maps)) if maps.is_empty() => {
                return Err(
                    "a version 3 manifest has at least one entry in `tensor_maps` \
                            (without tensor maps it is version 1 or 2)"
                        .into(),
                )
            }
            (_, maps) => maps.unwrap_or_default(),
        };
        Ok(Manifest {
            target: w.target,
            params: w.params,
            scratch: w.scratch,
            dims: w.dims,
            kernels,
            tensor_maps,
        })
    }
}
