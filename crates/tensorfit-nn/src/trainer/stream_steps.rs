//! Streaming inference: a batch of sequences fed one time step per call, the recurrent
//! state kept on the device between calls (DL4J's `rnnTimeStep`, PyTorch's passing of
//! `(h, c)` back into `nn.LSTM`).
//!
//! A step runs the one-step evaluation program (`eval b=B t=1`), whose last ops copy the
//! final state into the carried state it started from; nothing is planned, allocated or
//! snapshotted per call once that program is loaded.

use tensorfit_core::{Error, HostTensor, Result, Shape, TensorView};

use super::Trainer;
use crate::batch_input::{check_batch, write_steps};
use crate::options::{ProgramKey, ProgramKind};

impl Trainer {
    /// The program one stream step of `batch` sequences runs.
    pub fn stream_program(batch: usize) -> ProgramKey {
        ProgramKey {
            kind: ProgramKind::Eval,
            batch,
            steps: 1,
            recompute: None,
            padded: false,
        }
    }

    /// Advances `B` streams by one step `x` (`[1, B, F]`, or `[1, B]` token ids) from the
    /// state the previous step left, and returns the model's output at this step `[B,
    /// outputs]` (softmax probabilities, or a regression's values).
    pub fn stream_step(&mut self, x: &HostTensor) -> Result<HostTensor> {
        let targets =
            x.shape.dims().get(1).copied().unwrap_or(0) * self.model.loss.targets_per_row();
        // The labels only feed the loss, which a stream does not read.
        let labels = vec![0.0; targets];
        if self.reads_whole {
            let net = self.model.network()?;
            net.check_splits_in_time("as a stream of single steps")?;
        }
        let (steps, batch) = check_batch(&self.model, x, &labels)?;
        if steps != 1 {
            return Err(Error::input(format!(
                "a stream step takes one time step, the input has shape {}",
                x.shape
            )));
        }
        let key = Trainer::stream_program(batch);
        self.ensure_program(key)?;
        let p = &self.programs[&key];
        let backend = self.backend.as_mut();
        let (input, _) = p.ids.xs[0];
        write_steps(backend, p.exe.view(input), x, 0..1, 0..batch)?;
        if let Some(&l) = p.ids.labels.first() {
            p.exe.write(backend, l, &labels)?;
        }
        p.exe.run(backend)?;
        let out = match p.ids.probs.first() {
            Some(&pr) => p.exe.read(backend, pr)?,
            None => Vec::new(),
        };
        HostTensor::new([batch, self.model.loss.outputs()], out)
    }

    /// Zeroes the carried state of sequence `row` of the `batch` streams (`None`: of
    /// every sequence), so that its next step starts a new sequence.
    pub fn reset_stream(&mut self, batch: usize, row: Option<usize>) -> Result<()> {
        if let Some(r) = row.filter(|&r| r >= batch) {
            return Err(Error::input(format!(
                "stream {r} does not exist: the stream has {batch} sequences"
            )));
        }
        let hidden = self.state_hidden();
        for view in self.carried_views(batch)? {
            let part = match row {
                Some(r) => {
                    TensorView::at(view.buffer, view.offset + r * hidden, Shape::from([hidden]))
                }
                None => view,
            };
            self.backend.write(&part, &vec![0.0; part.len()])?;
        }
        Ok(())
    }
}
