//! The gradient-check harness of `gradcheck.rs` and `gradcheck_recurrent.rs`: a [`Case`]
//! (a forward graph, its leaves' values, the outputs seeded and the tensors checked), run
//! forward and backward on a `CpuBackend` against central differences (the method is in
//! `gradcheck.rs`'s documentation).

#![allow(dead_code, unused_imports)]

use std::collections::HashMap;

use tensorfit_core::args::{
    ActivationInputs, BatchNormInputs, BinaryInputs, DropoutInputs, EmbeddingInputs,
    GruForwardInputs, GruForwardOutputs, LstmForwardInputs, LstmForwardOutputs, MatMulInputs,
    MeanVar, MseLossInputs, SliceTimeInputs, SoftmaxCrossEntropyInputs,
};
use tensorfit_core::dropout::{key_input, step_key};
use tensorfit_core::{
    backward, Activation, BinaryOp, DropoutParams, Executable, Graph, Op, Shape, TensorId,
};
use tensorfit_cpu::CpuBackend;
use tensorfit_testing::{Rng, TestRng};

pub const H: f32 = 1e-2;
pub const ATOL: f64 = 2e-3;
pub const RTOL: f64 = 2e-2;
/// Tensors up to this size are checked at every coordinate, larger ones at a sample.
pub const CHECK_ALL_UP_TO: usize = 40;
pub const SAMPLE: usize = 16;

/// Normal test values: N(0, std²) by Box-Muller on two draws in (0, 1).
pub trait Normals {
    fn normals(&mut self, n: usize, std: f32) -> Vec<f32>;
}

impl Normals for Rng {
    fn normals(&mut self, n: usize, std: f32) -> Vec<f32> {
        let mut normal = || {
            let (u, v) = (self.open_unit(), self.open_unit());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32 * std
        };
        (0..n).map(|_| normal()).collect()
    }
}

/// One gradient check: a forward graph, the value of every leaf, the outputs to seed and
/// the tensors to differentiate with respect to.
pub struct Case {
    pub name: &'static str,
    pub graph: Graph,
    pub values: Vec<(TensorId, Vec<f32>)>,
    pub outputs: Vec<TensorId>,
    pub wrt: Vec<(&'static str, TensorId)>,
}

impl Case {
    pub fn new(name: &'static str) -> Self {
        Case {
            name,
            graph: Graph::new(),
            values: Vec::new(),
            outputs: Vec::new(),
            wrt: Vec::new(),
        }
    }

    /// A leaf input with the given values, to differentiate against if `grad`.
    pub fn leaf(
        &mut self,
        name: &'static str,
        shape: &[usize],
        values: Vec<f32>,
        grad: bool,
    ) -> TensorId {
        assert_eq!(Shape::from(shape).numel(), values.len(), "{name}");
        let t = self.graph.input(name, shape);
        self.values.push((t, values));
        if grad {
            self.wrt.push((name, t));
        }
        t
    }

    /// A leaf of N(0, 0.5²) values that gradients are checked against.
    pub fn random(&mut self, name: &'static str, shape: &[usize], rng: &mut Rng) -> TensorId {
        let values = rng.normals(Shape::from(shape).numel(), 0.5);
        self.leaf(name, shape, values, true)
    }

    pub fn run(mut self, rng: &mut Rng) {
        let name = self.name;
        // Upstream gradients R_k, one per seeded output.
        let mut seeds = Vec::new();
        let mut upstream = Vec::new();
        for (k, &out) in self.outputs.iter().enumerate() {
            let shape = self.graph.shape(out).clone();
            let r = self.graph.input(&format!("upstream{k}"), shape.clone());
            let values = rng.normals(shape.numel(), 1.0);
            self.values.push((r, values.clone()));
            seeds.push((out, r));
            upstream.push((out, values));
        }
        let wrt_ids: Vec<TensorId> = self.wrt.iter().map(|&(_, t)| t).collect();
        let grads = backward(&mut self.graph, &seeds, &wrt_ids).unwrap();

        let mut be = CpuBackend::new();
        let exe = Executable::new(self.graph, &mut be, HashMap::new()).unwrap();
        for (t, v) in &self.values {
            exe.write(&mut be, *t, v).unwrap();
        }
        exe.run(&mut be).unwrap();

        // f = Σ_k Σ R_k ⊙ out_k, after a run with the current values.
        let objective = |be: &mut CpuBackend| -> f64 {
            exe.run(be).unwrap();
            upstream
                .iter()
                .map(|(out, r)| {
                    let o = exe.read(be, *out).unwrap();
                    o.iter()
                        .zip(r)
                        .map(|(&o, &r)| o as f64 * r as f64)
                        .sum::<f64>()
                })
                .sum()
        };

        // Every analytic gradient is read before any input is perturbed.
        let analytic: Vec<Vec<f32>> = self
            .wrt
            .iter()
            .zip(&grads)
            .map(|(&(wname, _), grad)| {
                let grad = grad.unwrap_or_else(|| panic!("{name}: no gradient for `{wname}`"));
                exe.read(&mut be, grad).unwrap()
            })
            .collect();

        let mut checked = 0;
        for (&(wname, t), analytic) in self.wrt.iter().zip(&analytic) {
            let mut x = self
                .values
                .iter()
                .find(|(id, _)| *id == t)
                .map(|(_, v)| v.clone())
                .unwrap();
            assert_eq!(
                analytic.len(),
                x.len(),
                "{name}: gradient of `{wname}` has the wrong size"
            );
            let coords: Vec<usize> = if x.len() <= CHECK_ALL_UP_TO {
                (0..x.len()).collect()
            } else {
                let mut c = vec![0, x.len() - 1];
                c.extend((0..SAMPLE).map(|_| (rng.next_u64() % x.len() as u64) as usize));
                c
            };
            for k in coords {
                let orig = x[k];
                x[k] = orig + H;
                exe.write(&mut be, t, &x).unwrap();
                let plus = objective(&mut be);
                x[k] = orig - H;
                exe.write(&mut be, t, &x).unwrap();
                let minus = objective(&mut be);
                x[k] = orig;
                exe.write(&mut be, t, &x).unwrap();
                let numeric = (plus - minus) / (2.0 * H as f64);
                let a = analytic[k] as f64;
                assert!(
                    (a - numeric).abs() <= ATOL + RTOL * numeric.abs(),
                    "{name}: d f / d {wname}[{k}]: analytic {a:.6}, numeric {numeric:.6}"
                );
                checked += 1;
            }
        }
        assert!(checked > 0, "{name}: nothing checked");
        exe.release(&mut be).unwrap();
        assert_eq!(be_allocated(&be), 0, "{name}: buffers left allocated");
    }
}

pub fn be_allocated(be: &CpuBackend) -> u64 {
    use tensorfit_core::Backend;
    be.memory().allocated
}

/// An LSTM layer with T=3, B=2, I=3, H=4; returns the case and its forward outputs.
pub fn lstm_case(rng: &mut Rng, x_grad: bool) -> (Case, LstmForwardOutputs<TensorId>) {
    let (t, b, i, h) = (3, 2, 3, 4);
    let mut c = Case::new("lstm");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), x_grad);
    let out = lstm_on(&mut c, x, (b, i, h), None, rng);
    (c, out)
}

/// An LSTM layer of `h` units over `x` (`i` features, or token ids over a vocabulary of
/// `i`) for a batch of `b`, with random state and weights to check against.
pub fn lstm_on(
    c: &mut Case,
    x: TensorId,
    (b, i, h): (usize, usize, usize),
    lengths: Option<TensorId>,
    rng: &mut Rng,
) -> LstmForwardOutputs<TensorId> {
    let h0 = c.random("h0", &[b, h], rng);
    let c0 = c.random("c0", &[b, h], rng);
    let w_ih = c.random("w_ih", &[4 * h, i], rng);
    let w_hh = c.random("w_hh", &[4 * h, h], rng);
    let b_ih = c.random("b_ih", &[4 * h], rng);
    let b_hh = c.random("b_hh", &[4 * h], rng);
    let inputs = LstmForwardInputs {
        x,
        h0,
        c0,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        lengths,
    };
    let op = Op::LstmForward {
        keep_for_backward: true,
    };
    c.graph.apply("lstm", op, inputs).unwrap()
}

/// A GRU layer with T=3, B=2 (or B = the number of `lengths`, which pads the batch),
/// I=3, H=4; returns the case and its forward outputs.
pub fn gru_case(
    rng: &mut Rng,
    x_grad: bool,
    lengths: Option<&[f32]>,
) -> (Case, GruForwardOutputs<TensorId>) {
    let (t, b, i, h) = (3, lengths.map_or(2, <[f32]>::len), 3, 4);
    let mut c = Case::new("gru");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), x_grad);
    let lengths = lengths.map(|l| c.leaf("lengths", &[b], l.to_vec(), false));
    let inputs = GruForwardInputs {
        x,
        h0: c.random("h0", &[b, h], rng),
        w_ih: c.random("w_ih", &[3 * h, i], rng),
        w_hh: c.random("w_hh", &[3 * h, h], rng),
        b_ih: c.random("b_ih", &[3 * h], rng),
        b_hh: c.random("b_hh", &[3 * h], rng),
        lengths,
    };
    let op = Op::GruForward {
        keep_for_backward: true,
    };
    let outs = c.graph.apply("gru", op, inputs).unwrap();
    (c, outs)
}
