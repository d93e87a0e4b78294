//! Global pooling over time as a layer (Keras's `GlobalAveragePooling1D` and
//! `GlobalMaxPooling1D`, DL4J's `GlobalPoolingLayer`; a description's `head.on = "mean"`
//! or `"max"`): `[T, B, F]` in, `[B, F]` out, each sequence reduced over its own steps
//! (with lengths, the steps past its end never count).
//!
//! Unlike the last step, a mean or maximum needs every step of the sequence at once: the
//! layer reads each sequence whole, so the strategies that cut a sequence in time are
//! refused for it, naming it ([`LayerTraits::splits_in_time`]).

use tensorfit_core::args::{MaxTimeInputs, MeanTimeInputs};
use tensorfit_core::{Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{ParamSpec, StateSlot};

/// The mean (`max: false`) or the maximum (`max: true`) of each feature over each
/// sequence's steps; 0 for a sequence of no steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimePool {
    pub max: bool,
}

impl TimePool {
    pub const MEAN: TimePool = TimePool { max: false };
    pub const MAX: TimePool = TimePool { max: true };
}

impl Layer for TimePool {
    fn kind(&self) -> &'static str {
        match self.max {
            true => "max_pool",
            false => "mean_pool",
        }
    }

    fn name(&self) -> &str {
        self.kind()
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
            mixes_steps: true,
            carries_state: false,
            // A mean or maximum of a chunk is not the sequence's.
            splits_in_time: false,
            random: false,
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    /// One op over the sequence, at the batch's lengths if it has them (the maximum also
    /// gives the step each value came from, which its gradient goes back to).
    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let [] = exactly(self, tensors)?;
        let lengths = cx.lengths;
        Ok(match self.max {
            false => {
                g.apply(self.kind(), Op::MeanTime, MeanTimeInputs { x, lengths })?
                    .out
            }
            true => {
                g.apply(self.kind(), Op::MaxTime, MaxTimeInputs { x, lengths })?
                    .out
            }
        })
    }
}
