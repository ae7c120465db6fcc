//! `tlc-passes`: the pass manager and the lowering passes (one file per pass). Nothing lives
//! here yet: passes arrive with the lowering to PTX (see `docs/ARCHITECTURE.md`).
