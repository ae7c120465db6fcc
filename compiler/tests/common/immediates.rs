//! No PTX instruction carries an immediate that does not fit its type. ptxas accepts
//! `setp.lt.s32 %p1, %r4, 3000000000` (it truncates), so the assembler cannot be the check:
//! this reads the PTX text — independently of the AST that printed it — and reports every
//! integer immediate outside its instruction's type, and every address offset `[%rd+imm]`
//! outside the signed 32 bits an address offset holds.
//!
//! The type an immediate is read in is the opcode's last type suffix (`cvt.s64.s32`: the
//! source's; `mul.wide.s32`: the operands'), except shift counts (`shl`, `shr`: u32).
//! `.sN` takes signed N-bit values, `.uN` unsigned, `.bN` either. Float and predicate types
//! are skipped (their literals are bit patterns, `0f3F800000`).

/// One immediate that does not fit, with its line (1-based) and the line's text.
pub fn overflowing_immediates(ptx: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for (n, raw) in ptx.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('.') || line.ends_with(':') || !line.ends_with(';') {
            continue;
        }
        // Strip a guard predicate (`@%p1`, `@!%p1`).
        let line = match line.strip_prefix('@') {
            Some(rest) => rest.split_once(char::is_whitespace).map_or("", |(_, r)| r),
            None => line,
        }
        .trim()
        .trim_end_matches(';');
        let (opcode, operands) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let mut complain = |what: String| {
            bad.push(format!("line {}: {what}: `{}`", n + 1, raw.trim()));
        };
        for offset in address_offsets(operands) {
            if i32::try_from(offset).is_err() {
                complain(format!("address offset {offset} does not fit s32"));
            }
        }
        let Some(ty) = value_type(opcode) else {
            continue;
        };
        for word in top_level_operands(operands) {
            let Some(v) = int_literal(word) else {
                continue;
            };
            if !fits(ty, v) {
                complain(format!("immediate {word} does not fit .{ty}"));
            }
        }
    }
    bad
}

/// The integer type the opcode's immediates are read in, if it has one.
fn value_type(opcode: &str) -> Option<&str> {
    let mut parts = opcode.split('.');
    let op = parts.next()?;
    if op == "shl" || op == "shr" {
        return Some("u32");
    }
    opcode.split('.').rev().find(|s| width(s).is_some())
}

/// `(signedness, bits)` of an integer type name: `'s'`, `'u'` or `'b'`.
fn width(ty: &str) -> Option<(char, u32)> {
    let kind = ty.chars().next()?;
    if !matches!(kind, 's' | 'u' | 'b') {
        return None;
    }
    let bits: u32 = ty[1..].parse().ok()?;
    matches!(bits, 8 | 16 | 32 | 64).then_some((kind, bits))
}

fn fits(ty: &str, v: i128) -> bool {
    let Some((kind, bits)) = width(ty) else {
        return true;
    };
    let (smin, smax, umax) = (
        -(1i128 << (bits - 1)),
        (1i128 << (bits - 1)) - 1,
        (1i128 << bits) - 1,
    );
    match kind {
        's' => (smin..=smax).contains(&v),
        'u' => (0..=umax).contains(&v),
        _ => (smin..=umax).contains(&v),
    }
}

/// The operands outside brackets and braces (addresses and vectors are not immediates).
fn top_level_operands(operands: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in operands.char_indices() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(operands[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(operands[start..].trim());
    out.retain(|w| !w.is_empty() && !w.starts_with('[') && !w.starts_with('{'));
    out
}

/// The `imm` of every `[base+imm]` / `[base-imm]` / `[imm]` address.
fn address_offsets(operands: &str) -> Vec<i128> {
    let mut out = Vec::new();
    let mut rest = operands;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        let inside = &rest[open + 1..open + close];
        let offset = match inside.rfind(['+', '-']) {
            Some(at) if at > 0 => int_literal(&inside[at..].replace('+', "")),
            _ => int_literal(inside),
        };
        out.extend(offset);
        rest = &rest[open + close + 1..];
    }
    out
}

/// An integer literal as PTX writes it (decimal, `0x` hex, optional sign and `U`), not a
/// float bit pattern (`0f…`, `0d…`) and not a register or label.
fn int_literal(word: &str) -> Option<i128> {
    let w = word.trim();
    let (neg, w) = match w.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, w),
    };
    let w = w.strip_suffix('U').unwrap_or(w);
    let v = if let Some(hex) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        i128::from_str_radix(hex, 16).ok()?
    } else if w.chars().all(|c| c.is_ascii_digit()) && !w.is_empty() {
        w.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -v } else { v })
}
