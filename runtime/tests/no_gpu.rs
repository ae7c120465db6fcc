//! Without a CUDA driver the runtime returns clear errors and never panics. On a machine with
//! a driver the same calls either succeed or fail with a driver-side error.

use tlc_runtime::{driver_available, Gpu, RuntimeError};

#[test]
fn gpu_new_reports_a_missing_driver_as_an_error() {
    let result = Gpu::new(0);
    if driver_available() {
        // A GPU machine: either a GPU, or an error that is not "no driver".
        if let Err(e) = result {
            assert_ne!(e, RuntimeError::NoDriver);
        }
    } else {
        let err = result.unwrap_err();
        assert_eq!(err, RuntimeError::NoDriver);
        assert!(err
            .to_string()
            .starts_with("no CUDA driver found: could not open libcuda.so"));
        assert_eq!(Gpu::count(), 0);
    }
}

#[test]
fn gpu_new_with_an_absent_ordinal_is_an_error() {
    // No machine here has 10_000 GPUs: NoDriver without a driver, NoDevice with one.
    match Gpu::new(10_000) {
        Err(RuntimeError::NoDriver) => assert!(!driver_available()),
        Err(RuntimeError::NoDevice { ordinal, .. }) => assert_eq!(ordinal, 10_000),
        other => panic!("expected NoDriver or NoDevice, got {other:?}"),
    }
}

#[test]
fn cublas_absence_is_detected_without_panicking() {
    // Either answer is fine; the call must simply return.
    let _ = tlc_runtime::cublas_available();
    assert!(RuntimeError::NoCublas
        .to_string()
        .contains("LD_LIBRARY_PATH"));
}
