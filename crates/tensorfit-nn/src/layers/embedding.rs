//! PyTorch's `nn.Embedding(vocab, dim)` registered as `embedding`: one vector of `dim`
//! values per token of the vocabulary (`embedding.weight` `[vocab, dim]`, N(0, 1) as
//! PyTorch initialises it), looked up by token id ([`Op::Embedding`]). Its gradient is the
//! scatter-add of the output gradients into the rows of the ids seen, which autodiff
//! wires (`Op::EmbeddingBackward`).
//!
//! Ids are f32 holding whole numbers in `0..vocab` (as class labels are); one outside the
//! vocabulary is an error naming its position (see `tensorfit_core::tokens`).

use tensorfit_core::args::{EmbeddingBackwardInputs, EmbeddingInputs};
use tensorfit_core::{Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{Init, ParamSpec, StateSlot, Tensors};

/// The name the layer is registered under, as in a PyTorch module (`self.embedding`).
const MODULE: &str = "embedding";

/// A table of `vocab` vectors of `dim` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Embedding {
    pub vocab: usize,
    pub dim: usize,
}

/// The layer's one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddingTensors<T> {
    /// `[vocab, dim]`.
    pub weight: T,
}

impl<T> EmbeddingTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> EmbeddingTensors<U> {
        EmbeddingTensors {
            weight: f(&self.weight),
        }
    }
}

impl<T> Tensors<T> for EmbeddingTensors<T> {
    fn items(&self) -> Vec<&T> {
        vec![&self.weight]
    }
}

impl Embedding {
    /// The table: `embedding.weight`, N(0, 1).
    pub fn specs(&self) -> EmbeddingTensors<ParamSpec> {
        let shape = [self.vocab, self.dim];
        let init = Init::Normal { std: 1.0 };
        EmbeddingTensors {
            weight: ParamSpec::trainable(format!("{MODULE}.weight"), shape, init),
        }
    }

    /// The vectors of `ids` (`[T, B]` for a sequence): `[.., dim]`, as the dense input of
    /// the layer above; the node is called `name` (`embedding` in a plain forward).
    pub fn forward(
        g: &mut Graph,
        name: &str,
        ids: TensorId,
        w: &EmbeddingTensors<TensorId>,
    ) -> Result<TensorId> {
        let inputs = EmbeddingInputs {
            table: w.weight,
            ids,
        };
        Ok(g.apply(name, Op::Embedding, inputs)?.out)
    }

    /// The gradient of the table given the gradient `dout` of the vectors of `ids`
    /// (where autodiff does not build it: recomputed segments).
    pub fn backward(
        &self,
        g: &mut Graph,
        name: &str,
        ids: TensorId,
        dout: TensorId,
    ) -> Result<TensorId> {
        let op = Op::EmbeddingBackward { vocab: self.vocab };
        let inputs = EmbeddingBackwardInputs { ids, dout };
        Ok(g.apply(name, op, inputs)?.dtable)
    }
}

impl Layer for Embedding {
    fn kind(&self) -> &'static str {
        MODULE
    }

    fn name(&self) -> &str {
        MODULE
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.specs().to_vec()
    }

    fn output_features(&self, _input: usize) -> usize {
        self.dim
    }

    fn traits(&self) -> LayerTraits {
        LayerTraits::PER_ROW
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    fn forward(
        &self,
        g: &mut Graph,
        ids: TensorId,
        tensors: &[TensorId],
        _cx: &mut Context,
    ) -> Result<TensorId> {
        let [weight] = exactly(self, tensors)?;
        Embedding::forward(g, MODULE, ids, &EmbeddingTensors { weight })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Shape;

    #[test]
    fn the_table_has_pytorchs_name_shape_and_normal_init() {
        let spec = Embedding { vocab: 65, dim: 16 }.specs().weight;
        assert_eq!(spec.name, "embedding.weight");
        assert_eq!(spec.shape, Shape::from([65, 16]));
        assert_eq!(spec.init, Init::Normal { std: 1.0 });
    }

    #[test]
    fn a_sequence_of_ids_becomes_a_sequence_of_vectors() {
        let layer = Embedding { vocab: 7, dim: 3 };
        let mut g = Graph::new();
        let w = layer.specs().map(|s| s.leaf(&mut g));
        let ids = g.input("x", [5, 2]);
        let out = Embedding::forward(&mut g, "embedding", ids, &w).unwrap();
        assert_eq!(g.shape(out), &Shape::from([5, 2, 3]));
    }
}
