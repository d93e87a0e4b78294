//! Programs of the recurrent benches: a stack's weights as graph inputs, and a graph
//! compiled on a fresh CPU backend with random values in its inputs.

use std::collections::HashMap;

use anyhow::Result;
use tensorfit::core::{Executable, Graph, Rng, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::CellWeights;
use tensorfit::nn::ParamSpec;

/// The weights of a recurrent stack as inputs of `g` named by their specs, and the same
/// tensors as one list (`w_ih, w_hh, b_ih, b_hh` of each layer in turn).
pub fn weight_inputs(
    g: &mut Graph,
    specs: &[CellWeights<ParamSpec>],
) -> (Vec<CellWeights<TensorId>>, Vec<TensorId>) {
    let weights: Vec<_> = (specs.iter())
        .map(|spec| spec.map(|s| g.input(&s.name, s.shape.clone())))
        .collect();
    let list = (weights.iter())
        .flat_map(|k| [k.w_ih, k.w_hh, k.b_ih, k.b_hh])
        .collect();
    (weights, list)
}

/// `g` compiled on a fresh CPU backend, each of `inputs` written with values drawn
/// uniformly from ±0.06 by `rng`.
pub fn compile_with_random_inputs(
    g: Graph,
    inputs: &[TensorId],
    rng: &mut Rng,
) -> Result<(Executable, CpuBackend)> {
    let sizes: Vec<usize> = inputs.iter().map(|&t| g.shape(t).numel()).collect();
    let mut be = CpuBackend::new();
    let exe = Executable::new(g, &mut be, HashMap::new())?;
    for (&t, &n) in inputs.iter().zip(&sizes) {
        let values: Vec<f32> = (0..n).map(|_| rng.uniform_range(-0.06, 0.06)).collect();
        exe.write(&mut be, t, &values)?;
    }
    Ok((exe, be))
}
