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
    assert_eq!(
        e,
        "the header says shape (4,) (16 bytes of data) but the file holds 13 bytes"
    );
    let e = read_npy_file(&fixture("missing.npy"), DType::Int32).unwrap_err();
    assert!(e.starts_with("cannot read `"), "{e}");
}

/// A `.npy` file of `header` (padded with spaces and a newline, as numpy writes it) and
/// `data` bytes.
fn npy_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((h.len() as u16).to_le_bytes());
    out.extend(h.as_bytes());
    out.extend(data);
    out
}

#[test]
fn corrupt_headers_are_refused_before_any_allocation() {
    // A header whose shape claims 2^40 elements over 16 bytes of data: refused from the
    // header, never allocated.
    let huge = npy_bytes(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (1099511627776,), }",
        &[0; 16],
    );
    let e = read_npy(&huge, DType::Int32).unwrap_err();
    assert_eq!(
        e,
        "the header's shape (1099511627776,) has more than the 268435456 elements tlc reads"
    );
    // Within the cap, but more elements than the data holds.
    let short = npy_bytes(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (1000000,), }",
        &[0; 16],
    );
    let e = read_npy(&short, DType::Int32).unwrap_err();
    assert_eq!(
        e,
        "the header says shape (1000000,) (4000000 bytes of data) but the file holds 16 bytes"
    );
    // Trailing bytes are as wrong as missing ones.
    let long = npy_bytes(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
        &[0; 12],
    );
    let e = read_npy(&long, DType::Int32).unwrap_err();
    assert!(
        e.ends_with("(8 bytes of data) but the file holds 12 bytes or more"),
        "{e}"
    );
    // A version-2 header length of 4 GiB - 1.
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend(u32::MAX.to_le_bytes());
    let e = read_npy(&v2, DType::Int32).unwrap_err();
    assert_eq!(
        e,
        "the .npy header is 4294967295 bytes, more than the 65536 tlc reads"
    );
    // The same through a file: the reader stops at the header.
    let dir = std::env::temp_dir().join(format!("tlc-npy-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.npy");
    std::fs::write(&path, &huge).unwrap();
    let e = read_npy_file(&path, DType::Int32).unwrap_err();
    assert!(
        e.ends_with("has more than the 268435456 elements tlc reads"),
        "{e}"
    );
    let path = dir.join("long.npy");
    std::fs::write(&path, &long).unwrap();
    let e = read_npy_file(&path, DType::Int32).unwrap_err();
    assert!(e.ends_with("but the file holds 9 bytes or more"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
