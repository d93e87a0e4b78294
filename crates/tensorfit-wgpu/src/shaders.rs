//! The WGSL sources and the table of kernels (entry points) they define.
//!
//! One file per op family, named like the CPU backend's `kernels/*.rs`, embedded at
//! compile time after `shaders/common.wgsl`, whose conventions every entry point follows
//! (binding 0: parameters, whose first words are the bases of
//! bindings 1..=`buffers`, all `read_write`). The test at the bottom parses and validates
//! every file with naga, without a GPU, and checks each [`Kernel`] against the entry
//! point it names: that it exists, and binds exactly the buffers the host code fills.

/// Declares [`Shader`], one variant per file of `shaders/` (each named once here), with
/// its file name and its text after `common.wgsl`.
macro_rules! shaders {
    ($($shader:ident => $file:literal,)*) => {
        /// A shader source file.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum Shader {
            $($shader,)*
        }

        impl Shader {
            #[cfg(test)]
            pub const ALL: &'static [Shader] = &[$(Shader::$shader,)*];

            pub fn file(self) -> &'static str {
                match self {
                    $(Shader::$shader => $file,)*
                }
            }

            /// The file's text after `common.wgsl` (the conventions and helpers every file
            /// uses).
            pub fn source(self) -> &'static str {
                match self {
                    $(Shader::$shader => concat!(
                        include_str!("shaders/common.wgsl"),
                        include_str!(concat!("shaders/", $file))
                    ),)*
                }
            }
        }
    };
}

shaders! {
    Gemm => "gemm.wgsl",
    Elementwise => "elementwise.wgsl",
    Lstm => "lstm.wgsl",
    Gru => "gru.wgsl",
    Batchnorm => "batchnorm.wgsl",
    Layernorm => "layernorm.wgsl",
    Softmax => "softmax.wgsl",
    Mse => "mse.wgsl",
    Adam => "adam.wgsl",
    Gather => "gather.wgsl",
    Optim => "optim.wgsl",
    Dropout => "dropout.wgsl",
    Bidir => "bidir.wgsl",
    Pool => "pool.wgsl",
    Conv => "conv.wgsl",
    Positions => "positions.wgsl",
    Attention => "attention.wgsl",
}

/// One entry point: where it is, how many storage buffers it binds (1..=`buffers`) and
/// how many invocations its workgroup has (its `@workgroup_size`, checked by the
/// validation test), so that a launch's grid follows from the kernel alone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Kernel {
    pub shader: Shader,
    pub entry: &'static str,
    pub buffers: usize,
    pub group: u32,
}

/// Invocations per workgroup of the one-dimensional kernels (common.wgsl's `WG`).
pub(crate) const WG: u32 = 256;
/// Invocations per workgroup of the column reductions (common.wgsl's `COLUMN_WG`).
const COLUMN_WG: u32 = 64;
/// The 8 × 8 tiles of `matmul`.
const TILE_WG: u32 = 64;

/// Words of the parameter block every launch gets (bases first, then the kernel's own).
pub(crate) const PARAM_WORDS: usize = 32;

macro_rules! kernels {
    ($($name:ident = $shader:ident :: $entry:literal, $buffers:literal, $group:ident;)*) => {
        $(pub(crate) const $name: Kernel = Kernel {
            shader: Shader::$shader,
            entry: $entry,
            buffers: $buffers,
            group: $group,
        };)*
        /// Every kernel, for the validation test.
        #[cfg(test)]
        pub(crate) const ALL: &[&Kernel] = &[$(&$name),*];
    };
}

kernels! {
    MATMUL = Gemm::"matmul", 3, TILE_WG;
    BINARY = Elementwise::"binary", 3, WG;
    ACTIVATION_FORWARD = Elementwise::"activation_forward", 2, WG;
    ACTIVATION_BACKWARD = Elementwise::"activation_backward", 3, WG;
    SUM_TO_SHAPE = Elementwise::"sum_to_shape", 2, COLUMN_WG;
    FILL = Elementwise::"fill", 1, WG;
    SCATTER_TIME = Elementwise::"scatter_time", 2, WG;
    COPY = Elementwise::"copy", 2, WG;
    COPY_ROWS_AT_STEP = Elementwise::"copy_rows_at_step", 3, WG;
    LSTM_FORWARD_CELL = Lstm::"lstm_forward_cell", 8, WG;
    LSTM_BACKWARD_CELL = Lstm::"lstm_backward_cell", 8, WG;
    GRU_FORWARD_CELL = Gru::"gru_forward_cell", 8, WG;
    GRU_BACKWARD_CELL = Gru::"gru_backward_cell", 8, WG;
    BATCHNORM_FORWARD_VAR = Batchnorm::"batchnorm_forward_var", 3, COLUMN_WG;
    BATCHNORM_FORWARD = Batchnorm::"batchnorm_forward", 6, WG;
    BATCHNORM_BACKWARD_SUMS = Batchnorm::"batchnorm_backward_sums", 6, COLUMN_WG;
    BATCHNORM_BACKWARD = Batchnorm::"batchnorm_backward", 8, WG;
    BATCHNORM_STATS_UPDATE = Batchnorm::"batchnorm_stats_update", 4, WG;
    LAYERNORM_FORWARD = Layernorm::"layernorm_forward", 6, WG;
    LAYERNORM_BACKWARD = Layernorm::"layernorm_backward", 6, WG;
    LAYERNORM_BACKWARD_SUMS = Layernorm::"layernorm_backward_sums", 6, COLUMN_WG;
    SOFTMAX_CROSS_ENTROPY_FORWARD = Softmax::"softmax_cross_entropy_forward", 4, WG;
    SOFTMAX_CROSS_ENTROPY_BACKWARD = Softmax::"softmax_cross_entropy_backward", 4, WG;
    MSE_LOSS_FORWARD = Mse::"mse_loss_forward", 3, WG;
    MSE_LOSS_BACKWARD = Mse::"mse_loss_backward", 4, WG;
    ADAM_UPDATE = Adam::"adam_update", 5, WG;
    GATHER = Gather::"gather", 3, WG;
    SCATTER_ADD = Gather::"scatter_add", 3, COLUMN_WG;
    SGD_UPDATE = Optim::"sgd_update", 4, WG;
    SUM_SQUARES = Optim::"sum_squares", 2, WG;
    CLIP_GRAD = Optim::"clip_grad", 3, WG;
    DROPOUT = Dropout::"dropout", 3, WG;
    REVERSE_TIME = Bidir::"reverse_time", 3, WG;
    COPY_FEATURES = Bidir::"copy_features", 2, WG;
    MEAN_TIME = Pool::"mean_time", 3, WG;
    MAX_TIME = Pool::"max_time", 4, WG;
    MEAN_TIME_BACKWARD = Pool::"mean_time_backward", 3, WG;
    MAX_TIME_BACKWARD = Pool::"max_time_backward", 3, WG;
    UNFOLD_TIME = Conv::"unfold_time", 3, WG;
    FOLD_TIME = Conv::"fold_time", 3, WG;
    ADD_TIME_ROWS = Positions::"add_time_rows", 3, WG;
    SUM_BATCH_TO_ROWS = Positions::"sum_batch_to_rows", 2, WG;
    SINUSOIDS = Positions::"sinusoids", 1, WG;
    ATTENTION_DOT = Attention::"attention_dot", 3, WG;
    ATTENTION_SOFTMAX = Attention::"attention_softmax", 2, WG;
    ATTENTION_ROWSUM = Attention::"attention_rowsum", 3, WG;
    ATTENTION_MIX = Attention::"attention_mix", 5, WG;
}

#[cfg(test)]
mod tests {
    use super::*;
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    use naga::{AddressSpace, StorageAccess};

    fn module(shader: Shader) -> (naga::Module, naga::valid::ModuleInfo) {
        let src = shader.source();
        let module = naga::front::wgsl::parse_str(src)
            .unwrap_or_else(|e| panic!("{}: {}", shader.file(), e.emit_to_string(src)));
        let info = Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {}",
                    shader.file(),
                    e.emit_to_string_with_path(src, shader.file())
                )
            });
        (module, info)
    }

    #[test]
    fn every_shader_parses_and_validates_with_naga() {
        for &shader in Shader::ALL {
            let (module, _) = module(shader);
            assert!(
                !module.entry_points.is_empty(),
                "{} has no entry point",
                shader.file()
            );
        }
    }

    #[test]
    fn every_kernel_binds_what_the_host_fills() {
        for &shader in Shader::ALL {
            let (module, info) = module(shader);
            let listed: Vec<&Kernel> = ALL.iter().copied().filter(|k| k.shader == shader).collect();
            for (e, ep) in module.entry_points.iter().enumerate() {
                let kernel = listed
                    .iter()
                    .find(|k| k.entry == ep.name)
                    .unwrap_or_else(|| {
                        panic!("{}::{} is not in the table", shader.file(), ep.name)
                    });
                assert_eq!(
                    ep.workgroup_size.iter().product::<u32>(),
                    kernel.group,
                    "{}: workgroup size",
                    ep.name
                );
                let fun = info.get_entry_point(e);
                let mut bindings = Vec::new();
                for (handle, var) in module.global_variables.iter() {
                    if fun[handle].is_empty() {
                        continue;
                    }
                    let Some(b) = &var.binding else { continue };
                    assert_eq!(b.group, 0, "{}", ep.name);
                    match var.space {
                        AddressSpace::Uniform => {
                            assert_eq!(b.binding, 0, "{}", ep.name);
                            let ty = &module.types[var.ty].inner;
                            let bytes = ty.size(module.to_ctx());
                            assert!(
                                bytes as usize <= PARAM_WORDS * 4,
                                "{}: {bytes} bytes",
                                ep.name
                            );
                            // The host writes the bases first, one per storage binding.
                            let naga::TypeInner::Struct { members, .. } = ty else {
                                panic!("{}: parameters must be a struct", ep.name)
                            };
                            let is_base = |i: usize| {
                                members
                                    .get(i)
                                    .and_then(|m| m.name.as_deref())
                                    .is_some_and(|n| n.ends_with("_base"))
                            };
                            for i in 0..=kernel.buffers {
                                assert_eq!(
                                    is_base(i),
                                    i < kernel.buffers,
                                    "{}: member {i}",
                                    ep.name
                                );
                            }
                        }
                        AddressSpace::Storage { access } => {
                            assert!(
                                access.contains(StorageAccess::LOAD | StorageAccess::STORE),
                                "{}: binding {} must be read_write",
                                ep.name,
                                b.binding
                            );
                            bindings.push(b.binding);
                        }
                        other => panic!("{}: unexpected address space {other:?}", ep.name),
                    }
                }
                bindings.sort_unstable();
                let want: Vec<u32> = (1..=kernel.buffers as u32).collect();
                assert_eq!(bindings, want, "{}::{}", shader.file(), ep.name);
            }
            for k in listed {
                assert!(
                    module.entry_points.iter().any(|ep| ep.name == k.entry),
                    "{} has no entry point {}",
                    shader.file(),
                    k.entry
                );
            }
        }
    }
}
