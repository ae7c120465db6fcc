//! What an oracle reports, its class (for deduplication and minimization), its text form
//! (between the `mutate` binary and its workers) and its file form (a findings directory).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tlc_ir::Target;

/// The oracles; each names the files of its findings (`NNN_<name>.tir`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Oracle {
    /// Something panicked (the stage is in the message).
    Panic,
    /// A worker process died: abort, stack overflow, out of memory.
    Crash,
    /// A worker ran past the time limit.
    Hang,
    /// An error without a source location, or with a span outside the text.
    Unlocated,
    /// What `check` accepts, `compile` neither compiled nor refused with located errors
    /// (a pass produced IR the verifier rejects, a pass ran below its level).
    Internal,
    /// `tlc fmt` of `tlc fmt`'s output differs from it, or it does not parse back equal.
    Fmt,
    /// The `--emit=tir` text does not parse back to the compiled IR, or the front end
    /// refuses it.
    Roundtrip,
    /// The tile-level interpreter and the interpreter on a target's compiled IR disagree.
    Differential,
}

impl Oracle {
    pub const ALL: [Oracle; 8] = [
        Oracle::Panic,
        Oracle::Crash,
        Oracle::Hang,
        Oracle::Unlocated,
        Oracle::Internal,
        Oracle::Fmt,
        Oracle::Roundtrip,
        Oracle::Differential,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Oracle::Panic => "panic",
            Oracle::Crash => "crash",
            Oracle::Hang => "hang",
            Oracle::Unlocated => "unlocated",
            Oracle::Internal => "internal",
            Oracle::Fmt => "fmt",
            Oracle::Roundtrip => "roundtrip",
            Oracle::Differential => "differential",
        }
    }

    pub fn parse(text: &str) -> Option<Oracle> {
        Oracle::ALL.into_iter().find(|o| o.name() == text)
    }
}

/// One thing an oracle found wrong with one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub oracle: Oracle,
    /// The target whose road it is on; `None` for the target-free oracles (`fmt`, `check`).
    pub target: Option<Target>,
    pub message: String,
}

impl Finding {
    pub fn new(oracle: Oracle, target: Option<Target>, message: impl Into<String>) -> Finding {
        Finding {
            oracle,
            target,
            message: message.into(),
        }
    }

    /// The finding's class: oracle, target, and the first line of its message with numbers
    /// and quoted names blurred — one bug found through many mutants is one class (the
    /// campaign writes a few files per class, the minimizer keeps the class).
    pub fn class(&self) -> String {
        let target = self.target.map_or("-", |t| t.name());
        let first = self.message.lines().next().unwrap_or("");
        format!("{} {target} {}", self.oracle.name(), blur(first))
    }

    /// One line: `ORACLE TARGET MESSAGE` with tabs between and the message escaped.
    pub fn to_line(&self) -> String {
        let target = self.target.map_or("-", |t| t.name());
        format!(
            "{}\t{target}\t{}",
            self.oracle.name(),
            escape(&self.message)
        )
    }

    pub fn from_line(line: &str) -> Option<Finding> {
        let mut parts = line.splitn(3, '\t');
        let oracle = Oracle::parse(parts.next()?)?;
        let target = match parts.next()? {
            "-" => None,
            t => Some(Target::parse(t)?),
        };
        Some(Finding::new(oracle, target, unescape(parts.next()?)))
    }
}

/// Digits → `N`; text between backticks → `…` unless it names a pass (its message says
/// `pass \`NAME\``), which is what tells two classes of internal error apart.
pub fn blur(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let (before, after) = rest.split_at(open);
        out.push_str(&digits(before));
        let Some(close) = after[1..].find('`') else {
            rest = after;
            break;
        };
        let quoted = &after[1..1 + close];
        if before.ends_with("pass ") {
            out.push('`');
            out.push_str(quoted);
            out.push('`');
        } else {
            out.push_str("`…`");
        }
        rest = &after[close + 2..];
    }
    out.push_str(&digits(rest));
    out
}

fn digits(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('N') {
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
        .replace('\r', "\\r")
}

fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

/// Writes `source` (the minimized mutant) to `DIR/NNN_<oracle>.tir` with a header of
/// comment lines: what was found, where, and how to draw the original mutant again.
/// Returns the path.
pub fn write(
    dir: &Path,
    number: usize,
    finding: &Finding,
    origin: &str,
    source: &str,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{number:03}_{}.tir", finding.oracle.name()));
    let mut text = String::new();
    let target = finding.target.map_or("every target", |t| t.name());
    let _ = writeln!(
        text,
        "# tlc mutation campaign finding {number:03}: oracle `{}`, {target}",
        finding.oracle.name()
    );
    let _ = writeln!(text, "# class: {}", finding.class());
    let _ = writeln!(text, "# from: {origin}");
    let _ = writeln!(text, "# message:");
    for line in finding.message.lines().take(40) {
        let _ = writeln!(text, "#   {line}");
    }
    text.push_str(source);
    if !source.ends_with('\n') {
        text.push('\n');
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_survive_their_line_form() {
        let f = Finding::new(Oracle::Differential, Some(Target::Sm90a), "a\tb\nc \\ d\r");
        assert_eq!(Finding::from_line(&f.to_line()), Some(f.clone()));
        assert!(!f.to_line().contains('\n'));
        let g = Finding::new(Oracle::Fmt, None, "x");
        assert_eq!(Finding::from_line(&g.to_line()), Some(g));
    }

    #[test]
    fn classes_blur_numbers_and_names_but_not_passes() {
        let a = Finding::new(
            Oracle::Internal,
            Some(Target::Sm80),
            "pass `simplify` produced invalid IR (1 verifier error): `A[12]`",
        );
        let b = Finding::new(
            Oracle::Internal,
            Some(Target::Sm80),
            "pass `simplify` produced invalid IR (3 verifier error): `B[7]`",
        );
        let c = Finding::new(
            Oracle::Internal,
            Some(Target::Sm80),
            "pass `unroll` produced invalid IR (1 verifier error): `A[12]`",
        );
        assert_eq!(a.class(), b.class());
        assert_ne!(a.class(), c.class());
        assert!(a.class().contains("`simplify`"), "{}", a.class());
    }
}
