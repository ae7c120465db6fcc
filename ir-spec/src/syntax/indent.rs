//! Python-style line structure: turns the raw token stream into logical lines with
//! NEWLINE / INDENT / DEDENT tokens for the grammar.
//!
//! Inside brackets, newlines and indentation mean nothing. Blank and comment-only lines are
//! skipped (the lexer drops comments, so they look blank). Bracket nesting and indentation
//! depth are bounded here, which bounds every later recursion over the syntax tree.

use crate::diagnostic::Diagnostic;
use crate::span::Span;
use crate::syntax::lexer::{lex, Spanned, Tok};

/// Deepest bracket nesting accepted (`((((…` beyond this is an error, not a stack overflow).
pub const MAX_BRACKET_DEPTH: usize = 256;
/// Most indentation levels accepted (Python's own limit is 100).
pub const MAX_INDENT_LEVELS: usize = 100;
/// Lexical errors reported before giving up on a file.
const MAX_ERRORS: usize = 20;

/// Lexes `src` into the token stream the grammar reads, or the lexical and indentation
/// errors found.
pub fn tokenize(src: &str) -> Result<Vec<Spanned>, Vec<Diagnostic>> {
    let (raw, mut errors) = lex(src);
    if errors.len() > MAX_ERRORS {
        errors.truncate(MAX_ERRORS);
    }
    let mut out = Vec::with_capacity(raw.len() + 16);
    let mut levels: Vec<usize> = vec![0];
    let mut brackets: Vec<Span> = Vec::new();
    // True when the next token starts a logical line (so its column is its indentation).
    let mut at_line_start = true;
    for (start, tok, end) in raw {
        if tok == Tok::Newline {
            if brackets.is_empty() && !at_line_start {
                out.push((start, Tok::Newline, end));
                at_line_start = true;
            }
            continue;
        }
        if at_line_start {
            at_line_start = false;
            if let Err(e) = indent_line(src, start, &mut levels, &mut out) {
                errors.push(e);
                if errors.len() >= MAX_ERRORS || levels.len() > MAX_INDENT_LEVELS {
                    return Err(errors);
                }
            }
        }
        match tok {
            Tok::LParen | Tok::LBracket | Tok::LBrace => {
                brackets.push(Span::new(start, end));
                if brackets.len() > MAX_BRACKET_DEPTH {
                    errors.push(
                        Diagnostic::error(Span::new(start, end), "nesting too deep").with_note(
                            format!("at most {MAX_BRACKET_DEPTH} nested brackets are allowed"),
                        ),
                    );
                    return Err(errors);
                }
            }
            // A stray closer is left for the grammar to report.
            Tok::RParen | Tok::RBracket | Tok::RBrace => {
                brackets.pop();
            }
            _ => {}
        }
        out.push((start, tok, end));
    }
    if let Some(open) = brackets.last() {
        let c = src.get(open.start..open.end).unwrap_or("(");
        errors.push(Diagnostic::error(*open, format!("`{c}` was never closed")));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let eof = src.len();
    if !at_line_start {
        out.push((eof, Tok::Newline, eof));
    }
    for _ in 1..levels.len() {
        out.push((eof, Tok::Dedent, eof));
    }
    Ok(out)
}

/// Emits the INDENT / DEDENTs for a logical line whose first token starts at `start`.
fn indent_line(
    src: &str,
    start: usize,
    levels: &mut Vec<usize>,
    out: &mut Vec<Spanned>,
) -> Result<(), Diagnostic> {
    let line_start = src
        .get(..start)
        .and_then(|s| s.rfind('\n'))
        .map_or(0, |i| i + 1);
    let prefix = src.get(line_start..start).unwrap_or("");
    if let Some(pos) = prefix.find(['\t', '\u{c}']) {
        let at = line_start + pos;
        let what = if prefix.get(pos..pos + 1) == Some("\t") {
            "tab character in indentation"
        } else {
            "form feed in indentation"
        };
        return Err(
            Diagnostic::error(Span::new(at, at + 1), what).with_note("indent with spaces only")
        );
    }
    // The prefix holds only spaces and `\r` here (the lexer skips nothing else before a
    // token on a line), so its length is the column.
    let col = prefix.len();
    let top = levels.last().copied().unwrap_or(0);
    if col > top {
        levels.push(col);
        if levels.len() > MAX_INDENT_LEVELS {
            return Err(
                Diagnostic::error(Span::new(line_start, start), "nesting too deep").with_note(
                    format!("at most {MAX_INDENT_LEVELS} indentation levels are allowed"),
                ),
            );
        }
        out.push((start, Tok::Indent, start));
    } else if col < top {
        while levels.last().is_some_and(|&l| l > col) {
            levels.pop();
            out.push((start, Tok::Dedent, start));
        }
        if levels.last().copied().unwrap_or(0) != col {
            // Python's wording; record the level so the rest of the file lines up.
            levels.push(col);
            return Err(Diagnostic::error(
                Span::new(line_start, start.max(line_start + 1)),
                "unindent does not match any outer indentation level",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<String> {
        tokenize(src)
            .unwrap()
            .into_iter()
            .map(|(_, t, _)| match t {
                Tok::Newline => "NL".to_string(),
                Tok::Indent => "IN".to_string(),
                Tok::Dedent => "DE".to_string(),
                Tok::Name(n) => n,
                other => other.text().unwrap_or("?").to_string(),
            })
            .collect()
    }

    #[test]
    fn blocks() {
        let src = "a:\n    b\n\n    # c\n    d(\n  e)\nf\n";
        assert_eq!(
            kinds(src),
            ["a", ":", "NL", "IN", "b", "NL", "d", "(", "e", ")", "NL", "DE", "f", "NL"]
        );
    }

    #[test]
    fn eof_closes_blocks() {
        assert_eq!(
            kinds("a:\n  b:\n    c"),
            ["a", ":", "NL", "IN", "b", ":", "NL", "IN", "c", "NL", "DE", "DE"]
        );
        assert!(kinds("").is_empty());
        assert!(kinds("\n\n  # only a comment\n").is_empty());
    }

    #[test]
    fn indentation_errors() {
        let e = tokenize("a:\n\tb\n").unwrap_err();
        assert_eq!(e[0].message, "tab character in indentation");
        assert_eq!(e[0].span.start, 3);
        let e = tokenize("a:\n    b\n  c\n").unwrap_err();
        assert_eq!(
            e[0].message,
            "unindent does not match any outer indentation level"
        );
        assert_eq!(e[0].span.start, 9);
    }

    #[test]
    fn unclosed_bracket() {
        let e = tokenize("x = f(a,\n  [b]\n").unwrap_err();
        assert_eq!(e[0].message, "`(` was never closed");
        assert_eq!((e[0].span.start, e[0].span.end), (5, 6));
    }

    #[test]
    fn deep_brackets_are_an_error() {
        let src = format!("x = {}1{}", "(".repeat(20_000), ")".repeat(20_000));
        let e = tokenize(&src).unwrap_err();
        assert_eq!(e[0].message, "nesting too deep");
        assert_eq!(e[0].span.start, 4 + MAX_BRACKET_DEPTH);
    }
}
