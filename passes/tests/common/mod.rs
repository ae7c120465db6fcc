//! Shared helpers of the pass tests: the case corpus, and the interpreter check that a pass
//! keeps a kernel's meaning.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tlc_ir::interp::{run, RunOptions};
use tlc_ir::{ForKind, PrimFunc, Stmt, StmtKind};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The target a case file marked `# requires: TARGET` is limited to (fp8 GEMMs: sm_90a).
pub fn required_target(path: &Path) -> Option<tlc_ir::Target> {
    let text = std::fs::read_to_string(path).ok()?;
    let name = text.lines().find_map(|l| l.strip_prefix("# requires: "))?;
    tlc_ir::Target::ALL
        .into_iter()
        .find(|t| t.name() == name.trim())
}

/// Every valid case and example that compiles for every target (the pass tests run them on
/// sm_80, [`cx`]): (stem, parsed function). Files marked `# requires: sm_90a` are left to
/// the sm_90a tests (`gemm_pipeline.rs`, `tests/tests/tilelang_examples.rs`).
pub fn corpus() -> Vec<(String, PrimFunc)> {
    let mut out = Vec::new();
    for dir in ["tests/cases/valid", "examples"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .expect("list cases")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "tir"))
            .collect();
        paths.sort();
        for p in paths {
            if required_target(&p).is_some() {
                continue;
            }
            out.push((
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                load(&p),
            ));
        }
    }
    assert!(out.len() >= 12, "corpus shrank to {}", out.len());
    out
}

/// `func` with its dims `M`, `N`, `K` bound to constants.
pub fn bound_mnk(func: &PrimFunc, m: i64, n: i64, k: i64) -> PrimFunc {
    let dims = [
        ("M".to_string(), m),
        ("N".to_string(), n),
        ("K".to_string(), k),
    ];
    tlc_ir::specialize::specialize(func, &dims).expect("specialize")
}

/// The kernel of `file` (relative to the repository) with `M`, `N`, `K` bound.
pub fn load_bound(file: &str, m: i64, n: i64, k: i64) -> PrimFunc {
    bound_mnk(&load(&root().join(file)), m, n, k)
}

/// The kernel of `path` as the front end gives it to the pipeline: parsed, its tuning space
/// (if any) at its defaults, verified, with `thread-sync`'s barriers in its per-thread code
/// (docs/ir.md, "Automatic barriers").
pub fn load(path: &Path) -> PrimFunc {
    let text = std::fs::read_to_string(path).expect("read case");
    load_text(&path.display().to_string(), &text)
}

/// [`load`] of source text (`name` in panics): a case edited by a test.
#[allow(dead_code)]
pub fn load_text(name: &str, text: &str) -> PrimFunc {
    let func = tlc_ir::parse(text).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    let func = tlc_ir::tuning::bind(&func, &Vec::new(), &Vec::new())
        .unwrap_or_else(|d| panic!("{name}: {d:?}"));
    tlc_ir::verifier::verify(&func).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    tlc_passes::thread_sync::thread_sync(func).unwrap_or_else(|d| panic!("{name}: {d:?}"))
}

/// Whether `func` has thread regions next to tile ops (docs/ir.md, "Thread regions"): the
/// thread-level passes (`thread-binding` on) take it only after `lower-tile-ops`.
pub fn mixes_levels(func: &PrimFunc) -> bool {
    let (mut tile, mut region) = (false, false);
    tlc_ir::visit::for_each_stmt(&func.body, &mut |s| match &s.kind {
        tlc_ir::StmtKind::Copy { .. }
        | tlc_ir::StmtKind::Fill { .. }
        | tlc_ir::StmtKind::Gemm(_)
        | tlc_ir::StmtKind::Reduce(_) => tile = true,
        tlc_ir::StmtKind::For(f) => match f.kind {
            tlc_ir::ForKind::Parallel => tile = true,
            tlc_ir::ForKind::ThreadBinding(_) => region = true,
            _ => {}
        },
        _ => {}
    });
    tile && region
}

pub fn case(stem: &str) -> PrimFunc {
    corpus()
        .into_iter()
        .find(|(s, _)| s == stem)
        .map(|(_, f)| f)
        .unwrap_or_else(|| panic!("no case {stem}"))
}

/// Small ragged sizes for the symbolic dims, one binding per entry.
const RAGGED: [&[i64]; 2] = [&[37, 70, 45], &[129, 20, 66]];
/// Tile-aligned sizes, for kernels that do not mask ragged edges (the seed gemm).
const ALIGNED: [&[i64]; 2] = [&[128, 256, 64], &[256, 128, 96]];

fn dim_bindings(func: &PrimFunc, choices: &[&[i64]]) -> Vec<HashMap<String, i64>> {
    choices
        .iter()
        .map(|vals| {
            func.dims
                .iter()
                .enumerate()
                .map(|(i, d)| (d.name.clone(), vals[i % vals.len()]))
                .collect()
        })
        .collect()
}

/// Largest parameter footprint interpreted (the 4096-sized seed kernels are skipped; their
/// symbolic twin `seed000_dims` covers the same code).
const MAX_ELEMENTS: usize = 1 << 20;

/// Runs `before` and `after` on the same random inputs (several seeds, several dim
/// bindings) and requires identical outputs. Returns how many runs were compared (0 when
/// the case is too large to interpret).
pub fn assert_same_meaning(name: &str, before: &PrimFunc, after: &PrimFunc) -> usize {
    check_meaning(name, before, after, None)
}

/// As [`assert_same_meaning`], but float outputs may differ by `tol * (|x| + 1)`: for
/// lowerings that legitimately reorder float sums (a gemm's K loop split into mma.sync
/// steps of 16 adds each step's sum to the accumulator).
pub fn assert_close_meaning(name: &str, before: &PrimFunc, after: &PrimFunc, tol: f64) -> usize {
    check_meaning(name, before, after, Some(tol))
}

fn check_meaning(name: &str, before: &PrimFunc, after: &PrimFunc, tol: Option<f64>) -> usize {
    check_against(name, &Reference::of(name, before), after, tol)
}

/// The reference side of a meaning check: `before`'s outputs on the dim bindings and seeds
/// every check against it uses. Computed once for a function whose every pipeline stage is
/// checked (`check_against`), instead of once per stage; the outputs are the same either
/// way (the interpreter is deterministic for a seed).
pub struct Reference {
    /// Per dim binding, in order: its outputs per seed; `None` for the first binding whose
    /// footprint is too large to interpret (the check stops there and counts 0 runs).
    runs: Vec<BindingRuns>,
    /// `before`'s int4 parameters: a later stage may take them as the int8 tensors of their
    /// bytes (`pack-int4`), so they are given to it packed (the values the interpreter drew
    /// for `before`) and its results unpacked.
    int4: Vec<tlc_ir::BufferDecl>,
}

/// One dim binding and its runs (`None`: too large to interpret).
type BindingRuns = (HashMap<String, i64>, Option<Vec<SeedRun>>);

/// A seed and the reference's outputs for it, by parameter.
type SeedRun = (u64, HashMap<String, tlc_ir::interp::Tensor>);

impl Reference {
    /// Runs `before` as every check of it would: the ragged bindings when it runs at the
    /// first of them (or that one is too large), else the tile-aligned ones; seeds 1, 2, 3.
    pub fn of(name: &str, before: &PrimFunc) -> Reference {
        let ragged = dim_bindings(before, &RAGGED);
        let fits = ragged.first().is_none_or(|dims| {
            footprint(before, dims) > MAX_ELEMENTS
                || run(
                    before,
                    dims,
                    HashMap::new(),
                    &RunOptions {
                        seed: 1,
                        threads: 1,
                    },
                )
                .is_ok()
        });
        let bindings = if fits {
            ragged
        } else {
            dim_bindings(before, &ALIGNED)
        };
        let mut runs = Vec::new();
        for dims in bindings {
            if footprint(before, &dims) > MAX_ELEMENTS {
                runs.push((dims, None));
                break;
            }
            let mut outputs = Vec::new();
            for seed in [1u64, 2, 3] {
                let opts = RunOptions { seed, threads: 1 };
                match run(before, &dims, HashMap::new(), &opts) {
                    Ok(w) => outputs.push((seed, w)),
                    Err(e) => panic!("{name}: the input does not run: {e}"),
                }
            }
            runs.push((dims, Some(outputs)));
        }
        let int4 = before
            .params
            .iter()
            .filter(|p| p.dtype == tlc_ir::DType::Int4)
            .cloned()
            .collect();
        Reference { runs, int4 }
    }

    /// The inputs `after` takes for `seed`: `before`'s int4 inputs as the interpreter drew
    /// them (their shapes are the outputs'), packed where `after`'s parameter is int8.
    fn inputs(
        &self,
        after: &PrimFunc,
        seed: u64,
        want: &HashMap<String, tlc_ir::interp::Tensor>,
    ) -> HashMap<String, tlc_ir::interp::Tensor> {
        let drawn = self
            .int4
            .iter()
            .filter_map(|p| {
                let shape = want.get(&p.name.name)?.shape();
                let t = tlc_ir::interp::random_input(p, shape, seed).ok()?;
                Some((p.name.name.clone(), t))
            })
            .collect();
        let dtype_of = |n: &str| {
            let p = after.params.iter().find(|p| p.name.name == n);
            p.map(|p| p.dtype)
        };
        tlc_ir::interp::packed_for(&dtype_of, drawn).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Runs `after` on the reference's bindings and seeds and compares its outputs with the
/// reference's (exactly, or within `tol * (|x| + 1)`); `name` says which check fails.
/// Returns how many runs were compared (0 when the case is too large to interpret).
pub fn check_against(
    name: &str,
    reference: &Reference,
    after: &PrimFunc,
    tol: Option<f64>,
) -> usize {
    let mut runs = 0;
    for (dims, outputs) in &reference.runs {
        let Some(outputs) = outputs else {
            return 0;
        };
        for (seed, want) in outputs {
            let opts = RunOptions {
                seed: *seed,
                threads: 1,
            };
            let inputs = reference.inputs(after, *seed, want);
            let got = run(after, dims, inputs, &opts)
                .unwrap_or_else(|e| panic!("{name}: the output does not run: {e}"));
            let was_int4 = |n: &str| {
                let p = reference.int4.iter().find(|p| p.name.name == n);
                p.map(|p| p.dtype)
            };
            let got = tlc_ir::interp::unpacked_for(&was_int4, got);
            assert_eq!(want.len(), got.len(), "{name}");
            for (param, w) in want {
                let g = got.get(param);
                let same = match (tol, g) {
                    (Some(tol), Some(g)) => {
                        g.shape() == w.shape()
                            && w.to_f64()
                                .iter()
                                .zip(g.to_f64())
                                .all(|(x, y)| (x - y).abs() <= tol * (x.abs() + 1.0))
                    }
                    _ => g == Some(w),
                };
                assert!(
                    same,
                    "{name}: `{param}` differs (dims {dims:?}, seed {seed})"
                );
            }
            runs += 1;
        }
    }
    runs
}

/// Runs the symbolic kernel `symbolic` with its dims given at run time (`dims`) and `bound`
/// — the same kernel with the dims bound by `-D`, through any passes — on the same random
/// inputs (three seeds); float outputs may differ by `tol * (|x| + 1)` (0: exactly equal).
/// What a `-D` binding compiles must compute what the symbolic kernel computes at those
/// sizes. Returns how many runs were compared.
pub fn assert_bound_matches_symbolic(
    name: &str,
    symbolic: &PrimFunc,
    dims: &[(&str, i64)],
    bound: &PrimFunc,
    tol: f64,
) -> usize {
    assert!(
        bound.dims.is_empty(),
        "{name}: the bound kernel still has symbolic dims"
    );
    let dims: HashMap<String, i64> = dims.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let mut runs = 0;
    for seed in [1u64, 2, 3] {
        let opts = RunOptions { seed, threads: 1 };
        let want = run(symbolic, &dims, HashMap::new(), &opts)
            .unwrap_or_else(|e| panic!("{name}: the symbolic kernel does not run: {e}"));
        let got = run(bound, &HashMap::new(), HashMap::new(), &opts)
            .unwrap_or_else(|e| panic!("{name}: the bound kernel does not run: {e}"));
        assert_eq!(want.len(), got.len(), "{name}");
        for (param, w) in &want {
            let g = got
                .get(param)
                .unwrap_or_else(|| panic!("{name}: no `{param}`"));
            assert_eq!(g.shape(), w.shape(), "{name}: `{param}`");
            let worst = w
                .to_f64()
                .iter()
                .zip(g.to_f64())
                .map(|(x, y)| match (x - y).abs() / (x.abs() + 1.0) {
                    _ if x == &y || (x.is_nan() && y.is_nan()) => 0.0,
                    d if d.is_nan() => f64::INFINITY,
                    d => d,
                })
                .fold(0.0f64, f64::max);
            assert!(
                worst <= tol,
                "{name}: `{param}` differs from the symbolic kernel's (seed {seed}, {worst:e})"
            );
        }
        runs += 1;
    }
    runs
}

/// Elements of all parameters with `dims` bound.
fn footprint(func: &PrimFunc, dims: &HashMap<String, i64>) -> usize {
    let bindings: Vec<(String, i64)> = dims.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let Ok(f) = tlc_ir::specialize::specialize(func, &bindings) else {
        return usize::MAX;
    };
    f.params
        .iter()
        .map(|p| {
            p.shape
                .iter()
                .map(|d| tlc_ir::verifier::const_int(d).map_or(usize::MAX, |v| v.max(0) as usize))
                .fold(1usize, usize::saturating_mul)
        })
        .fold(0usize, usize::saturating_add)
}

/// `func` with a `T.sync_threads()` closing every thread-binding region: between
/// `lower-tile-ops` and `thread-binding`, consecutive regions are separated as if by a
/// barrier (thread-binding inserts the real ones), and the lockstep interpreter checks
/// shared-memory races across regions.
pub fn with_region_barriers(mut func: PrimFunc) -> PrimFunc {
    // `threads`: the enclosing kernel's block size. A region over fewer threads (the user's
    // threads of a block with a producer warpgroup) is not reached by all of them: its end
    // orders it as the interpreter's region end does, without a barrier.
    fn walk(body: &mut [Stmt], threads: i64) {
        for s in body {
            let mut inner = threads;
            if let StmtKind::Kernel(k) = &s.kind {
                inner = k
                    .threads
                    .iter()
                    .map(|e| tlc_ir::verifier::const_int(e).unwrap_or(1))
                    .product();
            }
            if let StmtKind::For(f) = &mut s.kind {
                if matches!(f.kind, ForKind::ThreadBinding(_)) {
                    let extent = tlc_ir::verifier::const_int(&f.stop).unwrap_or(threads);
                    if extent >= threads {
                        f.body.push(Stmt::new(StmtKind::Barrier, s.span));
                    }
                    continue;
                }
            }
            for child in tlc_ir::visit::child_bodies_mut(s) {
                walk(child, inner);
            }
        }
    }
    walk(&mut func.body, 0);
    func
}

/// The context a pass runs in when a test calls it by hand: sm_80, nothing cached.
pub fn cx() -> tlc_passes::PassContext {
    tlc_passes::PassContext::new(tlc_ir::Target::Sm80)
}

/// Every stage of the default pipeline of `cx`'s target run on `func`: (pass name, its
/// output), each verified and printed-then-parsed back to itself.
#[allow(dead_code)]
pub fn pipeline_stages(
    func: &PrimFunc,
    cx: &tlc_passes::PassContext,
) -> Vec<(&'static str, PrimFunc)> {
    let mut out = Vec::new();
    let mut cur = func.clone();
    for pass in tlc_passes::default_pipeline(cx.target()) {
        cur = pass
            .run(cur, cx)
            .unwrap_or_else(|e| panic!("{}: {e:#?}", pass.name()));
        if let Err(e) = tlc_ir::verifier::verify(&cur) {
            panic!(
                "after {}: {e:#?}\n{}",
                pass.name(),
                tlc_ir::printer::print_func(&cur)
            );
        }
        let text = tlc_ir::printer::print_func(&cur);
        let back = tlc_ir::parse(&text).unwrap_or_else(|e| panic!("{}: {e:#?}", pass.name()));
        assert_eq!(
            tlc_ir::printer::print_func(&back),
            text,
            "after {}: no round trip",
            pass.name()
        );
        out.push((pass.name(), cur.clone()));
    }
    out
}
