//! The front end's syntax layer: text → tokens (`lexer`) → logical lines (`indent`) →
//! surface AST (`grammar`, `ast`) → IR (`lower`).

pub mod ast;
pub mod contract;
pub mod dim_alias;
pub mod generated_names;
pub mod indent;
pub mod lexer;
pub mod literals;
pub mod lower;
pub mod lower_allreduce;
pub mod lower_break;
pub mod lower_cumsum;
pub mod lower_expr;
pub mod lower_global_layout;
pub mod lower_im2col;
pub mod lower_intrinsic;
pub mod lower_kernel;
pub mod lower_loop;
pub mod lower_macro;
pub mod lower_print;
pub mod lower_region;
pub mod lower_reshape;
pub mod lower_rng;
pub mod lower_tunable;
pub mod lower_value_call;
pub mod lower_var;
pub mod lower_view;
pub mod lower_ws;
pub mod support;
pub mod thread_regions;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused)]
    grammar,
    "/syntax/grammar.rs"
);

use crate::diagnostic::Diagnostic;
use crate::span::Span;
use lalrpop_util::ParseError;
use lexer::Tok;

/// Parses `src` into the surface AST (a module's top-level statements).
pub fn parse_module(src: &str) -> Result<Vec<ast::Stmt>, Vec<Diagnostic>> {
    let tokens = indent::tokenize(src)?;
    grammar::ModuleParser::new()
        .parse(tokens.into_iter().map(Ok::<_, Diagnostic>))
        .map_err(|e| vec![parse_error(src, e)])
}

/// Turns a parser error into a readable diagnostic.
fn parse_error(src: &str, err: ParseError<usize, Tok, Diagnostic>) -> Diagnostic {
    match err {
        ParseError::User { error } => error,
        ParseError::InvalidToken { location } => {
            Diagnostic::error(Span::new(location, location + 1), "invalid token")
        }
        ParseError::UnrecognizedEof { expected, .. } => {
            let eof = Span::new(src.len(), src.len());
            Diagnostic::error(eof, expectation(&expected, "end of file"))
        }
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => Diagnostic::error(
            token_span(src, l, r),
            expectation(&expected, &tok.to_string()),
        ),
        ParseError::ExtraToken { token: (l, tok, r) } => {
            Diagnostic::error(token_span(src, l, r), format!("unexpected {tok}"))
        }
    }
}

/// Zero-width tokens (INDENT/DEDENT, the NEWLINE at end of file) get a one-character span
/// when there is a character to point at.
fn token_span(src: &str, l: usize, r: usize) -> Span {
    if l == r && l < src.len() {
        let width = src
            .get(l..)
            .and_then(|s| s.chars().next())
            .map_or(1, char::len_utf8);
        Span::new(l, l + width)
    } else {
        Span::new(l, r)
    }
}

/// "expected `:`, found newline" when the parser wanted few things, else "unexpected X".
fn expectation(expected: &[String], found: &str) -> String {
    let names: Vec<String> = expected.iter().map(|e| terminal_name(e)).collect();
    match names.as_slice() {
        [] => format!("unexpected {found}"),
        [one] => format!("expected {one}, found {found}"),
        [a, b] => format!("expected {a} or {b}, found {found}"),
        [a, b, c] => format!("expected {a}, {b} or {c}, found {found}"),
        _ => format!("unexpected {found}"),
    }
}

/// How a grammar terminal (as lalrpop quotes it, e.g. `"\":\""`) is named for users.
fn terminal_name(quoted: &str) -> String {
    let bare = quoted.trim_matches('"').replace("\\\"", "\"");
    let bare = bare.trim_matches('"');
    match bare {
        "NEWLINE" => "newline".to_string(),
        "INDENT" => "an indented block".to_string(),
        "DEDENT" => "end of block".to_string(),
        "name" => "an identifier".to_string(),
        "int" => "an integer".to_string(),
        "float" => "a float".to_string(),
        "string" => "a string".to_string(),
        other => format!("`{other}`"),
    }
}
