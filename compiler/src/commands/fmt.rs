//! `tlc fmt FILE`: the canonical text of a kernel. Any spelling goes in (DSL, TVMScript
//! 0.1.x, 0.1.15); the DSL spelling comes out, and `fmt` of that output is the same text.

use crate::frontend::{self, UserError};
use std::path::Path;

pub fn run(path: &Path, defines: &[String]) -> Result<String, UserError> {
    let file = frontend::read_source(path)?;
    let func = frontend::parse(&file)?;
    let func = frontend::bind(&file, &func, defines)?;
    Ok(tlc_ir::printer::print_func(&func))
}
