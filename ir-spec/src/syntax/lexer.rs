//! The token set of tlc's Python-subset syntax, recognised by a `logos` lexer.
//!
//! This layer only splits text into tokens; line structure (NEWLINE / INDENT / DEDENT) is
//! added by `indent.rs`. Every lexical problem becomes a spanned [`Diagnostic`].

use crate::diagnostic::Diagnostic;
use crate::span::Span;
use logos::Logos;
use std::fmt;

/// Why a piece of text is not a token.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LexErrorKind {
    /// A character no token starts with.
    #[default]
    Unknown,
    /// A decimal literal beyond what an `i64` (or its negation) can hold.
    IntTooLarge,
    /// A float literal beyond the range of `f64`.
    BadFloat,
}

/// A token. `Newline` is produced by the lexer at every `\n`; `Indent` / `Dedent` and the
/// logical-line `Newline`s the grammar sees are produced by `indent.rs`.
#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(error = LexErrorKind)]
// Spaces, tabs (their use in indentation is checked by `indent.rs`), `\r`, comments and
// backslash line continuations carry no tokens.
#[logos(skip r"[ \t\f\r]+")]
#[logos(skip(r"#[^\n]*", allow_greedy = true))]
#[logos(skip r"\\\r?\n")]
pub enum Tok {
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*", |lex| lex.slice().to_string(), priority = 1)]
    Name(String),
    /// A non-negative decimal integer up to 2^63 (so that `-9223372036854775808` can be
    /// written); larger values are lexical errors, and `2^63` itself is rejected later
    /// unless it is negated.
    #[regex(r"[0-9]+", lex_int)]
    #[regex(r"0[xX][0-9a-fA-F]+", lex_hex)]
    #[regex(r"0[bB][01]+", lex_bin)]
    Int(u64),
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?", lex_float)]
    #[regex(r"\.[0-9]+([eE][+-]?[0-9]+)?", lex_float)]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+", lex_float)]
    Float(f64),
    #[regex(r#""([^"\\\n]|\\[^\n])*""#, lex_string)]
    #[regex(r#"'([^'\\\n]|\\[^\n])*'"#, lex_string)]
    // Triple-quoted strings (docstrings) may span lines: any character but the quote and
    // the backslash, an escape, or one or two quotes not followed by a third.
    #[regex(
        r#""""([^"\\]|\\(.|\n)|"[^"\\]|"\\(.|\n)|""[^"\\]|""\\(.|\n))*""""#,
        lex_triple_string
    )]
    #[regex(
        r#"'''([^'\\]|\\(.|\n)|'[^'\\]|'\\(.|\n)|''[^'\\]|''\\(.|\n))*'''"#,
        lex_triple_string
    )]
    Str(String),

    #[token("def")]
    Def,
    #[token("for")]
    For,
    #[token("while")]
    While,
    #[token("in")]
    In,
    #[token("if")]
    If,
    #[token("elif")]
    Elif,
    #[token("else")]
    Else,
    #[token("with")]
    With,
    #[token("as")]
    As,
    #[token("and")]
    And,
    #[token("or")]
    Or,
    #[token("not")]
    Not,
    #[token("True")]
    True,
    #[token("False")]
    False,
    #[token("None")]
    None,
    #[token("pass")]
    Pass,
    #[token("return")]
    Return,
    #[token("import")]
    Import,
    #[token("from")]
    From,
    #[token("lambda")]
    Lambda,

    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("**")]
    StarStar,
    #[token("/")]
    Slash,
    #[token("//")]
    SlashSlash,
    #[token("%")]
    Percent,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token("+=")]
    PlusEq,
    #[token("-=")]
    MinusEq,
    #[token("*=")]
    StarEq,
    #[token("/=")]
    SlashEq,
    #[token("//=")]
    SlashSlashEq,
    #[token("%=")]
    PercentEq,
    #[token("&=")]
    AmpEq,
    #[token("|=")]
    PipeEq,
    #[token("^=")]
    CaretEq,
    #[token("<<=")]
    ShlEq,
    #[token(">>=")]
    ShrEq,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("==")]
    EqEq,
    #[token("!=")]
    Ne,
    #[token("=")]
    Assign,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(".")]
    Dot,
    #[token("@")]
    At,
    #[token("->")]
    Arrow,

    #[token("\n")]
    Newline,
    /// Produced by `indent.rs` only.
    Indent,
    /// Produced by `indent.rs` only.
    Dedent,
}

fn lex_int(lex: &mut logos::Lexer<Tok>) -> Result<u64, LexErrorKind> {
    match lex.slice().parse::<u64>() {
        Ok(v) if v <= 1u64 << 63 => Ok(v),
        _ => Err(LexErrorKind::IntTooLarge),
    }
}

/// `0x…` (Python's hex literal), up to 2^63 like a decimal one.
fn lex_hex(lex: &mut logos::Lexer<Tok>) -> Result<u64, LexErrorKind> {
    radix_int(lex.slice().get(2..).unwrap_or(""), 16)
}

/// `0b…` (Python's binary literal).
fn lex_bin(lex: &mut logos::Lexer<Tok>) -> Result<u64, LexErrorKind> {
    radix_int(lex.slice().get(2..).unwrap_or(""), 2)
}

fn radix_int(digits: &str, radix: u32) -> Result<u64, LexErrorKind> {
    match u64::from_str_radix(digits, radix) {
        Ok(v) if v <= 1u64 << 63 => Ok(v),
        _ => Err(LexErrorKind::IntTooLarge),
    }
}

fn lex_float(lex: &mut logos::Lexer<Tok>) -> Result<f64, LexErrorKind> {
    match lex.slice().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(LexErrorKind::BadFloat),
    }
}

/// Strips the quotes and resolves the common escapes (`\n`, `\t`, `\r`, `\\`, `\'`, `\"` and
/// `\xNN`, two hex digits); unknown escapes keep their backslash, as in Python.
fn lex_string(lex: &mut logos::Lexer<Tok>) -> String {
    let slice = lex.slice();
    unescape(slice.get(1..slice.len().saturating_sub(1)).unwrap_or(""))
}

/// A `"""…"""` or `'''…'''` string: its text between the triple quotes, escapes read as in
/// one-quote strings (a backslash before a newline keeps both, as an unknown escape does).
fn lex_triple_string(lex: &mut logos::Lexer<Tok>) -> String {
    let slice = lex.slice();
    unescape(slice.get(3..slice.len().saturating_sub(3)).unwrap_or(""))
}

/// The value of a string literal's text `inner` (between its quotes).
fn unescape(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('x') => {
                let hex: String = chars.clone().take(2).collect();
                match u8::from_str_radix(&hex, 16) {
                    Ok(byte) if hex.len() == 2 && hex.chars().all(|h| h.is_ascii_hexdigit()) => {
                        out.push(char::from(byte));
                        chars.nth(1);
                    }
                    _ => out.push_str("\\x"),
                }
            }
            Some('\\') => out.push('\\'),
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

impl fmt::Display for Tok {
    /// How a token is named in "expected …, found …" messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Tok::Name(n) => return write!(f, "identifier `{n}`"),
            Tok::Int(v) => return write!(f, "integer `{v}`"),
            Tok::Float(v) => return write!(f, "float `{v:?}`"),
            Tok::Str(_) => "string literal",
            Tok::Newline => "newline",
            Tok::Indent => "indentation",
            Tok::Dedent => "end of block",
            other => return write!(f, "`{}`", other.text().unwrap_or("?")),
        };
        f.write_str(text)
    }
}

impl Tok {
    /// The fixed spelling of a keyword or operator token.
    pub fn text(&self) -> Option<&'static str> {
        Some(match self {
            Tok::Def => "def",
            Tok::For => "for",
            Tok::While => "while",
            Tok::In => "in",
            Tok::If => "if",
            Tok::Elif => "elif",
            Tok::Else => "else",
            Tok::With => "with",
            Tok::As => "as",
            Tok::And => "and",
            Tok::Or => "or",
            Tok::Not => "not",
            Tok::True => "True",
            Tok::False => "False",
            Tok::None => "None",
            Tok::Pass => "pass",
            Tok::Return => "return",
            Tok::Import => "import",
            Tok::From => "from",
            Tok::Lambda => "lambda",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::StarStar => "**",
            Tok::Slash => "/",
            Tok::SlashSlash => "//",
            Tok::Percent => "%",
            Tok::Amp => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Tilde => "~",
            Tok::Shl => "<<",
            Tok::Shr => ">>",
            Tok::PlusEq => "+=",
            Tok::MinusEq => "-=",
            Tok::StarEq => "*=",
            Tok::SlashEq => "/=",
            Tok::SlashSlashEq => "//=",
            Tok::PercentEq => "%=",
            Tok::AmpEq => "&=",
            Tok::PipeEq => "|=",
            Tok::CaretEq => "^=",
            Tok::ShlEq => "<<=",
            Tok::ShrEq => ">>=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Assign => "=",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Dot => ".",
            Tok::At => "@",
            Tok::Arrow => "->",
            _ => return None,
        })
    }
}

/// One lexed token with its byte span.
pub type Spanned = (usize, Tok, usize);

/// Lexes all of `src`; lexical errors are returned alongside the tokens that did lex, so
/// that several can be reported at once.
pub fn lex(src: &str) -> (Vec<Spanned>, Vec<Diagnostic>) {
    let mut tokens = Vec::new();
    let mut errors = Vec::new();
    let mut lexer = Tok::lexer(src);
    while let Some(result) = lexer.next() {
        let range = lexer.span();
        let span = Span::new(range.start, range.end);
        match result {
            Ok(tok) => tokens.push((range.start, tok, range.end)),
            Err(kind) => errors.push(lex_error(src, span, kind)),
        }
    }
    (tokens, errors)
}

fn lex_error(src: &str, span: Span, kind: LexErrorKind) -> Diagnostic {
    let text = src.get(span.start..span.end).unwrap_or("");
    match kind {
        LexErrorKind::IntTooLarge => Diagnostic::error(span, "integer literal too large")
            .with_note("integers must fit in a signed 64-bit value"),
        LexErrorKind::BadFloat => Diagnostic::error(span, "float literal out of range")
            .with_note(format!("`{text}` does not fit in a 64-bit float")),
        LexErrorKind::Unknown => {
            let c = text.chars().next().unwrap_or('?');
            if c == '"' || c == '\'' {
                Diagnostic::error(span, "unterminated string literal")
            } else if c.is_control() || c == '\u{FFFD}' {
                Diagnostic::error(span, format!("unexpected character {c:?}"))
            } else {
                Diagnostic::error(span, format!("unexpected character `{c}`"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        let (t, e) = lex(src);
        assert!(e.is_empty(), "{e:?}");
        t.into_iter().map(|(_, t, _)| t).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(
            toks("1 1.5 1e-5 .5 1. 2E3"),
            vec![
                Tok::Int(1),
                Tok::Float(1.5),
                Tok::Float(1e-5),
                Tok::Float(0.5),
                Tok::Float(1.0),
                Tok::Float(2000.0)
            ]
        );
    }

    #[test]
    fn operators_and_keywords() {
        assert_eq!(
            toks("a // b -> c != d <= e"),
            vec![
                Tok::Name("a".into()),
                Tok::SlashSlash,
                Tok::Name("b".into()),
                Tok::Arrow,
                Tok::Name("c".into()),
                Tok::Ne,
                Tok::Name("d".into()),
                Tok::Le,
                Tok::Name("e".into())
            ]
        );
        assert_eq!(
            toks("defx def None"),
            vec![Tok::Name("defx".into()), Tok::Def, Tok::None]
        );
    }

    #[test]
    fn strings_and_comments() {
        assert_eq!(
            toks("'a\\'b' \"c\" # note\n"),
            vec![Tok::Str("a'b".into()), Tok::Str("c".into()), Tok::Newline]
        );
    }

    #[test]
    fn triple_quoted_strings_span_lines() {
        assert_eq!(
            toks("\"\"\"doc\n  \"quoted\" \"\"x\"\"\" '''a\n''b'''\n\"\"\n"),
            vec![
                Tok::Str("doc\n  \"quoted\" \"\"x".into()),
                Tok::Str("a\n''b".into()),
                Tok::Newline,
                Tok::Str(String::new()),
                Tok::Newline,
            ]
        );
    }

    #[test]
    fn string_escapes() {
        assert_eq!(
            toks(r#""a\tb\nc\rd\x00\x1B\x7f" "\xZ1 \x4" "\q\\""#),
            vec![
                Tok::Str("a\tb\nc\rd\u{0}\u{1b}\u{7f}".into()),
                // Not two hex digits: the backslash stays, as for unknown escapes.
                Tok::Str("\\xZ1 \\x4".into()),
                Tok::Str("\\q\\".into()),
            ]
        );
    }

    #[test]
    fn errors_are_spanned() {
        let (_, e) = lex("x = 123456789012345678901234567890");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].message, "integer literal too large");
        assert_eq!((e[0].span.start, e[0].span.end), (4, 34));
        let (_, e) = lex("x = 1e999");
        assert_eq!(e[0].message, "float literal out of range");
        let (_, e) = lex("a $ b");
        assert_eq!(e[0].message, "unexpected character `$`");
        assert_eq!(e[0].span.start, 2);
        let (_, e) = lex("s = \"abc\n");
        assert_eq!(e[0].message, "unterminated string literal");
    }
}
