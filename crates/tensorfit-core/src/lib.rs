//! tensorfit-core: the graph, its autodiff and schedule, and the Backend trait.
//!
//! Everything above a device is here and nothing device-specific is: a model is a
//! [`Graph`] of coarse [`Op`]s over statically shaped tensors; [`backward`] appends the
//! gradient nodes; [`schedule`](mod@schedule) orders them; an [`Executable`] binds every tensor to a
//! [`TensorView`] on a [`Backend`] and runs the nodes one op at a time. Each op's inputs
//! and outputs are named structs ([`args`]); a backend is a [`Ledger`] of buffers plus
//! one typed kernel per op ([`OpKernels`]), reached through the one [`dispatch`]. Because shapes
//! are static and ops are data, the memory a run needs can be computed from the graph
//! alone, before anything is allocated. Beside them, [`safetensors`](mod@safetensors) reads
//! and writes the tensor file format that data files, checkpoints and PyTorch weights share.

#![forbid(unsafe_code)]

pub mod args;
mod attention_ops;
pub mod autodiff;
pub mod backend;
mod bidir_ops;
mod conv_ops;
mod dispatch;
pub mod dropout;
pub mod erf;
pub mod error;
pub mod exec;
pub mod graph;
pub mod gru;
pub mod half_float;
pub mod kernels;
pub mod ledger;
mod loss_op;
pub mod lstm_dims;
pub mod op;
pub(crate) mod op_shapes;
mod optim_op;
mod pool_ops;
pub mod positions_ops;
mod provider;
pub mod recurrent_dims;
pub mod rng;
pub mod rows;
pub mod safetensors;
pub mod schedule;
pub mod seq_lengths;
pub mod shape;
pub mod tensor;
pub mod tokens;

pub use attention_ops::AttentionDims;
pub use autodiff::backward;
pub use backend::{Backend, BufferId, DeviceInfo, DeviceKind, GpuModel, MemoryInfo, TensorView};
pub use bidir_ops::time_dims;
pub use conv_ops::ConvTaps;
pub use dispatch::dispatch;
pub use dropout::DropoutParams;
pub use error::{Error, Result};
pub use exec::{Executable, Layout, Placement};
pub use graph::{Graph, Node, NodeId, Phase, Role, TensorId, TensorInfo};
pub use gru::GruDims;
pub use kernels::{AttentionKernels, ConvKernels, KernelTypes, OpCall, OpKernels, PoolKernels};
pub use ledger::{Capacity, Ledger};
pub use op::{sigmoid, Activation, AdamParams, BinaryOp, LstmDims, Op, SgdParams};
pub use positions_ops::PositionKernels;
pub use provider::{Hardware, Provider};
pub use recurrent_dims::{RecurrentDims, LSTM_SCRATCH_STEPS};
pub use rng::Rng;
pub use schedule::schedule;
pub use shape::{DType, Shape};
pub use tensor::HostTensor;
