//! How many bytes buffers take: one buffer's size when its shape is constant (what
//! `plan-shared-memory` places), and an upper bound of a block's shared memory before it is
//! planned (what warp specialization checks against an SM's shared memory), and whether a
//! staged copy of a fragment fits a block's shared memory at all.

use crate::analysis::wgmma::ALIGN;
use tlc_ir::verifier::const_int;
use tlc_ir::{BufferDecl, Scope, Target};

/// The bytes of `buf`, when its shape is constant (and the product fits in an `i64`).
pub fn byte_size(buf: &BufferDecl) -> Option<i64> {
    buf.shape
        .iter()
        .try_fold(i64::from(buf.dtype.bytes()), |acc, d| {
            acc.checked_mul(const_int(d)?)
        })
}

/// When a shared copy of `buf` (a fragment a pass stages whole) cannot fit one block's
/// shared memory on `target`: its size against the limit, for the pass's located error
/// (`"262144 bytes, more than the 166912 bytes of shared memory a block may have on
/// sm_80"`). `None` when it fits, or when the shape is not constant (the fragment rules
/// report that).
pub fn past_shared_memory(buf: &BufferDecl, target: Target) -> Option<String> {
    if buf.shape.iter().any(|d| const_int(d).is_none()) {
        return None;
    }
    let max = target.max_shared_bytes();
    let size = match byte_size(buf) {
        Some(b) if b <= max => return None,
        Some(b) => b.to_string(),
        None => "more than 2^63".to_string(),
    };
    Some(format!(
        "{size} bytes, more than the {max} bytes of shared memory a block may have on {target}"
    ))
}

/// At least the shared memory `allocs` will take once planned: every shared buffer at the
/// largest alignment any layout asks for (`wgmma::ALIGN`), none sharing bytes. `None` when
/// a shared shape is not constant.
pub fn shared_upper_bound<'a>(allocs: impl IntoIterator<Item = &'a BufferDecl>) -> Option<i64> {
    allocs
        .into_iter()
        .filter(|b| b.scope == Scope::Shared)
        .try_fold(0i64, |acc, b| {
            let size = byte_size(b)?;
            acc.checked_add(size.checked_add(ALIGN - 1)? / ALIGN * ALIGN)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlc_ir::{DType, Expr, Ident, Span};

    fn buf(shape: &[i64], dtype: DType, scope: Scope) -> BufferDecl {
        BufferDecl {
            name: Ident::new("b", Span::DUMMY),
            dtype,
            shape: shape.iter().map(|&d| Expr::int(d)).collect(),
            scope,
            span: Span::DUMMY,
        }
    }

    #[test]
    fn sizes_and_the_shared_bound() {
        let a = buf(&[3, 128, 32], DType::Float16, Scope::Shared);
        let bars = buf(&[3], DType::Int64, Scope::Shared);
        let acc = buf(&[128, 128], DType::Float32, Scope::Fragment);
        assert_eq!(byte_size(&a), Some(24_576));
        assert_eq!(byte_size(&bars), Some(24));
        // The barriers round up to one 1024-byte unit; the fragment is not shared.
        assert_eq!(shared_upper_bound([&a, &bars, &acc]), Some(24_576 + 1024));
        let mut symbolic = a.clone();
        symbolic.shape[0] = Expr::var("S");
        assert_eq!(shared_upper_bound([&symbolic]), None);
    }
}
