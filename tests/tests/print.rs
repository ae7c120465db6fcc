//! Device printing (`T.print`, docs/ir.md "Printing"): `cases/valid/print.tir` prints from
//! block-level code, a message, a fragment (through its shared copy) and one thread of
//! per-thread code. Its lines, captured from the interpreter, are checked one by one
//! against the kernel's inputs, at the tile level and after each target's pipeline (the
//! same lines in the same order); the PTX calls `vprintf` once per print site with the
//! format the interpreter's lines follow, and passes ptxas on both targets.

use crate::tilelang_examples::emit;
use std::collections::HashMap;
use tlc::diagnostics::SourceFile;
use tlc::driver::{compile_source, RoadArgs};
use tlc_ir::interp::{self, capture_prints, RunOptions, Tensor};
use tlc_ir::PrimFunc;
use tlc_passes::{Instrumentation, Target};

fn case() -> String {
    std::fs::read_to_string(tlc_tests::root().join("tests/cases/valid/print.tir"))
        .expect("read print.tir")
}

/// The lines `func` prints, and its outputs, on the seeded inputs.
fn run(func: &PrimFunc) -> (Vec<String>, HashMap<String, Tensor>) {
    let (outs, lines) = capture_prints(|| {
        interp::run(
            func,
            &HashMap::new(),
            HashMap::new(),
            &RunOptions {
                seed: 3,
                threads: 0,
            },
        )
    });
    (lines, outs.expect("the kernel runs"))
}

fn head(bx: usize, tx: usize) -> String {
    format!("BlockIdx=({bx}, 0, 0), ThreadIdx=({tx}, 0, 0)")
}

#[test]
fn the_interpreter_prints_each_threads_line_in_order_at_every_level() {
    let text = case();
    let file = SourceFile::new("print.tir", &text);
    let opts = Instrumentation::default();
    let mut tile_lines = None;
    for target in [Target::Sm80, Target::Sm90a] {
        let road = compile_source(&file, &RoadArgs::plain(target, &opts), &mut std::io::sink())
            .unwrap_or_else(|e| panic!("{target}: {e:?}"));
        let (tile, outs) = run(&road.tile);
        let a = outs["A"].to_f64();
        let b = outs["B"].to_f64();
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(y, x * 2.0, "B[{i}]");
        }
        let mut want = Vec::new();
        for bx in 0..2 {
            // Block-level code: every thread, in order.
            for tx in 0..32 {
                want.push(format!(
                    "msg='block' {}: dtype=int32 value={}",
                    head(bx, tx),
                    bx * 10 + 1
                ));
            }
            if bx == 1 {
                for tx in 0..32 {
                    want.push(format!("msg='second block' {}", head(bx, tx)));
                }
            }
            // The fragment: thread 0 prints each element of its shared copy, in order.
            for i in 0..64 {
                let v = 2.0 * a[bx * 64 + i];
                want.push(format!(
                    "msg='buffer<F, float32>' {}: buffer=F_print, index={i}, dtype=float32 value={}",
                    head(bx, 0),
                    interp::format_printed(interp::Scalar::Float(v), tlc_ir::DType::Float32)
                ));
            }
            let v = a[(bx * 4 + 1) * 16 + 5];
            want.push(format!(
                "msg='thread five' {}: dtype=float32 value={v:.6}",
                head(bx, 5)
            ));
        }
        assert_eq!(tile, want, "{target}: the tile level's lines");
        let (planned, _) = run(&road.planned);
        assert_eq!(
            planned, tile,
            "{target}: the lowered kernel prints otherwise"
        );
        match &tile_lines {
            None => tile_lines = Some(tile),
            Some(first) => assert_eq!(first, &tile),
        }
    }
}

#[test]
fn the_ptx_calls_vprintf_with_the_same_lines_and_assembles() {
    let text = case();
    let func = emit::parse(&text);
    let file = SourceFile::new("print.tir", &text);
    let opts = Instrumentation::default();
    for target in [Target::Sm80, Target::Sm90a] {
        let road = compile_source(&file, &RoadArgs::plain(target, &opts), &mut std::io::sink())
            .unwrap_or_else(|e| panic!("{target}: {e:?}"));
        let ptx = road.compiled.text();
        assert_eq!(
            ptx.matches("call.uni (vprintf_r), vprintf,").count(),
            4,
            "{target}"
        );
        assert_eq!(
            ptx.matches(".extern .func (.param .b32 func_retval0) vprintf")
                .count(),
            1
        );
        // The formats, decoded from their bytes: the interpreter's lines with conversions.
        let formats: Vec<String> = ptx
            .lines()
            .filter(|l| l.starts_with(".global .align 1 .b8 __tlc_print_str"))
            .filter_map(|l| l.split_once("= {"))
            .map(|(_, bytes)| {
                let bytes: Vec<u8> = bytes
                    .trim_end_matches("};")
                    .split(", ")
                    .map(|b| b.parse::<u8>().expect("a byte"))
                    .collect();
                String::from_utf8_lossy(&bytes[..bytes.len() - 1]).into_owned()
            })
            .collect();
        let row = "BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)";
        assert_eq!(
            formats,
            [
                format!("msg='block' {row}: dtype=int32 value=%d\n"),
                format!("msg='second block' {row}\n"),
                format!("msg='buffer<F, float32>' {row}: buffer=F_print, index=%d, dtype=float32 value=%f\n"),
                format!("msg='thread five' {row}: dtype=float32 value=%f\n"),
            ],
            "{target}"
        );
        emit::assemble("print", ptx, "print", target.name());
    }
    // The function itself, as the front end gives it, has the print intrinsics.
    assert!(tlc_ir::printer::print_func(&func).contains("T.print_elem(F_print["));
}
