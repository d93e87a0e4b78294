//! Dropout as PyTorch users know it: `nn.LSTM(dropout=p)` / `nn.GRU(dropout=p)` on the
//! outputs of every recurrent layer but the last, and `nn.Dropout(p)` as a head layer
//! (`{ kind = "dropout", p = 0.2 }`), both in training only, with inverted scaling by
//! `1 / (1 - p)`; evaluation and inference leave them out of the graph.
//!
//! Every dropout of a training graph reads one small input, [`KEY_INPUT`] `[2]`, that the
//! trainer writes before each step ([`step_key_input`]: the run's seed and the optimizer
//! step). Each dropout has its own site number ([`recurrent_site`], [`head_site`]), so the
//! masks of different layers differ; the mask itself is computed, not stored, from (key,
//! site, element index) by the op ([`tensorfit_core::dropout`]), and the backward pass
//! computes it again. So a step repeated after an out-of-memory fallback, a resume or
//! with recomputation drops exactly the same elements.
//!
//! The carried part of a truncated-BPTT step (the steps before the last `L`, which only
//! advance the state in inference form) runs without dropout: only the differentiated
//! segment is dropped, whereas PyTorch in train mode would drop in the carried part too.

use std::fmt;

use tensorfit_core::args::DropoutInputs;
use tensorfit_core::dropout::{key_input, step_key};
use tensorfit_core::{DropoutParams, Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{ParamSpec, StateSlot};

/// The name of the training graph's input holding the step's dropout key.
pub const KEY_INPUT: &str = "dropout.key";

/// Site numbers of head layers start here; recurrent layer `k`'s output is site `k`.
const HEAD_SITES: u32 = 1 << 16;
/// Site numbers of the body's other layers start here, [`SITES_PER_BODY_LAYER`] each.
const BODY_SITES: u32 = 1 << 20;
/// Sites each body layer may use (a Transformer encoder: four per encoder layer).
pub const SITES_PER_BODY_LAYER: u32 = 1 << 12;

/// A dropout probability in `[0, 1)`. Compared by its bits, so that descriptions holding
/// one stay `Eq`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropoutRate(f32);

impl DropoutRate {
    /// No dropout.
    pub const NONE: DropoutRate = DropoutRate(0.0);
    /// `nn.TransformerEncoderLayer`'s default, 0.1.
    pub const PYTORCH_TRANSFORMER: DropoutRate = DropoutRate(0.1);

    /// `p` if `0 <= p < 1`, else a message saying so.
    pub fn new(p: f32) -> std::result::Result<DropoutRate, String> {
        if (0.0..1.0).contains(&p) {
            Ok(DropoutRate(p))
        } else {
            Err(format!(
                "must be at least 0 and less than 1 (the probability of dropping an element), got {p}"
            ))
        }
    }

    /// `p` as a model file gives it (read as f64), if `0 <= p < 1` both as given and in
    /// the f32 dropout is computed in; else a message showing `p` as given (0.9999999999
    /// is below 1, and rounds to 1 in f32).
    pub fn from_f64(p: f64) -> std::result::Result<DropoutRate, String> {
        if !(0.0..1.0).contains(&p) {
            return Err(format!(
                "must be at least 0 and less than 1 (the probability of dropping an element), got {p}"
            ));
        }
        DropoutRate::new(p as f32).map_err(|_| {
            format!(
                "= {p} rounds to 1 in single precision (f32), in which dropout is computed: give at most {}",
                1.0 - f32::EPSILON / 2.0
            )
        })
    }

    pub fn p(self) -> f32 {
        self.0
    }

    /// Whether this drops anything.
    pub fn is_active(self) -> bool {
        self.0 > 0.0
    }
}

impl PartialEq for DropoutRate {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for DropoutRate {}

impl fmt::Display for DropoutRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The site of recurrent layer `k`'s output.
pub fn recurrent_site(k: usize) -> u32 {
    u32::try_from(k).unwrap_or(u32::MAX)
}

/// The site of head layer `i`.
pub fn head_site(i: usize) -> u32 {
    HEAD_SITES.saturating_add(u32::try_from(i).unwrap_or(u32::MAX))
}

/// Site `k` of the body's layer `index` (`k` < [`SITES_PER_BODY_LAYER`]).
pub fn body_site(index: usize, k: u32) -> u32 {
    let index = u32::try_from(index).unwrap_or(u32::MAX);
    BODY_SITES.saturating_add(index.saturating_mul(SITES_PER_BODY_LAYER).saturating_add(k))
}

/// The value of [`KEY_INPUT`] for optimizer step `step` of a run seeded `seed`.
pub fn step_key_input(seed: u64, step: u64) -> [f32; 2] {
    key_input(step_key(seed, step))
}

/// The training graph's [`KEY_INPUT`], added when `active` (some dropout of the model
/// drops), else `None`.
pub fn key_leaf(g: &mut Graph, active: bool) -> Option<TensorId> {
    active.then(|| g.input(KEY_INPUT, [2]))
}

/// `x` through dropout `p` at `site`, its elements numbered from `offset` in the site's
/// mask; `x` itself when `p` drops nothing or there is no key (inference).
pub fn dropout(
    g: &mut Graph,
    name: &str,
    x: TensorId,
    (p, key): (DropoutRate, Option<TensorId>),
    site: u32,
    offset: usize,
) -> Result<TensorId> {
    let Some(key) = key.filter(|_| p.is_active()) else {
        return Ok(x);
    };
    let params = DropoutParams {
        p: p.p(),
        site,
        // The mask's index wraps at 2³² (see tensorfit_core::dropout).
        offset: offset as u32,
    };
    Ok(
        g.apply(name, Op::Dropout(params), DropoutInputs { x, key })?
            .y,
    )
}

/// The dropout between recurrent layers of one graph: the rate and the key.
#[derive(Debug, Clone, Copy)]
pub struct Between {
    pub p: DropoutRate,
    pub key: Option<TensorId>,
}

impl Between {
    /// Nothing dropped (inference, or a stack without dropout).
    pub const NONE: Between = Between {
        p: DropoutRate::NONE,
        key: None,
    };

    /// The output `y` of layer `k` of `layers`, as the next layer reads it: dropped
    /// unless `k` is the last layer. `offset`: the index of `y`'s first element in the
    /// whole segment's output (a recomputed sub-segment's start).
    pub fn after(
        &self,
        g: &mut Graph,
        (k, layers): (usize, usize),
        y: TensorId,
        offset: usize,
    ) -> Result<TensorId> {
        if k + 1 >= layers {
            return Ok(y);
        }
        let name = format!("{}.dropout", g.tensor(y).name);
        dropout(g, &name, y, (self.p, self.key), recurrent_site(k), offset)
    }
}

/// `nn.Dropout(p)` as a layer of the head: head layer `index` (its mask's site),
/// registered as `name`; no tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropout {
    pub name: String,
    pub p: DropoutRate,
    pub index: usize,
}

impl Layer for Dropout {
    fn kind(&self) -> &'static str {
        "dropout"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        Vec::new()
    }

    fn output_features(&self, input: usize) -> usize {
        input
    }

    fn traits(&self) -> LayerTraits {
        LayerTraits {
            mixes_rows: false,
            mixes_steps: false,
            carries_state: false,
            splits_in_time: true,
            random: self.p.is_active(),
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    /// Drops in training only (a graph with a key); elements are numbered from the
    /// context's first step, so a recomputed part drops what the whole would.
    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let [] = exactly(self, tensors)?;
        let offset = cx.first_step * g.shape(x).dims()[1..].iter().product::<usize>();
        let name = format!("head.dropout{}", self.index);
        let key = (self.p, cx.dropout_key);
        dropout(g, &name, x, key, head_site(self.index), offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Shape;

    #[test]
    fn a_rate_is_at_least_0_and_below_1() {
        assert_eq!(DropoutRate::new(0.0), Ok(DropoutRate::NONE));
        assert!(DropoutRate::new(0.5).unwrap().is_active());
        for bad in [-0.1, 1.0, 1.5, f32::NAN, -f32::INFINITY] {
            let e = DropoutRate::new(bad).unwrap_err();
            assert!(e.contains("less than 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_rate_below_1_that_rounds_to_1_in_f32_is_refused_as_given() {
        let e = DropoutRate::from_f64(0.9999999999).unwrap_err();
        assert!(
            e.contains("= 0.9999999999 rounds to 1") && e.contains("at most 0.99999994"),
            "{e}"
        );
        let e = DropoutRate::from_f64(1.0000000001).unwrap_err();
        assert!(e.contains("got 1.0000000001"), "{e}");
        let largest = DropoutRate::from_f64(0.99999994).unwrap();
        assert_eq!(largest.p(), 1.0 - f32::EPSILON / 2.0);
        assert_eq!(DropoutRate::from_f64(0.25), DropoutRate::new(0.25));
    }

    #[test]
    fn the_last_layer_and_a_graph_without_key_are_not_dropped() {
        let mut g = Graph::new();
        let y = g.input("y", [3, 2, 4]);
        let key = key_leaf(&mut g, true);
        let p = DropoutRate::new(0.2).unwrap();
        let between = Between { p, key };
        let dropped = between.after(&mut g, (0, 2), y, 0).unwrap();
        assert_ne!(dropped, y);
        assert_eq!(g.shape(dropped), &Shape::from([3, 2, 4]));
        assert_eq!(between.after(&mut g, (1, 2), y, 0).unwrap(), y);
        assert_eq!(Between::NONE.after(&mut g, (0, 2), y, 0).unwrap(), y);
        assert_eq!(key_leaf(&mut g, false), None);
        assert_ne!(head_site(0), recurrent_site(0));
    }
}
