//! `tlc plan --deepgemm` against a Python transcription of seed 004's rules
//! (`deepgemm/reference.py`): a table of shapes through the binary, a dense sweep through the
//! library, and the command's JSON shape and errors. python3 is required (CI has it): without
//! it these tests fail, they do not skip.

use crate::common;

use common::{text, tlc};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use tlc::plan::deepgemm::{best_config, Problem};

/// The nine fields, in the order tlc prints them.
const KEYS: [&str; 9] = [
    "block_m",
    "block_n",
    "num_stages",
    "num_tma_multicast",
    "multicast_on_a",
    "num_sms",
    "smem_size",
    "swizzle_mode",
    "block_n_padding",
];

/// `(m, n, k, num_groups, num_sms)`.
type Shape = (u32, u32, u32, u32, u32);

/// The reference's answer for each shape: the nine fields, or `{"error": …}` where the
/// seed asserts.
fn reference(shapes: &[Shape]) -> Vec<Map<String, Value>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/deepgemm/reference.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is required for the DeepGEMM reference (install python3)");
    let input: String = shapes
        .iter()
        .map(|(m, n, k, g, s)| format!("{m} {n} {k} {g} {s}\n"))
        .collect();
    // Written from another thread: python3 answers while it reads, and a full stdout pipe
    // would otherwise block it while this thread blocks on a full stdin pipe.
    let mut stdin = child.stdin.take().expect("python3's stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("wait for python3");
    writer
        .join()
        .expect("the writer thread")
        .expect("write the shapes to python3");
    assert!(
        out.status.success(),
        "the reference failed: {}",
        text(&out.stderr)
    );
    let lines: Vec<Map<String, Value>> = text(&out.stdout).lines().map(object).collect();
    assert_eq!(lines.len(), shapes.len(), "one reference line per shape");
    lines
}

fn object(json: &str) -> Map<String, Value> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => map,
        other => panic!("not a JSON object: {json:?} ({other:?})"),
    }
}

/// Field by field, naming the shape and the field that differ.
fn assert_same(shape: &Shape, ours: &Map<String, Value>, theirs: &Map<String, Value>) {
    for key in KEYS {
        assert_eq!(
            ours.get(key),
            theirs.get(key),
            "{shape:?}: `{key}` differs\n tlc: {ours:?}\n ref: {theirs:?}"
        );
    }
    assert_eq!(ours.len(), KEYS.len(), "{shape:?}: extra keys in {ours:?}");
}

/// The table of the issue: small M, DeepGEMM's own shapes, large M, huge N, K below 128 or
/// not a multiple of it, odd and even SM counts that make multicast illegal or legal, several
/// groups, extreme sizes, and K long enough that no stage fits.
fn table() -> Vec<Shape> {
    let mut shapes = Vec::new();
    // DeepGEMM's test shapes (its `test_gemm`), on an H100 SXM.
    let deepgemm_nk = [
        (2112, 7168),
        (24576, 1536),
        (32768, 512),
        (7168, 16384),
        (4096, 7168),
        (7168, 2048),
    ];
    for m in [64, 128, 4096] {
        for (n, k) in deepgemm_nk {
            shapes.push((m, n, k, 1, 132));
        }
    }
    // M ≤ 128 and large M.
    for m in [1, 16, 100, 8192] {
        for (n, k) in [(4096, 7168), (7168, 2048), (24576, 1536)] {
            shapes.push((m, n, k, 1, 132));
        }
    }
    // Huge N.
    for m in [1, 128, 4096] {
        for n in [32768, 131072] {
            shapes.push((m, n, 7168, 1, 132));
        }
    }
    // K below 128, and not a multiple of 128.
    for k in [1, 64, 100, 129, 200, 1000, 7000] {
        shapes.push((4096, 4096, k, 1, 132));
        shapes.push((64, 7168, k, 1, 132));
    }
    // SM counts: odd (multicast illegal), other GPUs' (78, 114), tiny, large.
    for sms in [131, 78, 114, 1, 2, 3, 264] {
        shapes.push((4096, 4096, 7168, 1, sms));
        shapes.push((1000, 1000, 1000, 1, sms));
        shapes.push((512, 24576, 1536, 1, sms));
    }
    // Odd tile counts along M and N (and exactly at the multicast threshold).
    shapes.extend([
        (511, 7168, 2048, 1, 132),
        (512, 7168, 2048, 1, 132),
        (640, 1000, 4096, 1, 132),
        (4160, 4160, 4096, 1, 132),
    ]);
    // Several groups.
    for groups in [2, 4, 8, 32] {
        shapes.push((4096, 7168, 2048, groups, 132));
        shapes.push((64, 4096, 7168, groups, 132));
    }
    // Extreme sizes (tile counts past 2^64) and K too long for even one stage.
    shapes.extend([
        (u32::MAX, u32::MAX, 7168, u32::MAX, 132),
        (1, 1, 1, 1, 1),
        (4096, 4096, 8_000_000, 1, 132),
        (64, 64, u32::MAX, 1, 132),
    ]);
    shapes
}

#[test]
fn the_binary_matches_the_reference_on_the_table() {
    let shapes = table();
    assert!(shapes.len() >= 60, "the table shrank to {}", shapes.len());
    let expected = reference(&shapes);
    let mut errors = 0;
    for (shape, theirs) in shapes.iter().zip(&expected) {
        let (m, n, k, g, s) = shape;
        let args = [m, n, k, g, s].map(|v| v.to_string());
        let out = tlc(&[
            "plan",
            "--deepgemm",
            &args[0],
            &args[1],
            &args[2],
            "--groups",
            &args[3],
            "--sms",
            &args[4],
        ]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        if theirs.contains_key("error") {
            errors += 1;
            assert_eq!(out.status.code(), Some(1), "{shape:?}: {stdout}{stderr}");
            assert!(stdout.is_empty(), "{shape:?}: printed {stdout}");
            assert!(
                stderr.starts_with("error: ") && !stderr.contains("panicked"),
                "{shape:?}: {stderr}"
            );
            continue;
        }
        assert!(out.status.success(), "{shape:?}: {stderr}");
        assert_eq!(stdout.lines().count(), 1, "{shape:?}: one line\n{stdout}");
        assert_same(shape, &object(&stdout), theirs);
    }
    assert_eq!(errors, 2, "the two over-long K rows, and only they, fail");
}

#[test]
fn the_library_matches_the_reference_on_a_sweep() {
    let mut shapes = Vec::new();
    for m in [
        1, 7, 64, 100, 128, 129, 256, 511, 512, 777, 1024, 2048, 4096, 6000, 8192, 16384,
    ] {
        for n in [16, 24, 100, 256, 576, 1024, 2112, 4096, 7168, 24576, 32768] {
            for k in [1, 64, 128, 129, 512, 1536, 7168, 16384] {
                for sms in [132, 131, 78, 114, 1, 2] {
                    for groups in [1, 3] {
                        shapes.push((m, n, k, groups, sms));
                    }
                }
            }
        }
    }
    let expected = reference(&shapes);
    for (shape, theirs) in shapes.iter().zip(&expected) {
        let &(m, n, k, num_groups, num_sms) = shape;
        let problem = Problem {
            m,
            n,
            k,
            num_groups,
            num_sms,
        };
        match best_config(&problem) {
            Ok(config) => assert_same(shape, &object(&config.to_json()), theirs),
            Err(e) => panic!("{shape:?}: {e}; the reference says {theirs:?}"),
        }
    }
}

#[test]
fn plan_prints_one_json_object_with_the_nine_keys_in_order() {
    let out = tlc(&["plan", "--deepgemm", "4096", "4096", "7168"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.ends_with("}\n") && stdout.lines().count() == 1,
        "{stdout}"
    );
    let map = object(&stdout);
    let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
    let mut expected = KEYS.to_vec();
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected, "exactly the nine keys");
    let positions: Vec<usize> = KEYS
        .iter()
        .map(|k| stdout.find(&format!("\"{k}\"")).expect("key printed"))
        .collect();
    assert!(positions.is_sorted(), "printed in KEYS order: {stdout}");
    assert!(map["multicast_on_a"].is_boolean(), "{stdout}");
    for key in KEYS.iter().filter(|&&k| k != "multicast_on_a") {
        assert!(map[*key].is_u64(), "`{key}` is an integer: {stdout}");
    }
    // The defaults are `--sms 132 --groups 1`.
    let explicit = tlc(&[
        "plan",
        "--deepgemm",
        "4096",
        "4096",
        "7168",
        "--sms",
        "132",
        "--groups",
        "1",
    ]);
    assert_eq!(text(&explicit.stdout), stdout);
}

#[test]
fn a_k_too_long_for_one_stage_is_an_error_that_says_why() {
    let out = tlc(&["plan", "--deepgemm", "64", "64", "8000000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        "error: `--deepgemm 64 64 8000000`: no pipeline stage fits in shared memory: the \
         64x16 block with K = 8000000 needs 262560 bytes with one stage (B's scales for the \
         whole K loop included), over the 232448 bytes of sm_90a\n"
    );
}

#[test]
fn bad_arguments_are_usage_errors() {
    for (args, says) in [
        (&["plan"][..], "required arguments were not provided"),
        (&["plan", "--deepgemm", "1", "2"], "3 values required"),
        (&["plan", "--deepgemm", "0", "1", "1"], "0 is not in 1.."),
        (
            &["plan", "--deepgemm", "1", "-5", "1"],
            "unexpected argument '-5'",
        ),
        (&["plan", "--deepgemm", "1", "x", "1"], "invalid value 'x'"),
        (
            &["plan", "--deepgemm", "1", "1", "4294967296"],
            "invalid value '4294967296'",
        ),
        (
            &["plan", "--deepgemm", "1", "1", "1", "--sms", "0"],
            "0 is not in 1..=4096",
        ),
        (
            &["plan", "--deepgemm", "1", "1", "1", "--groups", "0"],
            "0 is not in 1..",
        ),
        (
            &["plan", "--groups", "2"],
            "required arguments were not provided",
        ),
    ] {
        let out = tlc(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
