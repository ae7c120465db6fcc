//! `tlc`: the command-line driver and diagnostic rendering.
