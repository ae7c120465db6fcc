//! The intrinsic table's consumers, generated: `intrinsic_table!` takes one line per
//! intrinsic — its variant, its fields in parameter order, each with the kind of argument it
//! holds, and its static `IntrinsicDef` — and writes the `Intrinsic` enum, `IntrinsicOp`,
//! `all()`, `Intrinsic::def`, `Intrinsic::args`, `Intrinsic::parts_mut` and
//! `Intrinsic::from_args`. Nothing here has a catch-all arm, so an intrinsic is added by its
//! line and its definition, and every `match` on `Intrinsic` elsewhere (the interpreter's
//! compile step, code generation) fails to compile until it handles the new variant.
//!
//! Argument kinds: `Ref` (an element reference, `ElemRef`), `Int` (`i64`), `Bool`, `Ints`
//! (an integer tuple, `Vec<i64>`), `Pred` (an optional run-time predicate,
//! `Option<Expr>`), `Value` (a run-time value, `Expr`), `Text` (a string literal, `String`);
//! `parts_mut` returns the predicate and values beside the references.

/// The Rust type of a field of argument kind `$kind`.
macro_rules! intrinsic_field_type {
    (Ref) => { ElemRef };
    (Int) => { i64 };
    (Bool) => { bool };
    (Ints) => { Vec<i64> };
    (Pred) => { Option<Expr> };
    (Value) => { Expr };
    (Text) => { String };
}

/// The borrowed [`Arg`] of a field bound by reference.
macro_rules! intrinsic_arg {
    (Ref, $f:ident) => {
        Arg::Ref($f)
    };
    (Int, $f:ident) => {
        Arg::Int(*$f)
    };
    (Bool, $f:ident) => {
        Arg::Bool(*$f)
    };
    (Ints, $f:ident) => {
        Arg::Ints($f)
    };
    (Pred, $f:ident) => {
        Arg::Pred($f.as_ref())
    };
    (Value, $f:ident) => {
        Arg::Value($f)
    };
    (Text, $f:ident) => {
        Arg::Text($f.as_str())
    };
}

/// Collects a field bound by mutable reference into the references or the expressions.
macro_rules! intrinsic_part {
    (Ref, $f:ident, $refs:ident, $value:ident) => {
        $refs.push($f)
    };
    (Pred, $f:ident, $refs:ident, $value:ident) => {
        $value.extend($f.as_mut())
    };
    (Value, $f:ident, $refs:ident, $value:ident) => {
        $value.push($f)
    };
    ($other:ident, $f:ident, $refs:ident, $value:ident) => {
        let _ = $f;
    };
}

/// The field's value out of an owned [`ArgValue`], or `None` from the enclosing function
/// when the argument is of another kind.
macro_rules! intrinsic_take {
    ($kind:ident, $arg:expr) => {
        match $arg {
            ArgValue::$kind(v) => v,
            _ => return None,
        }
    };
}

/// The number of identifiers given.
macro_rules! intrinsic_count {
    () => { 0usize };
    ($head:ident $($tail:ident)*) => { 1usize + intrinsic_count!($($tail)*) };
}

/// The table; see the module documentation.
macro_rules! intrinsic_table {
    ($(
        $(#[$doc:meta])*
        $variant:ident $({ $($field:ident : $kind:ident),* $(,)? })? => $def:ident
    ),* $(,)?) => {
        /// A thread-level target intrinsic call. Exact semantics: docs/ir.md, `interp/`.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Intrinsic {
            $(
                $(#[$doc])*
                $variant $({ $($field: intrinsic_field_type!($kind)),* })?,
            )*
        }

        /// Which intrinsic a definition describes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum IntrinsicOp {
            $($variant,)*
        }

        /// Every intrinsic's definition, in table order.
        pub fn all() -> [&'static IntrinsicDef; intrinsic_count!($($variant)*)] {
            [$(&$def),*]
        }

        impl Intrinsic {
            /// Its definition.
            pub fn def(&self) -> &'static IntrinsicDef {
                match self {
                    $(Intrinsic::$variant { .. } => &$def,)*
                }
            }

            /// The arguments, one per parameter of the definition, in order.
            pub fn args(&self) -> Vec<Arg<'_>> {
                match self {
                    $(
                        Intrinsic::$variant $({ $($field),* })? => {
                            vec![$($(intrinsic_arg!($kind, $field)),*)?]
                        }
                    )*
                }
            }

            /// The element references and the predicate or run-time values, mutably, in
            /// parameter order: everything of the call that holds expressions.
            fn parts_mut(&mut self) -> (Vec<&mut ElemRef>, Vec<&mut Expr>) {
                let mut refs: Vec<&mut ElemRef> = Vec::new();
                let mut value: Vec<&mut Expr> = Vec::new();
                match self {
                    $(
                        Intrinsic::$variant $({ $($field),* })? => {
                            $($(intrinsic_part!($kind, $field, refs, value);)*)?
                        }
                    )*
                }
                (refs, value)
            }

            /// Builds the call of `def` from its arguments (one per parameter, in order, of
            /// the parameter's kind); `None` when they do not fit the definition.
            pub fn from_args(def: &IntrinsicDef, args: Vec<ArgValue>) -> Option<Intrinsic> {
                let mut args = args.into_iter();
                let call = match def.op {
                    $(
                        IntrinsicOp::$variant => {
                            $($(let $field = intrinsic_take!($kind, args.next()?);)*)?
                            Intrinsic::$variant $({ $($field),* })?
                        }
                    )*
                };
                args.next().is_none().then_some(call)
            }
        }
    };
}
