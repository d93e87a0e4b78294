//! A training step with BatchNorm over the global batch of data-parallel ranks
//! ([`crate::sync_head`]): the forward to the head's input; the host gathers every
//! rank's rows of it (with their targets); the head over all of them; this rank's rows
//! of the head input's gradient back through the recurrent stack; then the gradients
//! exchanged and the update, as in every split step.

use tensorfit_core::{Error, HostTensor, Result};

use super::exchange::GradientExchange;
use super::Trainer;
use crate::batch_input::write_steps;
use crate::options::ProgramKey;

impl Trainer {
    /// Runs `keys` (carried chunks, head input, head, stack gradients, update) over the
    /// rows of `x`; returns the global batch's loss and this rank's probabilities.
    pub(super) fn run_sync(
        &mut self,
        keys: &[ProgramKey],
        x: &HostTensor,
        labels: &[f32],
        scalars: &[f32],
        step: u64,
        exchange: &mut dyn GradientExchange,
    ) -> Result<(f32, HostTensor)> {
        let n = keys.len();
        let (Some(start), [head, stack, update]) = (
            n.checked_sub(3),
            keys.get(n.saturating_sub(3)..).unwrap_or(&[]),
        ) else {
            return Err(Error::Graph(
                "a synchronised step needs its four programs".into(),
            ));
        };
        let (head, stack, update) = (*head, *stack, *update);
        let dims = x.shape.dims().to_vec();
        let (steps, rows) = (dims[0], dims[1]);
        let input = self.start_sequence(&keys[..start], x, 0..rows)?;
        self.ensure_program(head)?;
        self.ensure_program(stack)?;
        let missing =
            |what: &str, key: ProgramKey| Error::Graph(format!("program `{key}` has no {what}"));
        let backend = self.backend.as_mut();
        let p = &self.programs[&input];
        p.exe.run(backend)?;
        let features = p.ids.features.ok_or_else(|| missing("head input", input))?;
        let features = p.exe.read(backend, features)?;
        // Each row: its head input, then its targets.
        let (hidden, per_row) = (
            features.len() / rows.max(1),
            self.model.loss.targets_per_row(),
        );
        let width = hidden + per_row;
        let mut mine = Vec::with_capacity(rows * width);
        for r in 0..rows {
            mine.extend_from_slice(&features[r * hidden..(r + 1) * hidden]);
            mine.extend_from_slice(&labels[r * per_row..(r + 1) * per_row]);
        }
        let (all, at) = exchange.gather_rows(step, &mine, width)?;
        let global = all.len() / width;
        if global != head.batch || at.len() != rows {
            return Err(Error::Graph(format!(
                "the ranks gathered {global} rows (this rank's at {at:?}); program `{head}` was planned for {}",
                head.batch
            )));
        }
        let (mut head_input, mut targets) = (Vec::with_capacity(global * hidden), Vec::new());
        for row in all.chunks_exact(width) {
            head_input.extend_from_slice(&row[..hidden]);
            targets.extend_from_slice(&row[hidden..]);
        }
        let h = &self.programs[&head];
        let (Some(fi), Some(fg), Some(l), Some(loss), Some(pr)) = (
            h.ids.features,
            h.ids.features_grad,
            h.ids.labels.first().copied(),
            h.ids.loss,
            h.ids.probs.first().copied(),
        ) else {
            return Err(missing(
                "head input, gradient, labels, loss or prediction",
                head,
            ));
        };
        h.exe.write(backend, fi, &head_input)?;
        h.exe.write(backend, l, &targets)?;
        h.exe.run(backend)?;
        let loss = h
            .exe
            .read(backend, loss)?
            .first()
            .copied()
            .unwrap_or(f32::NAN);
        let outputs = self.model.loss.outputs();
        let probs = h.exe.read(backend, pr)?[at.start * outputs..at.end * outputs].to_vec();
        // This rank's rows of the head input's gradient, scaled from the global batch's
        // mean to its own rows' (the form the exchange weighs by the rank's rows).
        let scale = global as f32 / rows as f32;
        let seed: Vec<f32> = h.exe.read(backend, fg)?[at.start * hidden..at.end * hidden]
            .iter()
            .map(|g| g * scale)
            .collect();
        let mut grads = self.read_grads(head)?;
        let backend = self.backend.as_mut();
        let s = &self.programs[&stack];
        let (Some(&(xs, len)), Some(sg)) = (s.ids.xs.first(), s.ids.features_grad) else {
            return Err(missing("sequence input or head input gradient", stack));
        };
        write_steps(backend, s.exe.view(xs), x, steps - len..steps, 0..rows)?;
        s.exe.write(backend, sg, &seed)?;
        s.exe.run(backend)?;
        grads.extend(self.read_grads(stack)?);
        let loss = self.exchange_and_update(grads, update, loss, scalars, step, exchange)?;
        Ok((loss, HostTensor::new([rows, outputs], probs)?))
    }
}
