//! A [`Runner`]'s inference: the loss and accuracy of a batch or of a whole set of
//! sequences, and predictions for a time-major tensor or for sequences as an app holds
//! them (of any lengths on a run planned for padded batches).

use tensorfit_core::HostTensor;
use tensorfit_nn::{Batch, EvalReport};

use super::error::Result;
use super::runner::{lengths_of, Runner};
use super::sequences::{lengths_of as lengths_of_inputs, time_major, Sequences};
use super::train_report::Scores;

impl Runner {
    /// The loss (and a classifier's accuracy) on `x` with `labels`, in inference form,
    /// every sequence all of `x`'s steps.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// let report = run.evaluate(&HostTensor::zeros([3, 2, 2]), &[0.0, 2.0])?;
    /// assert_eq!(report.probs.shape.dims(), &[2, 3]); // [batch, classes]
    /// assert!(report.accuracy.is_some());
    /// assert!((report.perplexity.unwrap() - report.loss.exp()).abs() < 1e-3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn evaluate(&mut self, x: &HostTensor, labels: &[f32]) -> Result<EvalReport> {
        self.refuse_bare_on_padded("evaluate", "evaluate_batch")?;
        self.evaluate_at(x, labels, None)
    }

    /// [`Runner::evaluate`] on `batch`, each sequence's padded steps masked when it has
    /// lengths.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Model, ModelDescription, Sequences};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// // Sequences of 3 steps and 1 step, of 2 features.
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![0.2; 2]], vec![0.0, 1.0], 2)?;
    /// let mut run = model.open(data.shapes(2), &DevicePolicy::only_cpu())?;
    /// let both = run.evaluate_batch(&data.all()?)?;
    /// assert_eq!(both.probs.shape.dims(), &[2, 3]);
    /// // The second sequence's padded steps are masked: alone, it scores the same.
    /// let alone = run.evaluate_batch(&data.batch(&[1])?)?;
    /// for (a, b) in alone.probs.data.iter().zip(&both.probs.data[3..]) {
    ///     assert!((a - b).abs() < 1e-5);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn evaluate_batch(&mut self, batch: &Batch) -> Result<EvalReport> {
        let lengths = lengths_of(batch)?;
        self.evaluate_at(&batch.x, &batch.labels, lengths.as_deref())
    }

    fn evaluate_at(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
    ) -> Result<EvalReport> {
        let x = &*self.conform(x)?;
        self.check_planned(x, false)?;
        self.step_on(|t| t.evaluate_at(x, labels, lengths))
    }

    /// The mean loss (and a classifier's accuracy) over every sequence of `data`, each
    /// weighing the same, in batches of up to the plan's evaluation batch grouped by
    /// length (the last one partial): what [`Runner::train`] validates with.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Model, ModelDescription, Sequences};
    /// let model = Model::new(ModelDescription::builder().features(1).lstm(8, 1).classify(2).build().unwrap(), 1).unwrap();
    /// let data = Sequences::new(vec![vec![0.5; 3], vec![1.0; 5], vec![0.0; 2]], vec![0.0, 1.0, 1.0], 1)
    ///     .unwrap();
    /// let mut run = model.open(data.shapes(2), &DevicePolicy::only_cpu()).unwrap();
    /// let scores = run.evaluate_sequences(&data).unwrap();
    /// assert_eq!(scores.sequences, 3);
    /// assert!(scores.accuracy.is_some());
    /// ```
    pub fn evaluate_sequences(&mut self, data: &Sequences) -> Result<Scores> {
        let batch = self.eval_batch();
        let (mut loss, mut correct) = (0f64, Some(0f64));
        for rows in data.eval_order(batch)? {
            let report = self.evaluate_batch(&data.batch(&rows)?)?;
            let n = rows.len() as f64;
            loss += report.loss as f64 * n;
            correct = correct.zip(report.accuracy).map(|(c, a)| c + a as f64 * n);
        }
        let n = data.len().max(1) as f64;
        Ok(Scores {
            loss: (loss / n) as f32,
            accuracy: correct.map(|c| (c / n) as f32),
            sequences: data.len(),
        })
    }

    /// The most sequences an evaluation of the plan takes at once (its training batch
    /// when it plans no evaluation).
    pub(super) fn eval_batch(&self) -> usize {
        let (train, eval) = self.session.job().parts();
        eval.or(train).map_or(1, |(b, _)| b)
    }

    /// Class probabilities `[batch, classes]` (a regression's values `[batch, outputs]`)
    /// for `x` `[time, batch, ..]`, every sequence all of `x`'s steps; with a head on
    /// every step `[time, batch, classes]`, time-major like `x` (the CLI writes them
    /// batch-first).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// let probs = run.predict(&HostTensor::zeros([3, 2, 2]))?;
    /// assert_eq!(probs.shape.dims(), &[2, 3]); // [batch, classes]
    /// for row in probs.data.chunks(3) {
    ///     assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn predict(&mut self, x: &HostTensor) -> Result<HostTensor> {
        self.refuse_bare_on_padded("predict", "predict_sequences")?;
        let x = &*self.conform(x)?;
        self.check_planned(x, false)?;
        Ok(self.session.trainer.predict(x)?)
    }

    /// [`Runner::predict`] on sequences as an app holds them, batch-first and without
    /// labels: `inputs[i]` is sequence `i`, its steps one after another (`features`
    /// values each; one token id each for a token model). Sequences of different lengths
    /// need a run planned for padded batches ([`Runner::padded`]). Returns each
    /// sequence's outputs: its class probabilities (a regression's values) at its own
    /// last step, or with a head on every step those of each of its steps in turn.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Job, Model};
    /// let mut run = Model::seed()
    ///     .open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())
    ///     .unwrap();
    /// let out = run.predict_sequences(&[vec![0.0; 3 * 152], vec![1.0; 3 * 152]]).unwrap();
    /// assert_eq!((out.len(), out[0].len()), (2, 6)); // 6 class probabilities each
    /// ```
    pub fn predict_sequences(&mut self, inputs: &[Vec<f32>]) -> Result<Vec<Vec<f32>>> {
        let width = self.session.trainer.model().input_features();
        let lengths = lengths_of_inputs(inputs, width)?;
        let steps = lengths.iter().copied().max().unwrap_or(0);
        let seqs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
        let x = time_major(&seqs, steps, width)?;
        let x = &*self.conform(&x)?;
        let padded: Option<Vec<f32>> = lengths
            .iter()
            .any(|&l| l != steps)
            .then(|| lengths.iter().map(|&l| l as f32).collect());
        self.check_planned(x, false)?;
        let out = match &padded {
            None => self.session.trainer.predict(x)?,
            Some(l) => self.session.trainer.predict_at(x, Some(l))?,
        };
        let batch = inputs.len();
        let dims = out.shape.dims();
        Ok(match dims[..] {
            // [time, batch, outputs]: each sequence's own steps gathered in turn.
            [t, b, k] if (t, b) == (steps, batch) => (0..batch)
                .map(|i| {
                    (0..lengths[i])
                        .flat_map(|s| out.data[(s * batch + i) * k..(s * batch + i + 1) * k].iter())
                        .copied()
                        .collect()
                })
                .collect(),
            _ => out
                .data
                .chunks(out.data.len() / batch.max(1))
                .map(<[f32]>::to_vec)
                .collect(),
        })
    }
}
