//! The e-graph language of integer index expressions, its analysis (constant folding and
//! intervals) and the extraction cost.

use egg::{define_language, merge_option, Analysis, CostFunction, DidMerge, Id, Language, Symbol};
use std::collections::HashMap;
use tlc_ir::interval::Interval;
use tlc_ir::BinOp;

define_language! {
    /// Integer expressions with the IR's semantics: `//` and `%` floor, `ceildiv` rounds up.
    pub enum Index {
        "+" = Add([Id; 2]),
        "-" = Sub([Id; 2]),
        "*" = Mul([Id; 2]),
        "//" = Div([Id; 2]),
        "%" = Mod([Id; 2]),
        "ceildiv" = CeilDiv([Id; 2]),
        "min" = Min([Id; 2]),
        "max" = Max([Id; 2]),
        "neg" = Neg(Id),
        Num(i64),
        // A variable, or `$k` for an opaque subexpression (a load, a cast, …).
        Symbol(Symbol),
    }
}

pub type EGraph = egg::EGraph<Index, Bounds>;
pub type Rewrite = egg::Rewrite<Index, Bounds>;

/// What is known about an e-class: its interval (a constant when it is one point).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    pub range: Interval,
}

impl Facts {
    pub fn constant(&self) -> Option<i64> {
        self.range.constant()
    }
}

/// The analysis: intervals of the free symbols are given up front (loop ranges, grids,
/// dims ≥ 1); every e-node's interval follows from its children's, and an e-class whose
/// interval is one point is a constant (folded into a `Num` and pruned).
#[derive(Debug, Default)]
pub struct Bounds {
    pub symbols: HashMap<Symbol, Interval>,
}

impl Analysis<Index> for Bounds {
    type Data = Option<Facts>;

    fn make(egraph: &mut EGraph, enode: &Index, _id: Id) -> Self::Data {
        let r = |i: &Id| egraph[*i].data.map_or(Interval::FULL, |f: Facts| f.range);
        let binary = |op: BinOp, a: &Id, b: &Id| Interval::binary(op, r(a), r(b));
        let range = match enode {
            Index::Num(v) => Interval::point(*v),
            Index::Symbol(s) => egraph
                .analysis
                .symbols
                .get(s)
                .copied()
                .unwrap_or(Interval::FULL),
            Index::Add([a, b]) => binary(BinOp::Add, a, b),
            Index::Sub([a, b]) => binary(BinOp::Sub, a, b),
            Index::Mul([a, b]) => binary(BinOp::Mul, a, b),
            Index::Div([a, b]) => binary(BinOp::FloorDiv, a, b),
            Index::Mod([a, b]) => binary(BinOp::FloorMod, a, b),
            Index::CeilDiv([a, b]) => binary(BinOp::CeilDiv, a, b),
            Index::Min([a, b]) => binary(BinOp::Min, a, b),
            Index::Max([a, b]) => binary(BinOp::Max, a, b),
            Index::Neg(a) => Interval::negate(r(a)),
        };
        Some(Facts { range })
    }

    fn merge(&mut self, to: &mut Self::Data, from: Self::Data) -> DidMerge {
        merge_option(to, from, |a, b| {
            // Two sound descriptions of one value: both hold. (They cannot contradict for
            // reachable code; if they do, keep what we had.)
            match a.range.intersect(b.range) {
                Some(both) => {
                    let changed_a = both != a.range;
                    let changed_b = both != b.range;
                    a.range = both;
                    DidMerge(changed_a, changed_b)
                }
                None => DidMerge(false, true),
            }
        })
    }

    fn modify(egraph: &mut EGraph, id: Id) {
        if let Some(c) = egraph[id].data.and_then(|f| f.constant()) {
            let num = egraph.add(Index::Num(c));
            egraph.union(id, num);
            // A constant needs no other representation.
            egraph[id].nodes.retain(|n| n.is_leaf());
        }
    }
}

/// Fewer operations win; on a tie, fewer divisions (`//`, `%`, `ceildiv`).
pub struct OpCost;

impl CostFunction<Index> for OpCost {
    type Cost = usize;

    fn cost<C>(&mut self, enode: &Index, mut costs: C) -> usize
    where
        C: FnMut(Id) -> usize,
    {
        let own = match enode {
            Index::Num(_) | Index::Symbol(_) => 0,
            Index::Div(_) | Index::Mod(_) | Index::CeilDiv(_) => 11,
            _ => 10,
        };
        enode.fold(own, |sum, id| sum.saturating_add(costs(id)))
    }
}
