//! Shrinking a finding's source while the finding persists: chunks of lines, then chunks
//! of pieces ([`super::pieces`]), halving the chunk size down to one (ddmin without the
//! complements), again while a round still deletes something.

use std::time::Instant;

/// The smallest text found from `text` for which `keeps` holds (`keeps(text)` is assumed),
/// trying at most `attempts` candidates and stopping at `deadline`.
pub fn minimize(
    text: &str,
    keeps: &mut dyn FnMut(&str) -> bool,
    attempts: usize,
    deadline: Instant,
) -> String {
    let mut tries = 0usize;
    let mut best = text.to_string();
    loop {
        let before = best.len();
        let lines: Vec<String> = best.split_inclusive('\n').map(str::to_string).collect();
        best = shrink(lines, keeps, &mut tries, attempts, deadline);
        let pieces = super::pieces(&best);
        best = shrink(pieces, keeps, &mut tries, attempts, deadline);
        if best.len() == before || tries >= attempts || Instant::now() >= deadline {
            return best;
        }
    }
}

/// Deletes chunks of `parts` while `keeps` holds of what is left.
fn shrink(
    mut parts: Vec<String>,
    keeps: &mut dyn FnMut(&str) -> bool,
    tries: &mut usize,
    attempts: usize,
    deadline: Instant,
) -> String {
    let mut size = (parts.len() / 2).max(1);
    loop {
        let mut i = 0;
        while i < parts.len() {
            if *tries >= attempts || Instant::now() >= deadline {
                return parts.concat();
            }
            let end = (i + size).min(parts.len());
            // Deleting only whitespace rarely helps and costs a try.
            if parts[i..end].iter().all(|p| p.trim().is_empty()) && size == 1 {
                i += 1;
                continue;
            }
            let candidate: String = parts[..i].concat() + &parts[end..].concat();
            *tries += 1;
            if keeps(&candidate) {
                parts.drain(i..end);
            } else {
                i += size;
            }
        }
        if size == 1 {
            return parts.concat();
        }
        size /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_what_the_finding_needs_is_kept() {
        let text = "a = 1\nb = 2\nboom = x + y\nc = 3\nd = boom * 2\n";
        let deadline = Instant::now() + Duration::from_secs(10);
        let min = minimize(
            text,
            &mut |t| t.contains("boom") && t.contains('y'),
            1000,
            deadline,
        );
        assert!(min.contains("boom") && min.contains('y'), "{min:?}");
        assert!(min.len() <= "boom y\n".len(), "{min:?}");
        // A budget of tries is respected.
        let mut calls = 0;
        minimize(
            text,
            &mut |_| {
                calls += 1;
                false
            },
            3,
            deadline,
        );
        assert_eq!(calls, 3);
    }
}
