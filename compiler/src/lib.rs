//! `tlc`: the command-line driver of the compiler and the rendering of its diagnostics.

pub mod cache;
pub mod cli;
pub mod codegen;
pub mod commands;
pub mod diagnostics;
pub mod frontend;
pub mod parallel;
pub mod plan;
pub mod ptx;
