//! Batch normalisation over features, PyTorch's `nn.BatchNorm1d(C)`: its weight and bias,
//! its running statistics, its forward node and the update of its running statistics.

use tensorfit_core::args::{BatchNormInputs, MeanVar, StatsUpdateInputs, StatsUpdateTargets};
use tensorfit_core::{Error, Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{Init, ParamSpec, StateSlot, Tensors};
use crate::model::Mode;

/// PyTorch's default epsilon.
pub const BN_EPS: f32 = 1e-5;
/// PyTorch's default momentum of the running statistics.
pub const BN_MOMENTUM: f32 = 0.1;

/// BatchNorm over `features`, registered as `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchNorm {
    pub name: String,
    pub features: usize,
}

/// A BatchNorm's tensors, in PyTorch's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchNormTensors<T> {
    pub weight: T,
    pub bias: T,
    pub running_mean: T,
    pub running_var: T,
}

impl<T> BatchNormTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> BatchNormTensors<U> {
        BatchNormTensors {
            weight: f(&self.weight),
            bias: f(&self.bias),
            running_mean: f(&self.running_mean),
            running_var: f(&self.running_var),
        }
    }
}

impl<T> Tensors<T> for BatchNormTensors<T> {
    fn items(&self) -> Vec<&T> {
        vec![
            &self.weight,
            &self.bias,
            &self.running_mean,
            &self.running_var,
        ]
    }
}

/// A training forward's batch statistics, with the running statistics they update.
#[derive(Debug, Clone)]
pub struct BatchStats {
    /// The layer's name.
    pub name: String,
    pub batch: MeanVar<TensorId>,
    pub running: MeanVar<TensorId>,
}

impl BatchNorm {
    /// The table: weight 1, bias 0, running mean 0, running variance 1.
    pub fn specs(&self) -> BatchNormTensors<ParamSpec> {
        let (name, c) = (&self.name, [self.features]);
        BatchNormTensors {
            weight: ParamSpec::trainable(format!("{name}.weight"), c, Init::Constant(1.0)),
            bias: ParamSpec::trainable(format!("{name}.bias"), c, Init::Constant(0.0)),
            running_mean: ParamSpec::running(
                format!("{name}.running_mean"),
                c,
                Init::Constant(0.0),
            ),
            running_var: ParamSpec::running(format!("{name}.running_var"), c, Init::Constant(1.0)),
        }
    }

    /// Normalises `x` `[B, C]`: with the batch's statistics in training (recorded in
    /// `stats` for [`BatchNorm::stats_update`]), with the running ones in inference.
    pub fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        t: &BatchNormTensors<TensorId>,
        mode: Mode,
        stats: &mut Vec<BatchStats>,
    ) -> Result<TensorId> {
        let training = mode == Mode::Train;
        let running = MeanVar {
            mean: t.running_mean,
            var: t.running_var,
        };
        let inputs = BatchNormInputs {
            x,
            gamma: t.weight,
            beta: t.bias,
            running: (!training).then_some(running),
        };
        let op = Op::BatchNorm {
            eps: BN_EPS,
            training,
        };
        let outs = g.apply(&self.name, op, inputs)?;
        if training {
            let batch = outs
                .batch
                .ok_or_else(|| Error::Graph(format!("{}: no batch statistics", self.name)))?;
            stats.push(BatchStats {
                name: self.name.clone(),
                batch,
                running,
            });
        }
        Ok(outs.y)
    }

    /// Moves the running statistics towards a training batch's (`unbias`: B/(B-1), the
    /// variance's correction), as PyTorch does in training mode.
    pub fn stats_update(g: &mut Graph, stats: &BatchStats, unbias: f32) -> Result<()> {
        let op = Op::BatchNormStatsUpdate {
            momentum: BN_MOMENTUM,
            unbias,
        };
        let inputs = StatsUpdateInputs {
            mean: stats.batch.mean,
            var: stats.batch.var,
        };
        let targets = StatsUpdateTargets {
            running_mean: stats.running.mean,
            running_var: stats.running.var,
        };
        g.update(&format!("{}.stats_update", stats.name), op, inputs, targets)?;
        Ok(())
    }
}

impl Layer for BatchNorm {
    fn kind(&self) -> &'static str {
        "batchnorm"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.specs().to_vec()
    }

    fn output_features(&self, input: usize) -> usize {
        input
    }

    fn traits(&self) -> LayerTraits {
        LayerTraits {
            // Training normalises each feature over the batch's rows.
            mixes_rows: true,
            mixes_steps: false,
            carries_state: false,
            splits_in_time: true,
            random: false,
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let [weight, bias, running_mean, running_var] = exactly(self, tensors)?;
        let t = BatchNormTensors {
            weight,
            bias,
            running_mean,
            running_var,
        };
        BatchNorm::forward(self, g, x, &t, cx.mode, &mut cx.stats)
    }
}
