//! Names the front end makes up. Lowering writes some constructs out as loops of its own —
//! a buffer view's copy (`view_i0`), the tile form of `T.atomic_add` (`atomic_i0`),
//! `T.im2col` (`im2col_i`), a whole-buffer local fill (`L_fill0`), `T.Persistent`'s walk
//! (`bx_wave`, `bx_tile`) — and a made-up name must never be one the user wrote: a user's
//! `view_i0` around a view copy would be shadowed by the copy's loop (a confusing "defined
//! more than once", or an index captured by the wrong variable). So a made-up name is its
//! base when the source has no such identifier, else `base_1`, `base_2`, … the first the
//! source does not have. Sibling constructs may make the same name: the parser's
//! `uniquify` renames reused sibling binders afterwards, as it does the user's.

use crate::syntax::lexer::Tok;
use crate::syntax::lower::Lowerer;
use logos::Logos;
use std::collections::HashSet;

/// Every identifier of `src`, as the lexer sees it (keywords excepted; comments and strings
/// hold none).
pub fn source_names(src: &str) -> HashSet<String> {
    Tok::lexer(src)
        .filter_map(|t| match t {
            Ok(Tok::Name(n)) => Some(n),
            _ => None,
        })
        .collect()
}

impl Lowerer {
    /// A name for a variable lowering makes up, named after `base`, that no identifier of
    /// the source has.
    pub fn generated_name(&self, base: &str) -> String {
        if !self.source_names.contains(base) {
            return base.to_string();
        }
        (1u64..)
            .map(|n| format!("{base}_{n}"))
            .find(|c| !self.source_names.contains(c))
            .unwrap_or_else(|| format!("{base}_"))
    }
}
