//! The random-number intrinsics, per thread: `T.philox_init` and the draws
//! (`T.philox_rand`, `T.philox_uniform`) on the thread's seven-word state, with the one
//! definition of the generator in `crate::intrinsic::rng` (curand's Philox4x32-10).

use crate::interp::compile::{CExpr, CRef};
use crate::interp::eval::{Frame, Res};
use crate::interp::scalar::Scalar;
use crate::intrinsic::rng::{uniform, PhiloxState, STATE_WORDS};
use crate::span::Span;

/// The state's length as a count of elements.
const WORDS: usize = STATE_WORDS as usize;

impl Frame<'_> {
    /// `T.philox_init(state, seed, seq, offset)`: the three values as C converts an integer
    /// to `unsigned long long` (two's complement: a negative one sign-extends).
    pub(crate) fn philox_init(
        &mut self,
        state: &CRef,
        (seed, seq, offset): (&CExpr, &CExpr, &CExpr),
        span: Span,
    ) -> Res<()> {
        const OP: &str = "`T.philox_init`";
        let v = |e: &CExpr| -> Res<u64> { Ok(self.eval(e)?.as_i64() as u64) };
        let s = PhiloxState::init(v(seed)?, v(seq)?, v(offset)?);
        let from = self.run_start(state, WORDS, span, OP)?;
        for (k, w) in s.words().into_iter().enumerate() {
            self.mem
                .write(state.buf, from + k, Scalar::Int(i64::from(w)));
        }
        Ok(())
    }

    /// One draw: the next uint32 of the stream (or its `curand_uniform` float32) into
    /// `dst`, the state one draw on. A state never initialized is the read error of its
    /// first word.
    pub(crate) fn philox_draw(
        &mut self,
        dst: &CRef,
        state: &CRef,
        as_uniform: bool,
        span: Span,
    ) -> Res<()> {
        let op = if as_uniform {
            "`T.philox_uniform`"
        } else {
            "`T.philox_rand`"
        };
        let from = self.run_start(state, WORDS, span, op)?;
        let mut words = [0u32; WORDS];
        for (k, w) in words.iter_mut().enumerate() {
            // The words hold uint32 values (the verifier's dtype rule).
            *w = self.read_elem(state.buf, from + k, span, op)?.as_i64() as u32;
        }
        let mut s = PhiloxState::from_words(words);
        let x = s.draw();
        for (k, w) in s.words().into_iter().enumerate() {
            self.mem
                .write(state.buf, from + k, Scalar::Int(i64::from(w)));
        }
        let value = if as_uniform {
            Scalar::Float(f64::from(uniform(x)))
        } else {
            Scalar::Int(i64::from(x))
        };
        let at = self.run_start(dst, 1, span, op)?;
        self.mem.write(dst.buf, at, value);
        Ok(())
    }
}
