//! `tlc check FILE`: parse and verify, reporting every error found.

use crate::frontend::{self, UserError};
use std::path::Path;

pub fn run(path: &Path, defines: &[String]) -> Result<(), UserError> {
    frontend::load(path, defines).map(|_| ())
}
