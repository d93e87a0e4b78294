//! The backend's kernel sources: each `.cu` file, the `extern "C"` kernels it defines
//! and their names, which launchers use (kept out of `mod.rs` so that file stays small).

/// Text prepended to every source: shared helpers (see `common.cuh`).
pub const COMMON: &str = include_str!("common.cuh");

/// One `.cu` file and the `extern "C"` kernels it defines.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    pub file: &'static str,
    pub code: &'static str,
    pub kernels: &'static [&'static str],
}

impl KernelSource {
    /// The translation unit NVRTC compiles: the common helpers, then the file, with a
    /// `#line` so that NVRTC's messages point into the file itself.
    pub fn translation_unit(&self) -> String {
        format!("{COMMON}\n#line 1 \"{}\"\n{}", self.file, self.code)
    }
}

/// The kernels, by the name each `.cu` file gives its `extern "C" __global__` function
/// (launchers name them only through these, and the test below checks the table
/// against the sources).
pub const BINARY: &str = "binary";
pub const ACTIVATION_FORWARD: &str = "activation_forward";
pub const ACTIVATION_BACKWARD: &str = "activation_backward";
pub const SUM_TO_SHAPE: &str = "sum_to_shape";
pub const LSTM_FORWARD_CELL: &str = "lstm_forward_cell";
pub const LSTM_BACKWARD_CELL: &str = "lstm_backward_cell";
pub const GRU_FORWARD_CELL: &str = "gru_forward_cell";
pub const GRU_BACKWARD_CELL: &str = "gru_backward_cell";
pub const BATCHNORM_FORWARD_STATS: &str = "batchnorm_forward_stats";
pub const BATCHNORM_FORWARD_APPLY: &str = "batchnorm_forward_apply";
pub const BATCHNORM_BACKWARD: &str = "batchnorm_backward";
pub const BATCHNORM_STATS_UPDATE: &str = "batchnorm_stats_update";
pub const LAYERNORM_FORWARD: &str = "layernorm_forward";
pub const LAYERNORM_BACKWARD_DX: &str = "layernorm_backward_dx";
pub const LAYERNORM_BACKWARD_SUMS: &str = "layernorm_backward_sums";
pub const SOFTMAX_CROSS_ENTROPY_FORWARD: &str = "softmax_cross_entropy_forward";
pub const SOFTMAX_CROSS_ENTROPY_BACKWARD: &str = "softmax_cross_entropy_backward";
pub const MSE_LOSS_FORWARD: &str = "mse_loss_forward";
pub const MSE_LOSS_BACKWARD: &str = "mse_loss_backward";
pub const ADAM_UPDATE: &str = "adam_update";
pub const GATHER: &str = "gather";
pub const SCATTER_ADD: &str = "scatter_add";
pub const GATHER_STEPS: &str = "gather_steps";
pub const SCATTER_STEPS: &str = "scatter_steps";
pub const SGD_UPDATE: &str = "sgd_update";
pub const SUM_SQUARES: &str = "sum_squares";
pub const CLIP_GRAD: &str = "clip_grad";
pub const DROPOUT: &str = "dropout";
pub const REVERSE_TIME: &str = "reverse_time";
pub const COPY_FEATURES: &str = "copy_features";
pub const MEAN_TIME: &str = "mean_time";
pub const MAX_TIME: &str = "max_time";
pub const MEAN_TIME_BACKWARD: &str = "mean_time_backward";
pub const MAX_TIME_BACKWARD: &str = "max_time_backward";
pub const UNFOLD_TIME: &str = "unfold_time";
pub const FOLD_TIME: &str = "fold_time";
pub const ADD_TIME_ROWS: &str = "add_time_rows";
pub const SUM_BATCH_TO_ROWS: &str = "sum_batch_to_rows";
pub const SINUSOIDS: &str = "sinusoids";
pub const ATTENTION_DOT: &str = "attention_dot";
pub const ATTENTION_SOFTMAX: &str = "attention_softmax";
pub const ATTENTION_ROWSUM: &str = "attention_rowsum";
pub const ATTENTION_MIX: &str = "attention_mix";

/// A [`KernelSource`] of the file `$file` (named once: its text is included from it).
macro_rules! source {
    ($file:literal, [$($kernel:expr),* $(,)?]) => {
        KernelSource {
            file: $file,
            code: include_str!($file),
            kernels: &[$($kernel),*],
        }
    };
}

/// Every kernel source of the backend.
pub const SOURCES: [KernelSource; 16] = [
    source!(
        "elementwise.cu",
        [
            BINARY,
            ACTIVATION_FORWARD,
            ACTIVATION_BACKWARD,
            SUM_TO_SHAPE
        ]
    ),
    source!("lstm.cu", [LSTM_FORWARD_CELL, LSTM_BACKWARD_CELL]),
    source!("gru.cu", [GRU_FORWARD_CELL, GRU_BACKWARD_CELL]),
    source!(
        "batchnorm.cu",
        [
            BATCHNORM_FORWARD_STATS,
            BATCHNORM_FORWARD_APPLY,
            BATCHNORM_BACKWARD,
            BATCHNORM_STATS_UPDATE
        ]
    ),
    source!(
        "layernorm.cu",
        [
            LAYERNORM_FORWARD,
            LAYERNORM_BACKWARD_DX,
            LAYERNORM_BACKWARD_SUMS
        ]
    ),
    source!(
        "softmax.cu",
        [
            SOFTMAX_CROSS_ENTROPY_FORWARD,
            SOFTMAX_CROSS_ENTROPY_BACKWARD
        ]
    ),
    source!("mse.cu", [MSE_LOSS_FORWARD, MSE_LOSS_BACKWARD]),
    source!("adam.cu", [ADAM_UPDATE]),
    source!(
        "gather.cu",
        [GATHER, SCATTER_ADD, GATHER_STEPS, SCATTER_STEPS]
    ),
    source!("optim.cu", [SGD_UPDATE, SUM_SQUARES, CLIP_GRAD]),
    source!("dropout.cu", [DROPOUT]),
    source!("bidir.cu", [REVERSE_TIME, COPY_FEATURES]),
    source!(
        "pool.cu",
        [MEAN_TIME, MAX_TIME, MEAN_TIME_BACKWARD, MAX_TIME_BACKWARD]
    ),
    source!("conv.cu", [UNFOLD_TIME, FOLD_TIME]),
    source!(
        "positions.cu",
        [ADD_TIME_ROWS, SUM_BATCH_TO_ROWS, SINUSOIDS]
    ),
    source!(
        "attention.cu",
        [
            ATTENTION_DOT,
            ATTENTION_SOFTMAX,
            ATTENTION_ROWSUM,
            ATTENTION_MIX
        ]
    ),
];
