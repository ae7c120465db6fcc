//! What `tlc compile` prints for every example, test case and bench config, pinned by hash.
//!
//! `ptx_identity.txt` lists one compile per line — `HASH TARGET FILE [NAME=VALUE]...` — and
//! this test runs `tlc compile FILE --target TARGET -o - -D NAME=VALUE...` for each and
//! compares the FNV-1a hash of its output (the PTX, or the exit code and the rendered error
//! of a kernel tlc refuses) with `HASH`. A refactoring that must not change generated code
//! keeps every line; a change that does is seen here, compile by compile, and re-pinned with
//!
//! ```text
//! TLC_BLESS=1 cargo test -p tlc --test ptx_identity
//! ```
//!
//! after the new output was reviewed (a blessed file is a changed compiler, like a snapshot).
//! To add a compile, add a line with any hash and bless.

mod common;

use common::{root, tlc};
use std::fmt::Write;
use std::sync::Mutex;

const LIST: &str = "compiler/tests/ptx_identity.txt";

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

    /// The hash of what this compile prints now.
    fn run(&self) -> String {
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
        if !out.status.success() {
            printed = format!("exit {:?}\n", out.status.code()).into_bytes();
            printed.extend(out.stderr);
        }
        format!("{:016x}", fnv1a(&printed))
    }
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
                let hash = entry.run();
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((*line, hash));
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
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
