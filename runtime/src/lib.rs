//! `tlc-runtime`: loads tlc's PTX through the CUDA driver and launches it from the launch
//! manifest. Nothing lives here yet: it arrives with `tlc compile` (see `docs/ARCHITECTURE.md`).
