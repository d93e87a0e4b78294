//! The last step of each sequence as a layer (DL4J's `LastTimeStep`; a description's
//! `head.on = "last"`): `[T, B, F]` in, `[B, F]` out. After a bidirectional stack, each
//! direction's own last step: the forward direction's at the sequence's end beside the
//! reverse direction's at its start (PyTorch's `torch.cat((h_n[-2], h_n[-1]), 1)`,
//! Keras's `Bidirectional` without `return_sequences`).

use tensorfit_core::args::SliceTimeInputs;
use tensorfit_core::{Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{ParamSpec, StateSlot};

/// Each sequence's last step: the batch's last, or each sequence's own with lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastStep;

impl Layer for LastStep {
    fn kind(&self) -> &'static str {
        "last_step"
    }

    fn name(&self) -> &str {
        "last_step"
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
            // It reads one step of each sequence, whichever chunk holds it.
            mixes_steps: true,
            carries_state: false,
            splits_in_time: true,
            random: false,
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    /// The summary the layer below left in `cx.ends` if any (a bidirectional stack's
    /// directions' own last steps; in inference over a padded batch a recurrent stack's
    /// final h, which holds a sequence that ended in an earlier chunk); otherwise the
    /// slice at the last step (each sequence's own with lengths).
    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let [] = exactly(self, tensors)?;
        if let Some(ends) = cx.ends {
            return Ok(ends);
        }
        let steps = g.shape(x).dims()[0];
        let inputs = SliceTimeInputs {
            x,
            lengths: cx.lengths,
        };
        let op = Op::SliceTime { t: steps - 1 };
        Ok(g.apply("last_step", op, inputs)?.out)
    }
}
