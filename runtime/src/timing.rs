//! GPU timing with CUDA events: warm-up runs, then the timed runs enqueued back to back with
//! an event recorded before the first and after each one; a run's time is the interval
//! between the events on either side of it. Events are created with `CU_EVENT_DEFAULT`:
//! cudarc's `new_event(None)` makes them with timing disabled, and `cuEventElapsedTime` then
//! fails.
//!
//! Why back to back: with a wait after every run the GPU idles while the host prepares the
//! next launch, and the start event, which completes as soon as it is reached, then times
//! that host work too (a few microseconds per launch, more for cuBLAS's algorithm choice):
//! several percent of a 0.2 ms GEMM. Enqueued without waiting, each run's start event sits
//! behind the previous run, so it measures the GPU's work only (as long as the host enqueues
//! faster than the GPU runs, which holds for any kernel worth timing).

use crate::device::Gpu;
use crate::driver::driver_err;
use crate::error::Result;
use cudarc::driver::sys::CUevent_flags;

/// Runs `work` `warmup` times, then `iters` times back to back between events; returns each
/// timed run's milliseconds. `work` must enqueue on the GPU's default stream.
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
    let events = (0..=iters)
        .map(|_| ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(driver_err("cuEventCreate"))?;
    let stream = gpu.stream();
    let (first, rest) = match events.split_first() {
        Some(split) => split,
        None => return Ok(Vec::new()),
    };
    first.record(stream).map_err(driver_err("cuEventRecord"))?;
    for e in rest {
        work()?;
        e.record(stream).map_err(driver_err("cuEventRecord"))?;
    }
    // `elapsed_ms` waits for both events.
    events
        .windows(2)
        .map(|w| {
            w[0].elapsed_ms(&w[1])
                .map_err(driver_err("cuEventElapsedTime"))
        })
        .collect()
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
