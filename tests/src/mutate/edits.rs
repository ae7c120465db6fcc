//! The edits a mutant is made of, and the one way a mutant is drawn from a seed.
//!
//! Each edit works on the text ([`super::pieces`]: words and single other characters), so
//! it applies to every spelling (DSL, TVMScript) and to texts that no longer parse. An
//! edit that finds nothing to change gives `None` and another is tried.

use super::{pieces, Rng, Source};

/// The kinds of edit, each named in findings and statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Edit {
    /// An integer literal → an edge value (0, ±1, 2^31, 2^63 − 1, …), a neighbour, its
    /// double or its half.
    Literal,
    /// A float literal → 0, −0, a huge, tiny, infinite or NaN value.
    Float,
    /// A dtype → another (or an unknown spelling).
    Dtype,
    /// A name → another name of the text.
    Name,
    /// A loop kind → another.
    LoopKind,
    /// A keyword-like word → another of its family (`alloc_shared` / `alloc_fragment`,
    /// `reduce_sum` / `reduce_max`, `True` / `False`, `exp` / `exp2`, `and` / `or`, …).
    Keyword,
    /// An arithmetic or comparison operator → another.
    Operator,
    /// Inside `[…]`: an index dropped, duplicated or swapped, or turned into a slice, a
    /// slice bound dropped.
    Slice,
    /// A name `x` → `x + k`.
    Offset,
    /// A line dropped, duplicated, or swapped with the next.
    Line,
    /// A few random characters inserted or replaced (ASCII, controls, non-ASCII).
    Bytes,
}

impl Edit {
    pub const ALL: [Edit; 11] = [
        Edit::Literal,
        Edit::Float,
        Edit::Dtype,
        Edit::Name,
        Edit::LoopKind,
        Edit::Keyword,
        Edit::Operator,
        Edit::Slice,
        Edit::Offset,
        Edit::Line,
        Edit::Bytes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Edit::Literal => "literal",
            Edit::Float => "float",
            Edit::Dtype => "dtype",
            Edit::Name => "name",
            Edit::LoopKind => "loop-kind",
            Edit::Keyword => "keyword",
            Edit::Operator => "operator",
            Edit::Slice => "slice",
            Edit::Offset => "offset",
            Edit::Line => "line",
            Edit::Bytes => "bytes",
        }
    }

    /// How often each is drawn, out of [`WEIGHT_SUM`]: literals most (they reach the
    /// limits and the index math), random bytes least (they rarely get past the parser).
    fn weight(self) -> usize {
        match self {
            Edit::Literal => 6,
            Edit::Name | Edit::Line => 3,
            Edit::Float
            | Edit::Dtype
            | Edit::LoopKind
            | Edit::Keyword
            | Edit::Operator
            | Edit::Slice
            | Edit::Offset => 2,
            Edit::Bytes => 1,
        }
    }
}

const WEIGHT_SUM: usize = 6 + 3 * 2 + 2 * 7 + 1;

/// One mutant: which text it comes from, the edits applied, the result.
#[derive(Clone, Debug)]
pub struct Mutant {
    pub seed: u64,
    pub index: u64,
    /// The corpus text it was made from ([`Source::name`]).
    pub source: String,
    pub edits: Vec<Edit>,
    pub text: String,
}

impl Mutant {
    /// `seed:index of SOURCE (edits)`: enough to draw it again.
    pub fn describe(&self) -> String {
        let edits: Vec<&str> = self.edits.iter().map(|e| e.name()).collect();
        format!(
            "mutant {}:{} of {} ({})",
            self.seed,
            self.index,
            self.source,
            edits.join(", ")
        )
    }
}

/// Mutant `index` of the campaign seeded `seed` over `corpus`: a function of the three
/// alone. Four in five come from texts `check` accepts as they are; one to three edits.
pub fn mutant(corpus: &[Source], seed: u64, index: u64) -> Mutant {
    let mut rng = Rng::for_item(seed, index);
    let (good, bad): (Vec<&Source>, Vec<&Source>) = corpus.iter().partition(|s| !s.malformed);
    let pool = if bad.is_empty() || (!good.is_empty() && rng.below(5) != 0) {
        &good
    } else {
        &bad
    };
    let source = pool.get(rng.below(pool.len()));
    let mut text = source.map(|s| s.text.clone()).unwrap_or_default();
    let count = match rng.below(20) {
        0..=9 => 1,
        10..=16 => 2,
        _ => 3,
    };
    let mut edits = Vec::new();
    for _ in 0..count {
        // An edit with nothing to change gives way to another draw.
        for _ in 0..8 {
            let edit = draw(&mut rng);
            if let Some(t) = apply(edit, &text, &mut rng) {
                text = t;
                edits.push(edit);
                break;
            }
        }
    }
    Mutant {
        seed,
        index,
        source: source.map(|s| s.name.clone()).unwrap_or_default(),
        edits,
        text,
    }
}

fn draw(rng: &mut Rng) -> Edit {
    let mut r = rng.below(WEIGHT_SUM);
    for e in Edit::ALL {
        if r < e.weight() {
            return e;
        }
        r -= e.weight();
    }
    Edit::Literal
}

/// Integer edge values: the limits of int32, int64 and of the IR (dims up to 2^30 and
/// 2^40), powers of two and their neighbours (tile sizes, warps), 0 and −1.
pub const EDGE_INTS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "7",
    "8",
    "15",
    "16",
    "17",
    "31",
    "32",
    "33",
    "63",
    "64",
    "65",
    "127",
    "128",
    "129",
    "255",
    "256",
    "1000",
    "1023",
    "1024",
    "1025",
    "4096",
    "65535",
    "65536",
    "1073741824",
    "1073741825",
    "2147483647",
    "2147483648",
    "4294967296",
    "1099511627776",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
];

const FLOATS: &[&str] = &[
    "0.0",
    "-0.0",
    "1.0",
    "0.5",
    "-1.5",
    "1e-45",
    "1e-30",
    "65504.0",
    "65536.0",
    "3.4e38",
    "1e300",
    "float(\"inf\")",
    "-float(\"inf\")",
    "float(\"nan\")",
];

const DTYPES: &[&str] = &[
    "float16",
    "bfloat16",
    "float32",
    "float",
    "float64",
    "int32",
    "int64",
    "int8",
    "uint8",
    "uint32",
    "bool",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e5m2",
    "int16",
    "float8_e4m3fnuz",
];

const LOOPS: &[&str] = &[
    "Parallel",
    "serial",
    "unroll",
    "vectorized",
    "Pipelined",
    "parallel",
    "range",
];

/// Families of words that stand in for each other.
const KEYWORDS: &[&[&str]] = &[
    &["alloc_shared", "alloc_fragment", "alloc_local", "alloc_var"],
    &[
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "reduce_abssum",
        "reduce_absmax",
    ],
    &["True", "False"],
    &["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh"],
    &["max", "min"],
    &["and", "or"],
    &["copy", "fill", "clear"],
    &["Square", "FullRow", "FullCol"],
    &["threads", "num_stages", "dim", "panel_size"],
    &["transpose_A", "transpose_B", "clear_accum", "clear"],
    &["threadIdx", "blockIdx"],
    &["x", "y", "z"],
    &["if", "while"],
    &["shared", "local", "global"],
];

const OPERATORS: &[&str] = &["+", "-", "*", "/", "%", "<", ">", "&", "|", "^"];
const STRAY: &[&str] = &[
    "(", ")", "[", "]", ":", ",", "\t", "\n", "    ", "=", "\"", "#", "\\", "\0", "\r", "é", "∞",
    "\u{feff}", "@", ".", "T.", "0",
];

/// Applies `edit` to `src`; `None` when the text has nothing it applies to.
pub fn apply(edit: Edit, src: &str, rng: &mut Rng) -> Option<String> {
    let mut p = pieces(src);
    let positions = |p: &[String], pred: &dyn Fn(&str) -> bool| -> Vec<usize> {
        (0..p.len()).filter(|&i| pred(&p[i])).collect()
    };
    match edit {
        Edit::Literal => {
            let at = positions(&p, &is_int);
            let i = *rng.pick(&at)?;
            let old: i128 = p[i].parse().unwrap_or(1);
            p[i] = match rng.below(4) {
                0 | 1 => rng.pick(EDGE_INTS)?.to_string(),
                2 => (old * 2).to_string(),
                _ => (old + *rng.pick(&[-1i128, 1, -2, 2])?).max(0).to_string(),
            };
        }
        Edit::Float => {
            // `1.5` is three pieces: digits, a dot, digits.
            let at: Vec<usize> = (0..p.len().saturating_sub(2))
                .filter(|&i| is_int(&p[i]) && p[i + 1] == "." && is_int(&p[i + 2]))
                .collect();
            let i = *rng.pick(&at)?;
            p.splice(i..i + 3, [rng.pick(FLOATS)?.to_string()]);
        }
        Edit::Dtype => {
            let at = positions(&p, &|s| DTYPES.contains(&s));
            let i = *rng.pick(&at)?;
            p[i] = rng.pick(DTYPES)?.to_string();
        }
        Edit::Name => {
            let at = positions(&p, &is_name);
            let (i, j) = (*rng.pick(&at)?, *rng.pick(&at)?);
            p[i] = p[j].clone();
        }
        Edit::LoopKind => {
            let at = positions(&p, &|s| LOOPS.contains(&s));
            let i = *rng.pick(&at)?;
            p[i] = rng.pick(LOOPS)?.to_string();
        }
        Edit::Keyword => {
            let at = positions(&p, &|s| KEYWORDS.iter().any(|f| f.contains(&s)));
            let i = *rng.pick(&at)?;
            let family = KEYWORDS.iter().find(|f| f.contains(&p[i].as_str()))?;
            p[i] = rng.pick(family)?.to_string();
        }
        Edit::Operator => {
            let at = positions(&p, &|s| OPERATORS.contains(&s));
            let i = *rng.pick(&at)?;
            p[i] = rng.pick(OPERATORS)?.to_string();
        }
        Edit::Slice => return slice(&p, rng),
        Edit::Offset => {
            let at = positions(&p, &is_name);
            let i = *rng.pick(&at)?;
            p[i] = format!("({} + {})", p[i], rng.pick(EDGE_INTS)?);
        }
        Edit::Line => return line(src, rng),
        Edit::Bytes => {
            let mut chars: Vec<char> = src.chars().collect();
            for _ in 0..=rng.below(3) {
                let at = rng.below(chars.len() + 1);
                let new: Vec<char> = match rng.below(3) {
                    0 => rng.pick(STRAY)?.chars().collect(),
                    // Any character of the first plane but the surrogates.
                    1 => char::from_u32(rng.below(0xd800) as u32)
                        .into_iter()
                        .collect(),
                    _ => vec![(32 + rng.below(95) as u8) as char],
                };
                if rng.below(2) == 0 && at < chars.len() {
                    chars.splice(at..at + 1, new);
                } else {
                    chars.splice(at..at, new);
                }
            }
            return Some(chars.into_iter().collect());
        }
    }
    Some(p.concat())
}

fn is_int(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A name worth swapping: a word that starts like an identifier and is no keyword of the
/// spelling's structure.
fn is_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && !matches!(
            s,
            "T" | "def" | "with" | "as" | "for" | "in" | "if" | "else" | "elif" | "while"
        )
}

/// An edit inside one `[…]`: its comma-separated parts (indices, shape entries, slices).
fn slice(p: &[String], rng: &mut Rng) -> Option<String> {
    let opens: Vec<usize> = (0..p.len()).filter(|&i| p[i] == "[").collect();
    let open = *rng.pick(&opens)?;
    // The matching `]` and the top-level commas between.
    let (mut depth, mut close, mut commas) = (0i32, None, Vec::new());
    for (i, piece) in p.iter().enumerate().skip(open) {
        match piece.as_str() {
            "[" | "(" | "{" => depth += 1,
            "]" | ")" | "}" => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            "," if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    let close = close?;
    let mut bounds = vec![open];
    bounds.extend(&commas);
    bounds.push(close);
    let parts: Vec<Vec<String>> = bounds
        .windows(2)
        .map(|w| p[w[0] + 1..w[1]].to_vec())
        .collect();
    let mut parts = parts;
    let k = rng.below(parts.len());
    match rng.below(5) {
        0 if parts.len() > 1 => {
            parts.remove(k);
        }
        1 => {
            let copy = parts[k].clone();
            parts.insert(k, copy);
        }
        2 if parts.len() > 1 => {
            let j = rng.below(parts.len());
            parts.swap(k, j);
        }
        3 => {
            // `e` → `e:e + n`, or a slice's bound dropped.
            match parts[k].iter().position(|s| s == ":") {
                Some(colon) if rng.below(2) == 0 => {
                    parts[k].truncate(colon + 1);
                }
                Some(colon) => {
                    parts[k].drain(..colon);
                }
                None => {
                    let e = parts[k].concat();
                    let n = rng.pick(&["1", "16", "32", "128"])?;
                    parts[k] = vec![format!("{e}:{e} + {n}")];
                }
            }
        }
        _ => parts[k] = vec![format!(" {}", rng.pick(EDGE_INTS)?)],
    }
    let inner: Vec<String> = parts.into_iter().map(|v| v.concat()).collect();
    let mut out = p[..open].concat();
    out.push('[');
    out.push_str(&inner.join(","));
    out.push(']');
    out.push_str(&p[close + 1..].concat());
    Some(out)
}

fn line(src: &str, rng: &mut Rng) -> Option<String> {
    let mut lines: Vec<&str> = src.lines().collect();
    if lines.is_empty() {
        return None;
    }
    let i = rng.below(lines.len());
    match rng.below(3) {
        0 => {
            lines.remove(i);
        }
        1 => {
            let l = lines[i];
            lines.insert(i, l);
        }
        _ if i + 1 < lines.len() => lines.swap(i, i + 1),
        _ => return None,
    }
    Some(lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEMM: &str = "@T.prim_func\ndef f(A: T.Tensor((128, 64), \"float16\")):\n    with T.Kernel(4, threads=128) as (bx):\n        for i in T.Parallel(128):\n            A[i, 0] = A[i, 1] + 1.5\n";

    #[test]
    fn each_edit_changes_a_kernel_it_applies_to() {
        for edit in Edit::ALL {
            let mut changed = 0;
            for s in 0..50 {
                let mut rng = Rng::for_item(7, s);
                if let Some(t) = apply(edit, GEMM, &mut rng) {
                    changed += usize::from(t != GEMM);
                }
            }
            assert!(changed > 10, "{}: {changed} of 50", edit.name());
        }
    }

    #[test]
    fn a_mutant_is_a_function_of_seed_and_index() {
        let corpus = vec![Source {
            name: "g.tir".into(),
            text: GEMM.into(),
            malformed: false,
        }];
        let a = mutant(&corpus, 3, 17);
        let b = mutant(&corpus, 3, 17);
        assert_eq!((a.text.as_str(), &a.edits), (b.text.as_str(), &b.edits));
        assert!(!a.edits.is_empty());
        let distinct: std::collections::HashSet<String> =
            (0..40).map(|i| mutant(&corpus, 3, i).text).collect();
        assert!(distinct.len() > 30, "{}", distinct.len());
    }

    #[test]
    fn slices_keep_the_brackets_balanced() {
        for s in 0..200 {
            let mut rng = Rng::for_item(11, s);
            if let Some(t) = apply(Edit::Slice, GEMM, &mut rng) {
                assert_eq!(t.matches('[').count(), t.matches(']').count(), "{t}");
            }
        }
    }
}
