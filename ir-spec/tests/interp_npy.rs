//! `.npy` input and output: a round trip for every dtype, fixtures written by numpy, and the
//! errors for a file of the wrong dtype or a broken file.

use std::path::PathBuf;
use tlc_ir::interp::{npy_descr, random_tensor, read_npy, read_npy_file, write_npy, Tensor};
use tlc_ir::DType;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn round_trip_every_dtype() {
    for dtype in DType::ALL {
        let t = random_tensor("T", dtype, &[3, 5, 2], 11).unwrap();
        let bytes = write_npy(&t).unwrap();
        let back = read_npy(&bytes, dtype).unwrap();
        assert_eq!(back, t, "{dtype}");
        // The header names the documented numpy dtype.
        let header = String::from_utf8_lossy(&bytes[..bytes.len().min(128)]).to_string();
        assert!(
            header.contains(&format!("'descr': '{}'", npy_descr(dtype))),
            "{dtype}: {header}"
        );
    }
    // Special float values survive too.
    let t = Tensor::from_f64(DType::Float32, &[4], &[f64::INFINITY, -0.0, 1e-45, -3.5]).unwrap();
    assert_eq!(
        read_npy(&write_npy(&t).unwrap(), DType::Float32).unwrap(),
        t
    );
    let t = Tensor::from_f64(DType::Float16, &[0], &[]).unwrap();
    assert_eq!(
        read_npy(&write_npy(&t).unwrap(), DType::Float16).unwrap(),
        t
    );
}

#[test]
fn our_float16_file_matches_numpys() {
    let t = Tensor::from_f64(
        DType::Float16,
        &[2, 3],
        &[0.5, -1.25, 3.0, 65504.0, -0.0, 0.0999755859375],
    )
    .unwrap();
    let ours = write_npy(&t).unwrap();
    let numpy = std::fs::read(fixture("np_f16_2x3.npy")).unwrap();
    // Same header length (64-byte aligned, version 1.0) and the same data bytes; the header
    // text differs only in Python spelling (npyz writes the shape as `(2, 3, )`).
    assert_eq!(ours.len(), numpy.len());
    assert_eq!(ours[..10], numpy[..10]);
    assert_eq!(ours[ours.len() - 12..], numpy[numpy.len() - 12..]);
}

#[test]
fn reads_fixtures_written_by_numpy() {
    let t = read_npy_file(&fixture("np_f16_2x3.npy"), DType::Float16).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(
        t.to_f64(),
        vec![0.5, -1.25, 3.0, 65504.0, -0.0, 0.0999755859375]
    );

    // np.asfortranarray(np.arange(6).reshape(2, 3) / 4): read back in C order.
    let t = read_npy_file(&fixture("np_f32_fortran_2x3.npy"), DType::Float32).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.to_f64(), vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.25]);

    let t = read_npy_file(&fixture("np_i32_4.npy"), DType::Int32).unwrap();
    assert_eq!(t.to_f64(), vec![-2147483648.0, -1.0, 0.0, 2147483647.0]);

    let t = read_npy_file(&fixture("np_bool_3.npy"), DType::Bool).unwrap();
    assert_eq!(t.to_f64(), vec![1.0, 0.0, 1.0]);

    // bfloat16 as raw uint16 bits (the top halves of float32 1.0, -2.5, 0.15625).
    let t = read_npy_file(&fixture("np_bf16_bits_3.npy"), DType::BFloat16).unwrap();
    assert_eq!(t.to_f64(), vec![1.0, -2.5, 0.15625]);

    // e4m3 as raw uint8 bits: 0x38 = 1, 0xC0 = -2, 0x7E = 448, 0x01 = 2^-9.
    let t = read_npy_file(&fixture("np_u8_e4m3_bits_4.npy"), DType::Float8E4M3).unwrap();
    assert_eq!(t.to_f64(), vec![1.0, -2.0, 448.0, 2f64.powi(-9)]);
}

#[test]
fn wrong_dtype_and_broken_files_are_errors() {
    let e = read_npy_file(&fixture("np_f16_2x3.npy"), DType::Float32).unwrap_err();
    assert!(
        e.ends_with("expected dtype `<f4` (float32), found `<f2`"),
        "{e}"
    );
    let e = read_npy_file(&fixture("np_i32_4.npy"), DType::BFloat16).unwrap_err();
    assert!(
        e.ends_with("expected dtype `<u2` (bfloat16), found `<i4`"),
        "{e}"
    );
    let e = read_npy(b"not an npy file at all", DType::Float32).unwrap_err();
    assert!(e.starts_with("not a valid .npy file"), "{e}");
    // A truncated data section.
    let bytes = std::fs::read(fixture("np_i32_4.npy")).unwrap();
    let e = read_npy(&bytes[..bytes.len() - 3], DType::Int32).unwrap_err();
    assert!(e.starts_with("cannot read the array data"), "{e}");
    let e = read_npy_file(&fixture("missing.npy"), DType::Int32).unwrap_err();
    assert!(e.starts_with("cannot read `"), "{e}");
}
