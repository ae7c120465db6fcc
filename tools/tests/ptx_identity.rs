//! What `tlc compile` prints for every example, test case and bench config, pinned by hash.
//!
//! `ptx_identity.txt` lists one compile per line — `HASH TARGET FILE [NAME=VALUE]...` — and
//! this test runs `tlc compile FILE --target TARGET -o - -D NAME=VALUE...` for each and
//! compares the FNV-1a hash of its output (the PTX, or the exit code and the rendered error
//! of a kernel tlc refuses) with `HASH`. A refactoring that must not change generated code
//! keeps every line; a change that does is seen here, compile by compile, and re-pinned with
//!
//! ```text
//! TLC_BLESS=1 cargo test -p tlc --test integration ptx_identity
//! ```
//!
//! after the new output was reviewed (a blessed file is a changed compiler, like a snapshot).
//! To add a compile, add a line with any hash and bless.
//!
//! The same run reads every PTX for immediates that do not fit their instruction's type
//! (`common::immediates`): ptxas accepts them and truncates, so no compile may print one.

use crate::common;

use common::immediates::overflowing_immediates;
use common::{root, tlc};
use std::fmt::Write;
use std::sync::Mutex;

const LIST: &str = "tools/tests/ptx_identity.txt";

/// FNV-1a, 64 bits: stable across Rust versions and platforms (unlike `DefaultHasher`).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One pinned compile.
#[derive(Clone, Debug)]
struct Entry {
    hash: String,
    target: String,
    file: String,
    defines: Vec<String>,
}

impl Entry {
    fn parse(line: &str) -> Option<Entry> {
        let mut words = line.split_whitespace();
        let hash = words.next()?.to_string();
        let target = words.next()?.to_string();
        let file = words.next()?.to_string();
        Some(Entry {
            hash,
            target,
            file,
            defines: words.map(str::to_string).collect(),
        })
    }

    fn line(&self, hash: &str) -> String {
        let mut s = format!("{hash} {} {}", self.target, self.file);
        for d in &self.defines {
            let _ = write!(s, " {d}");
        }
        s
    }

    /// The hash of what this compile prints now, and the immediates of its PTX that do not
    /// fit their type (none, ever).
    fn run(&self) -> (String, Vec<String>) {
        let mut args = vec![
            "compile",
            self.file.as_str(),
            "--target",
            self.target.as_str(),
            "-o",
            "-",
        ];
        for d in &self.defines {
            args.extend(["-D", d.as_str()]);
        }
        let out = tlc(&args);
        let mut printed = out.stdout;
        let mut bad = Vec::new();
        if out.status.success() {
            bad = overflowing_immediates(&String::from_utf8_lossy(&printed));
        } else {
            printed = format!("exit {:?}\n", out.status.code()).into_bytes();
            printed.extend(out.stderr);
        }
        (format!("{:016x}", fnv1a(&printed)), bad)
    }
}

/// The immediate scan must be able to fail, on exactly what ptxas lets through.
#[test]
fn the_scan_finds_what_ptxas_accepts() {
    let ptx = "\tsetp.lt.s32 \t%p1, %r4, 3000000000;\n\
                   \tsetp.lt.s64 \t%p1, %rd4, 3000000000;\n\
                   \t@!%p1 add.u32 \t%r1, %r2, -1;\n\
                   \tmov.b32 \t%r1, 0xffffffff;\n\
                   \tld.global.f32 \t%f1, [%rd12+4294967296];\n\
                   \tld.global.f32 \t%f1, [%rd12+1024];\n\
                   \tcvt.s64.s32 \t%rd1, 2147483648;\n\
                   \tshl.b64 \t%rd1, %rd2, 3;\n\
                   \tmov.f32 \t%f1, 0f3F800000;\n";
    let bad = overflowing_immediates(ptx);
    assert_eq!(bad.len(), 4, "{bad:#?}");
    assert!(bad[0].starts_with("line 1: immediate 3000000000 does not fit .s32"));
    assert!(bad[1].starts_with("line 3: immediate -1 does not fit .u32"));
    assert!(bad[2].starts_with("line 5: address offset 4294967296"));
    assert!(bad[3].starts_with("line 7: immediate 2147483648 does not fit .s32"));
}

#[test]
fn fnv1a_matches_its_reference_values() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn every_pinned_compile_prints_the_same() {
    let path = root().join(LIST);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{LIST}: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let entries: Vec<(usize, Entry)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            let e = Entry::parse(l).unwrap_or_else(|| panic!("{LIST}:{}: bad line `{l}`", i + 1));
            assert!(
                root().join(&e.file).exists(),
                "{LIST}:{}: no {}",
                i + 1,
                e.file
            );
            (i, e)
        })
        .collect();
    assert!(entries.len() > 100, "the list lost its entries");
    // Two workers: the compiles are independent and CI has two cores.
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    let overflows: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = {
                    let mut n = next.lock().unwrap_or_else(|p| p.into_inner());
                    let k = *n;
                    *n += 1;
                    k
                };
                let Some((line, entry)) = entries.get(k) else {
                    break;
                };
                let (hash, bad) = entry.run();
                overflows.lock().unwrap_or_else(|p| p.into_inner()).extend(
                    bad.into_iter()
                        .map(|b| format!("{}: {b}", entry.line(&hash))),
                );
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((*line, hash));
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let overflows = overflows.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(
        overflows.is_empty(),
        "immediates that do not fit their type:\n{}",
        overflows.join("\n")
    );
    let now = |line: usize| -> &str {
        results
            .iter()
            .find(|(l, _)| *l == line)
            .map_or("", |(_, h)| h.as_str())
    };
    if std::env::var_os("TLC_BLESS").is_some() {
        let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        for (line, entry) in &entries {
            out[*line] = entry.line(now(*line));
        }
        std::fs::write(&path, out.join("\n") + "\n").unwrap_or_else(|e| panic!("{LIST}: {e}"));
        return;
    }
    let changed: Vec<String> = entries
        .iter()
        .filter(|(line, e)| now(*line) != e.hash)
        .map(|(line, e)| {
            format!(
                "{LIST}:{}: {} (was {})",
                line + 1,
                e.line(now(*line)),
                e.hash
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "{} of {} compiles print something else now:\n{}\n(review the output, then bless with TLC_BLESS=1)",
        changed.len(),
        entries.len(),
        changed.join("\n")
    );
}
