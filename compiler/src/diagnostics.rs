//! Rendering of `Diagnostic`s for people: `FILE:LINE:COL: error: message`, then the source
//! line with a caret under the span and the notes, drawn by codespan-reporting.
//!
//! codespan-reporting's rich style opens with its own `error: …` line and a `┌─ file:l:c`
//! locus line; tlc's contract (like gcc and clang) puts the location first so that editors
//! and terminals can jump to it. We write that header line ourselves and keep codespan's
//! snippet (source lines, carets, secondary labels, notes) unchanged below it.

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::{Files, SimpleFile};
use codespan_reporting::term::{self, Chars, Config};
use tlc_ir::{Diagnostic, Span};

/// A source file as the user named it.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            name: name.into(),
            text: text.into(),
        }
    }

    /// 1-based line and column (in characters) of byte offset `offset`.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = clamp_to_char_boundary(&self.text, offset);
        let file = SimpleFile::new(self.name.as_str(), self.text.as_str());
        match file.location((), offset) {
            Ok(loc) => (loc.line_number, loc.column_number),
            Err(_) => (1, 1),
        }
    }

    /// The full text shown to the user for one diagnostic.
    pub fn render(&self, diag: &Diagnostic) -> String {
        let span = self.clamp(diag.span);
        let (line, col) = self.line_col(span.start);
        let mut out = format!("{}:{line}:{col}: error: {}\n", self.name, diag.message);
        out.push_str(&self.snippet(diag, span));
        out
    }

    /// Renders every diagnostic, in source order. One located in a macro's body gets notes
    /// at the macro's calls (lowering's own errors there already have them).
    pub fn render_all(&self, diags: &[Diagnostic]) -> String {
        let mut sorted: Vec<&Diagnostic> = diags.iter().collect();
        sorted.sort_by_key(|d| (d.span.start, d.span.end));
        let sites = if self.text.contains("T.macro") {
            tlc_ir::syntax::lower_macro::macro_sites(&self.text)
        } else {
            Vec::new()
        };
        sorted
            .into_iter()
            .map(|d| match with_macro_calls(d, &sites) {
                Some(noted) => self.render(&noted),
                None => self.render(d),
            })
            .collect()
    }

    fn snippet(&self, diag: &Diagnostic, span: Span) -> String {
        let file = SimpleFile::new(self.name.as_str(), self.text.as_str());
        let mut labels = vec![Label::primary((), span.start..span.end)];
        let mut plain_notes = Vec::new();
        for note in &diag.notes {
            match note.span {
                Some(s) => {
                    let s = self.clamp(s);
                    labels.push(Label::secondary((), s.start..s.end).with_message(&note.message));
                }
                None => plain_notes.push(format!("note: {}", note.message)),
            }
        }
        let cs = CsDiagnostic::error()
            .with_message(&diag.message)
            .with_labels(labels)
            .with_notes(plain_notes);
        let config = Config {
            chars: Chars::ascii(),
            ..Config::default()
        };
        let rich = match term::emit_into_string(&config, &file, &cs) {
            Ok(text) => text,
            Err(_) => return String::new(),
        };
        // Drop codespan's own header and locus lines: ours replaced them.
        rich.lines()
            .skip(2)
            .map(|l| format!("{}\n", l.trim_end()))
            .collect()
    }

    /// A span moved inside the text and onto character boundaries, so that no span (even one
    /// a buggy stage produced) can make rendering fail. Carets mark only the first line of a
    /// span: a statement's span covers its whole body, and underlining a block with ASCII art
    /// hides the point being made.
    fn clamp(&self, span: Span) -> Span {
        let start = clamp_to_char_boundary(&self.text, span.start);
        let mut end = clamp_to_char_boundary(&self.text, span.end.max(start));
        if let Some(newline) = self.text[start..end].find('\n') {
            // A span that starts on the newline itself ("found newline") becomes an empty
            // span at the end of the line, which codespan draws as one caret.
            end = start + newline;
        }
        Span::new(start, end)
    }
}

fn clamp_to_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// `d` with a note at each call of the macro whose body holds its span, unless it already
/// points at one (the lowering's "in this expansion" notes); `None` when it needs none.
fn with_macro_calls(
    d: &Diagnostic,
    sites: &[tlc_ir::syntax::lower_macro::MacroSite],
) -> Option<Diagnostic> {
    // Spans compare equal whatever their positions (IR equality ignores them): offsets.
    let inside = |s: Span, outer: Span| outer.start <= s.start && s.end <= outer.end;
    let same = |a: Span, b: Span| (a.start, a.end) == (b.start, b.end);
    let site = sites.iter().find(|m| inside(d.span, m.def))?;
    let noted = d.notes.iter().any(|n| {
        n.span
            .is_some_and(|s| site.calls.iter().any(|&c| same(s, c)))
    });
    if noted || site.calls.is_empty() {
        return None;
    }
    const SHOWN: usize = 3;
    let mut out = d.clone();
    for &c in site.calls.iter().take(SHOWN) {
        out = out.with_note_at(c, format!("the macro `{}` is called here", site.name));
    }
    if site.calls.len() > SHOWN {
        out = out.with_note(format!(
            "and {} more calls of `{}`",
            site.calls.len() - SHOWN,
            site.name
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_then_caret() {
        let file = SourceFile::new("k.tir", "def f():\n    x = y + 1\n");
        let diag = Diagnostic::error(Span::new(17, 18), "undefined name `y`");
        let text = file.render(&diag);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("k.tir:2:9: error: undefined name `y`"));
        let rest: Vec<&str> = lines.collect();
        assert!(rest.iter().any(|l| l.ends_with("x = y + 1")), "{text}");
        let caret = rest
            .iter()
            .find(|l| l.trim_end().ends_with('^'))
            .expect(&text);
        let source = rest.iter().find(|l| l.ends_with("x = y + 1")).expect(&text);
        assert_eq!(caret.find('^'), source.find('y'), "{text}");
    }

    #[test]
    fn notes_and_odd_spans_render() {
        let file = SourceFile::new("k.tir", "a = 1\né = a\n");
        let diag = Diagnostic::error(Span::new(8, 999), "bad")
            .with_note_at(Span::new(0, 1), "first defined here")
            .with_note("names are unique in a kernel");
        let text = file.render(&diag);
        assert!(text.starts_with("k.tir:2:2: error: bad\n"), "{text}");
        assert!(text.contains("first defined here"), "{text}");
        assert!(
            text.contains("note: names are unique in a kernel"),
            "{text}"
        );
        let block = SourceFile::new("b.tir", "for i in x:\n    y = 1\n");
        let text = block.render(&Diagnostic::error(Span::new(0, 20), "whole block"));
        assert!(
            !text.contains("2 |"),
            "a multi-line span must mark its first line only:\n{text}"
        );
        assert!(text.contains("^^^^^^^^^^^"), "{text}");
        let empty = SourceFile::new("e.tir", "");
        assert!(empty
            .render(&Diagnostic::error(Span::new(0, 0), "empty"))
            .starts_with("e.tir:1:1: error: empty"));
    }
}
