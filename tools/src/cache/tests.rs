//! The tuning cache on the CPU: the key (stable, the tuning space left out), entries'
//! round trip, concurrent writers, and every kind of entry a lookup must ignore.

use super::*;
use tlc_ir::Target;

const GEMM: &str = include_str!("../../../bench/gemm_tunable.tir");

fn h100() -> DeviceId {
    DeviceId {
        name: "NVIDIA H100 80GB HBM3".into(),
        sms: 132,
        driver: 13000,
    }
}

fn dims() -> Config {
    vec![("M".into(), 4096), ("N".into(), 4096), ("K".into(), 4096)]
}

fn key_of(text: &str) -> Key {
    let func = tlc_ir::parse::parse(text).expect("the kernel parses");
    Key::new(&func, &dims(), &h100(), Target::Sm90a)
}

fn config(pairs: &[(&str, i64)]) -> Config {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

/// The gemm's own default config.
fn defaults() -> Config {
    config(&[
        ("threads", 256),
        ("block_M", 128),
        ("block_N", 128),
        ("block_K", 32),
        ("num_stages", 4),
    ])
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// A change to the hash or to the key's encoding moves every entry: this pins it. The value
/// is FNV-1a 64 of the length-prefixed fields (u64 little-endian lengths), computed
/// independently in Python.
#[test]
fn the_key_hash_is_stable() {
    let key = Key::from_text(
        "gemm",
        "def gemm():\n    pass\n".into(),
        config(&[("N", 1024), ("M", 4096)]),
        &h100(),
        Target::Sm90a,
        "0.1.0",
    );
    assert_eq!(key.dims, config(&[("M", 4096), ("N", 1024)]), "sorted");
    assert_eq!(key.hash(), 0x2c8c_a7c6_2596_549a);
    assert_eq!(key.file_name(), "gemm-2c8ca7c62596549a.json");
}

#[test]
fn every_field_is_in_the_key() {
    let base = || {
        Key::from_text(
            "gemm",
            "text".into(),
            config(&[("M", 64)]),
            &h100(),
            Target::Sm80,
            "0.1.0",
        )
    };
    let h = base().hash();
    let mut k = base();
    k.text.push(' ');
    assert_ne!(k.hash(), h, "text");
    let mut k = base();
    k.dims[0].1 = 65;
    assert_ne!(k.hash(), h, "dims");
    let mut k = base();
    k.device.name.push('X');
    assert_ne!(k.hash(), h, "device name");
    let mut k = base();
    k.device.sms = 114;
    assert_ne!(k.hash(), h, "SM count");
    let mut k = base();
    k.device.driver = 13010;
    assert_ne!(k.hash(), h, "driver");
    let mut k = base();
    k.target = Target::Sm90a;
    assert_ne!(k.hash(), h, "target");
    let mut k = base();
    k.version = "0.2.0".into();
    assert_ne!(k.hash(), h, "version");
    assert_eq!(base().hash(), h);
}

#[test]
fn the_key_leaves_out_the_tuning_space_but_not_the_body() {
    let key = key_of(GEMM);
    assert_eq!(key.kernel, "gemm_tunable");
    assert!(!key.text.contains("T.tunable"), "{}", key.text);
    // Other candidates, another default, a new constraint, a comment: the same key.
    let edited = GEMM
        .replace(
            "block_K = T.tunable([16, 32], default=32)",
            "block_K = T.tunable([16, 32, 64], default=64)",
        )
        .replace(
            "num_stages = T.tunable([3, 4, 5], default=4)\n",
            "num_stages = T.tunable([2, 3, 4, 5], default=4)\nT.tune_constraint(block_K * num_stages <= 256)\n",
        )
        .replace("# A pipelined GEMM", "# An edited comment on a pipelined GEMM");
    assert_ne!(edited, GEMM);
    assert_eq!(key_of(&edited).hash(), key.hash());
    // Any change to the kernel itself: another key.
    let body = GEMM.replace(
        "T.use_swizzle(panel_size=10)",
        "T.use_swizzle(panel_size=8)",
    );
    assert_ne!(body, GEMM);
    assert_ne!(key_of(&body).hash(), key.hash());
    // Other dims, another key; tunables among the dims are not part of it.
    let func = tlc_ir::parse::parse(GEMM).expect("parses");
    let other = Key::new(&func, &config(&[("M", 1024)]), &h100(), Target::Sm90a);
    assert_ne!(other.hash(), key.hash());
    let mut with_tunable = dims();
    with_tunable.push(("block_K".into(), 16));
    let same = Key::new(&func, &with_tunable, &h100(), Target::Sm90a);
    assert_eq!(same.hash(), key.hash());
}

#[test]
fn a_stored_entry_is_found_in_declaration_order() {
    let dir = temp();
    let cache = Cache::at(dir.path());
    let key = key_of(GEMM);
    assert_eq!(cache.lookup(&key), Lookup::Miss(cache.path(&key)));
    // Given in another order, with a value that is no candidate (block_K = 64).
    let mut chosen = config(&[
        ("num_stages", 3),
        ("block_K", 64),
        ("block_N", 128),
        ("block_M", 64),
        ("threads", 128),
    ]);
    let path = cache
        .store(
            &key,
            &Entry {
                config: chosen.clone(),
                time_ms: Some(0.25),
                tflops: Some(549.8),
            },
        )
        .expect("stored");
    assert_eq!(path, cache.path(&key));
    let text = std::fs::read_to_string(&path).expect("readable");
    for field in [
        "\"kernel\": \"gemm_tunable\"",
        "\"device\": \"NVIDIA H100 80GB HBM3\"",
        "\"sms\": 132",
        "\"target\": \"sm_90a\"",
        "\"M\": 4096",
        "\"block_K\": 64",
        "\"time_ms\": 0.25",
        "\"date\": \"",
    ] {
        assert!(text.contains(field), "{field} in\n{text}");
    }
    let Lookup::Hit(hit) = cache.lookup(&key) else {
        panic!("no hit: {:?}", cache.lookup(&key))
    };
    chosen.reverse();
    assert_eq!(hit.config, chosen);
    assert_eq!(hit.time_ms, Some(0.25));
    assert_eq!(hit.tflops, Some(549.8));
    assert_eq!(hit.path, path);
    // Another device: another key, a miss.
    let mut elsewhere = key.clone();
    elsewhere.device.sms = 114;
    assert!(matches!(cache.lookup(&elsewhere), Lookup::Miss(_)));
}

#[test]
fn concurrent_writers_leave_a_whole_entry() {
    let dir = temp();
    let cache = Cache::at(dir.path());
    let key = key_of(GEMM);
    let stages = [3i64, 4, 5, 6];
    std::thread::scope(|s| {
        for &n in &stages {
            let (cache, key) = (&cache, &key);
            s.spawn(move || {
                let mut c = defaults();
                c[4].1 = n;
                for _ in 0..25 {
                    cache
                        .store(
                            key,
                            &Entry {
                                config: c.clone(),
                                ..Entry::default()
                            },
                        )
                        .expect("stored");
                }
            });
        }
        let (cache, key) = (&cache, &key);
        s.spawn(move || {
            for _ in 0..200 {
                match cache.lookup(key) {
                    Lookup::Hit(_) | Lookup::Miss(_) => {}
                    Lookup::Ignored { reason, .. } => panic!("a reader saw a torn entry: {reason}"),
                }
            }
        });
    });
    let Lookup::Hit(hit) = cache.lookup(&key) else {
        panic!("no entry")
    };
    assert!(stages.contains(&hit.config[4].1), "{:?}", hit.config);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(files.len(), 1, "temporary files left: {files:?}");
}

/// Stores the defaults, lets `edit` change the file's text, and returns the lookup.
fn lookup_after(edit: impl Fn(String) -> String) -> Lookup {
    let dir = temp();
    let cache = Cache::at(dir.path());
    let key = key_of(GEMM);
    let path = cache
        .store(
            &key,
            &Entry {
                config: defaults(),
                ..Entry::default()
            },
        )
        .expect("stored");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, edit(text)).expect("write");
    cache.lookup(&key)
}

fn ignored_because(lookup: Lookup, why: &str) {
    match lookup {
        Lookup::Ignored { reason, .. } => assert!(reason.contains(why), "{reason}"),
        other => panic!("not ignored ({why}): {other:?}"),
    }
}

#[test]
fn a_corrupt_entry_is_ignored() {
    ignored_because(lookup_after(|_| String::new()), "not a tuning-cache entry");
    ignored_because(
        lookup_after(|t| t[..t.len() / 2].to_string()),
        "not a tuning-cache entry",
    );
    ignored_because(
        lookup_after(|_| "\u{0}\u{1}garbage".into()),
        "not a tuning-cache entry",
    );
    ignored_because(
        lookup_after(|t| t.replace("\"block_K\": 32", "\"block_K\": 32.5")),
        "not a tuning-cache entry",
    );
    ignored_because(
        lookup_after(|t| t.replace("\"format\": 2", "\"format\": 1")),
        "format 1",
    );
    // Unreadable: a directory where the file should be.
    let dir = temp();
    let cache = Cache::at(dir.path());
    let key = key_of(GEMM);
    std::fs::create_dir_all(cache.path(&key)).expect("mkdir");
    assert!(matches!(cache.lookup(&key), Lookup::Ignored { .. }));
}

#[test]
fn an_entry_of_another_key_is_ignored() {
    ignored_because(
        lookup_after(|t| t.replace("\"sms\": 132", "\"sms\": 114")),
        "not this compile's",
    );
    ignored_because(
        lookup_after(|t| t.replace("\"driver\": 13000", "\"driver\": 12080")),
        "not this compile's",
    );
    ignored_because(
        lookup_after(|t| t.replace("\"M\": 4096", "\"M\": 1024")),
        "not this compile's",
    );
}

#[test]
fn a_config_that_is_not_the_kernels_is_ignored() {
    ignored_because(
        lookup_after(|t| t.replace("\"block_K\": 32,", "")),
        "lacks block_K",
    );
    ignored_because(
        lookup_after(|t| t.replace("\"block_K\": 32,", "\"block_K\": 32,\n    \"warps\": 4,")),
        "names warps, not tunables",
    );
}

#[test]
fn a_config_breaking_a_constraint_is_ignored_and_not_stored() {
    let constrained = GEMM.replace(
        "num_stages = T.tunable([3, 4, 5], default=4)\n",
        "num_stages = T.tunable([3, 4, 5], default=4)\nT.tune_constraint(block_K * num_stages <= 128)\n",
    );
    let dir = temp();
    let cache = Cache::at(dir.path());
    let key = key_of(&constrained);
    let path = cache
        .store(
            &key,
            &Entry {
                config: defaults(),
                ..Entry::default()
            },
        )
        .expect("the defaults satisfy it");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(
        &path,
        text.replace("\"num_stages\": 4", "\"num_stages\": 5"),
    )
    .expect("write");
    ignored_because(
        cache.lookup(&key),
        "breaks the constraint `block_K * num_stages <= 128`",
    );
    // The store refuses such a config in the first place, and one that lacks a tunable.
    let mut bad = defaults();
    bad[4].1 = 5;
    let e = cache
        .store(
            &key,
            &Entry {
                config: bad,
                ..Entry::default()
            },
        )
        .expect_err("refused");
    assert!(e.contains("breaks the constraint"), "{e}");
    let e = cache
        .store(
            &key,
            &Entry {
                config: defaults()[1..].to_vec(),
                ..Entry::default()
            },
        )
        .expect_err("refused");
    assert!(e.contains("lacks threads"), "{e}");
}
