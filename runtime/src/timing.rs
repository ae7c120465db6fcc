//! GPU timing with CUDA events: warm-up runs, then one (start, end) event pair around each
//! timed run. Events are created with `CU_EVENT_DEFAULT`: cudarc's `new_event(None)` makes
//! them with timing disabled, and `cuEventElapsedTime` then fails.

use crate::device::Gpu;
use crate::driver::driver_err;
use crate::error::Result;
use cudarc::driver::sys::CUevent_flags;

/// Runs `work` `warmup` times, then `iters` times between events; returns each timed run's
/// milliseconds. `work` must enqueue on the GPU's default stream.
pub fn time_ms(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<Vec<f32>> {
    for _ in 0..warmup {
        work()?;
    }
    let ctx = gpu.context();
    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("cuEventCreate"))?;
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("cuEventCreate"))?;
    let stream = gpu.stream();
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        start.record(stream).map_err(driver_err("cuEventRecord"))?;
        work()?;
        end.record(stream).map_err(driver_err("cuEventRecord"))?;
        // Waits for `end`, so each run is timed alone.
        times.push(
            start
                .elapsed_ms(&end)
                .map_err(driver_err("cuEventElapsedTime"))?,
        );
    }
    Ok(times)
}

/// The median of a list of timings (`None` when empty).
pub fn median(times: &[f32]) -> Option<f32> {
    let mut v: Vec<f32> = times.to_vec();
    v.sort_by(f32::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => v.get(n / 2).copied(),
        _ => Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0),
    }
}
