//! The one error type of the compiler. Every stage returns `Diagnostic`s tied to spans; they
//! are rendered (`FILE:LINE:COL: error: …`, the source line, a caret) only at the edge, by
//! the `tlc` binary.

use crate::span::Span;
use std::fmt;

/// A secondary message, optionally pointing at its own place in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub message: String,
    pub span: Option<Span>,
}

/// A user-facing error with the span it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub message: String,
    pub span: Span,
    pub notes: Vec<Note>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            span,
            notes: Vec::new(),
        }
    }

    /// Adds a note without a location.
    pub fn with_note(mut self, message: impl Into<String>) -> Diagnostic {
        self.notes.push(Note {
            message: message.into(),
            span: None,
        });
        self
    }

    /// Adds a note that points at another place in the source.
    pub fn with_note_at(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.notes.push(Note {
            message: message.into(),
            span: Some(span),
        });
        self
    }
}

impl fmt::Display for Diagnostic {
    /// A plain, location-free rendering for logs and test failures. Users see the full
    /// rendering produced by the `tlc` binary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error: {} (bytes {}..{})",
            self.message, self.span.start, self.span.end
        )?;
        for note in &self.notes {
            write!(f, "\n  note: {}", note.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// Results that can fail with several diagnostics at once.
pub type Diagnostics = Vec<Diagnostic>;
