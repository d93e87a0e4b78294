//! The update program of data-parallel training ([`ProgramKind::Update`]): clipping and
//! the optimizer, reading gradients the host writes (averaged over ranks) instead of
//! computing them. Its parameters and optimizer moments are the persistent tensors every
//! program shares by name, so it updates the weights the gradient program read.
//!
//! [`ProgramKind::Update`]: crate::options::ProgramKind::Update

use tensorfit_core::{Graph, Result, TensorId};

use crate::description::ModelDescription;
use crate::layers::ParamKind;
use crate::optim::{OptimConfig, UpdateIds};

/// The update graph and its gradient inputs, by parameter name in table order.
#[derive(Debug)]
pub(crate) struct UpdateGraph {
    pub graph: Graph,
    pub update: UpdateIds,
    pub grad_inputs: Vec<(String, TensorId)>,
}

/// The suffix of a gradient input's name: `lstm.weight_ih_l0.grad`.
const GRAD_SUFFIX: &str = ".grad";

pub(crate) fn update_graph(model: &ModelDescription, optim: &OptimConfig) -> Result<UpdateGraph> {
    let mut graph = Graph::new();
    let (mut params, mut grads) = (Vec::new(), Vec::new());
    let mut grad_inputs = Vec::new();
    for spec in model.param_specs()? {
        if spec.kind != ParamKind::Trainable {
            continue;
        }
        let p = graph.parameter(&spec.name, spec.shape.clone());
        let g = graph.input(&format!("{}{GRAD_SUFFIX}", spec.name), spec.shape);
        params.push((spec.name.clone(), p));
        grads.push(g);
        grad_inputs.push((spec.name, g));
    }
    let update = optim.append(&mut graph, &params, &grads)?;
    Ok(UpdateGraph {
        graph,
        update,
        grad_inputs,
    })
}
