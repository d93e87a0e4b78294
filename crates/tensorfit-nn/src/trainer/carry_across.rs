//! A long text's state carried from one batch into the next: row `b` of a batch continues
//! row `b` of the batch before it (the windows of a text, `tensorfit_data::CharWindows`),
//! so it starts from the (h, c) — h for a GRU — that batch left, without a gradient across
//! the border (DL4J's truncated BPTT over minibatches, PyTorch's `hidden.detach()` between
//! batches).
//!
//! The state lives on the host between batches ([`CarriedState`], a few kilobytes): a
//! carrying call writes it into the device's carried state before its first program,
//! instead of zeros, and reads the final state back after its last, which copies it there
//! (`TrainOptions::carry_across` makes the training segment a `TrainCarry` program;
//! evaluation programs always copy). So a training run and its validations keep separate
//! states, evaluation in micro-batches carries each micro-batch's rows, a step repeated
//! after a device failure starts again from the same state, and no device memory is added
//! to the plan.

use std::collections::HashMap;
use std::ops::Range;

use tensorfit_core::{Error, HostTensor, Result, Shape, TensorView};

use super::{EvalReport, StepReport, Trainer};
use crate::layers::{StatePart, StateSlot};
use crate::programs::PersistentKey;

/// The recurrent state of a batch's rows between batches, on the host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CarriedState {
    /// The rows it holds (0 before the first batch).
    batch: usize,
    /// One `[batch, hidden]` block per state slot, in the stack's slot order; empty: zeros.
    slots: Vec<Vec<f32>>,
}

impl CarriedState {
    /// Zeros: the next batch starts new sequences.
    pub fn new() -> Self {
        CarriedState::default()
    }

    /// Back to zeros (a batch that does not continue the one before it).
    pub fn reset(&mut self) {
        self.slots.clear();
    }

    /// Whether the next batch starts from zeros.
    pub fn is_zero(&self) -> bool {
        self.slots.is_empty()
    }

    /// The state of the layers' h and c, `[layers, B, H]` each (c is `[0, B, H]` for a
    /// GRU stack), as [`Trainer::carried_state`] gives it; `None` while zero.
    pub fn tensors(&self, trainer: &Trainer) -> Option<Result<(HostTensor, HostTensor)>> {
        (!self.is_zero()).then(|| trainer.stack_parts(self.batch, self.slots.clone()))
    }

    /// A state that is not zero must be for batches of `batch` rows of a stack with
    /// `slots` state slots of `hidden` units (a loaded one may not be).
    fn check(&self, batch: usize, (slots, hidden): (usize, usize)) -> Result<()> {
        if self.is_zero() {
            return Ok(());
        }
        if self.batch != batch {
            return Err(Error::input(format!(
                "a batch of {batch} sequences cannot continue a batch of {}: reset the carried state where the sequences change",
                self.batch
            )));
        }
        if self.slots.len() != slots || self.slots.iter().any(|s| s.len() != batch * hidden) {
            return Err(Error::input(format!(
                "the carried state does not fit the model: {} state tensors, the model has {slots} of [{batch}, {hidden}]",
                self.slots.len()
            )));
        }
        Ok(())
    }
}

impl Trainer {
    /// [`Trainer::train_step_at`] from `state` (zeros after [`CarriedState::reset`]), which
    /// then holds the state the batch ended in. The trainer must have been made with
    /// `TrainOptions::carry_across`, so that its training segment leaves its final state.
    pub fn train_step_carrying(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
        state: &mut CarriedState,
    ) -> Result<StepReport> {
        if !self.opts.carry_across {
            return Err(Error::input(
                "this run was not planned to carry the state from one batch into the next (TrainOptions::carry_across)",
            ));
        }
        self.carrying(x, state, |t| t.train_step_at(x, labels, lengths))
    }

    /// [`Trainer::evaluate_at`] from `state`, which then holds the state the batch ended in
    /// (evaluation programs always leave it).
    pub fn evaluate_carrying(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
        state: &mut CarriedState,
    ) -> Result<EvalReport> {
        self.carrying(x, state, |t| t.evaluate_at(x, labels, lengths))
    }

    /// Runs `run` with `state` as the state every sequence of `x` starts from; `state` is
    /// replaced by the final state only when `run` succeeds.
    fn carrying<T>(
        &mut self,
        x: &HostTensor,
        state: &mut CarriedState,
        run: impl FnOnce(&mut Trainer) -> Result<T>,
    ) -> Result<T> {
        let batch = x.shape.dims().get(1).copied().unwrap_or(0);
        let stack = (self.state_slots().len(), self.state_hidden());
        state.check(batch, stack)?;
        self.carrying = Some(CarriedState {
            batch,
            slots: state.slots.clone(),
        });
        let out = run(self);
        let ended = self.carrying.take();
        if let (Ok(_), Some(ended)) = (&out, ended) {
            *state = ended;
        }
        out
    }

    /// Starts rows `rows` of a run of `batch` (a micro-batch's) from the state of the
    /// carrying call in progress, or from zeros.
    pub(super) fn load_carried(&mut self, batch: usize, rows: Range<usize>) -> Result<()> {
        let Some(state) = self.carrying.as_ref().filter(|s| !s.is_zero()) else {
            return self.reset_stream(batch, None);
        };
        let hidden = self.state_hidden();
        let blocks: Vec<Vec<f32>> = state
            .slots
            .iter()
            .map(|s| s[rows.start * hidden..rows.end * hidden].to_vec())
            .collect();
        for (view, block) in self.carried_views(batch)?.iter().zip(blocks) {
            self.backend.write(view, &block)?;
        }
        Ok(())
    }

    /// Keeps the final state of rows `rows` (a run of `batch`) in the carrying call's
    /// state; nothing outside one.
    pub(super) fn save_carried(&mut self, batch: usize, rows: Range<usize>) -> Result<()> {
        if self.carrying.is_none() {
            return Ok(());
        }
        let hidden = self.state_hidden();
        let views = self.carried_views(batch)?;
        let mut blocks = Vec::with_capacity(views.len());
        for view in &views {
            let mut block = vec![0.0; view.len()];
            self.backend.read(view, &mut block)?;
            blocks.push(block);
        }
        let Some(state) = self.carrying.as_mut() else {
            return Ok(());
        };
        if state.is_zero() {
            state.slots = vec![vec![0.0; state.batch * hidden]; blocks.len()];
        }
        for (slot, block) in state.slots.iter_mut().zip(blocks) {
            slot[rows.start * hidden..rows.end * hidden].copy_from_slice(&block);
        }
        Ok(())
    }

    /// The tensors the body's recurrent stack carries, layer by layer (none without one).
    pub(super) fn state_slots(&self) -> Vec<StateSlot> {
        self.recurrent.map_or_else(Vec::new, |r| r.state_slots())
    }

    /// The width of each carried state tensor (`[B, hidden]`).
    pub(super) fn state_hidden(&self) -> usize {
        self.recurrent.map_or(0, |r| r.hidden())
    }

    /// The device's carried state of batch size `batch`, one view per slot.
    pub(super) fn carried_views(&mut self, batch: usize) -> Result<Vec<TensorView>> {
        self.state_slots()
            .into_iter()
            .map(|slot| {
                let key = PersistentKey::Carried { slot, batch };
                self.persistent_view(&key, Shape::from([batch, self.state_hidden()]))
            })
            .collect()
    }

    /// Slot blocks of `batch` rows stacked as `[layers, B, H]` h and c.
    pub(super) fn stack_parts(
        &self,
        batch: usize,
        slots: Vec<Vec<f32>>,
    ) -> Result<(HostTensor, HostTensor)> {
        let (mut hs, mut cs) = (Vec::new(), Vec::new());
        for (slot, data) in self.state_slots().into_iter().zip(slots) {
            match slot.part {
                StatePart::H => hs.push(data),
                StatePart::C => cs.push(data),
            }
        }
        let hidden = self.state_hidden();
        let stacked = |parts: Vec<Vec<f32>>| {
            HostTensor::new(Shape::from([parts.len(), batch, hidden]), parts.concat())
        };
        Ok((stacked(hs)?, stacked(cs)?))
    }
}

/// The checkpoint entry (`extra`) holding a run's [`CarriedState`], as JSON:
/// `{"batch": B, "slots": [[bits, …], …]}`, each value's f32 bit pattern, so that a
/// resumed run continues from exactly this state.
pub const CARRIED_KEY: &str = "data.carried";

impl CarriedState {
    /// Writes the state into a checkpoint's `extra` under [`CARRIED_KEY`].
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let slots: Vec<Vec<u32>> = self
            .slots
            .iter()
            .map(|s| s.iter().map(|v| v.to_bits()).collect())
            .collect();
        let v = serde_json::json!({ "batch": self.batch, "slots": slots });
        extra.insert(CARRIED_KEY.to_string(), v.to_string());
    }

    /// The state stored under [`CARRIED_KEY`], `None` when there is none.
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<CarriedState>> {
        let Some(text) = extra.get(CARRIED_KEY) else {
            return Ok(None);
        };
        let bad = || Error::input(format!("`{CARRIED_KEY}` is not a carried state"));
        let v: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
        let batch = v["batch"].as_u64().ok_or_else(bad)? as usize;
        let slots = v["slots"]
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|s| {
                let values = s.as_array().ok_or_else(bad)?;
                values
                    .iter()
                    .map(|b| {
                        let bits = b.as_u64().and_then(|b| u32::try_from(b).ok());
                        bits.map(f32::from_bits).ok_or_else(bad)
                    })
                    .collect::<Result<Vec<f32>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(CarriedState { batch, slots }))
    }
}
