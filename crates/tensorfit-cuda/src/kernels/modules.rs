//! The kernel sources as modules of a context: [`compile_all`] compiles every source of
//! `sources.rs` with NVRTC (once per architecture in a process), [`Kernels::load`] loads
//! them into a context, and [`entry_params`] reads each kernel's parameter list from its
//! PTX, against which every launch is checked (kept out of `mod.rs` so that file stays
//! small).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tensorfit_core::Result;

use super::SOURCES;
use crate::backend_error;
use crate::driver::{Arg, Device, Function};

/// Compiles every source for `compute_{arch}` (in parallel: NVRTC is thread-safe), or
/// returns the PTX compiled earlier in this process for the same architecture.
pub fn compile_all(arch: i32) -> std::result::Result<Arc<Vec<String>>, String> {
    static CACHE: OnceLock<Mutex<HashMap<i32, Arc<Vec<String>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(ptx) = cache.lock().ok().and_then(|c| c.get(&arch).cloned()) {
        return Ok(ptx);
    }
    let results: Vec<std::result::Result<String, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = SOURCES
            .iter()
            .map(|src| {
                s.spawn(move || crate::nvrtc::compile(&src.translation_unit(), src.file, arch))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("an NVRTC compile thread panicked".to_string()))
            })
            .collect()
    });
    let ptx = Arc::new(
        results
            .into_iter()
            .collect::<std::result::Result<Vec<_>, _>>()?,
    );
    if let Ok(mut c) = cache.lock() {
        c.insert(arch, ptx.clone());
    }
    Ok(ptx)
}

/// The kind of one kernel parameter, as the PTX declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// `.u64`/`.s64`/`.b64`: a pointer or an `i64`.
    Bits64,
    /// `.u32`/`.s32`/`.b32`: an `int`.
    Int32,
    /// `.f32`: a `float`.
    Float32,
}

/// The parameter list of kernel `name` read from its PTX (`.entry name( .param .u64 ..,
/// ...)`), or `None` if the PTX has no such entry or a parameter of another type.
///
/// Why: a launch passes its arguments as untyped pointers, so an argument list that does
/// not match the kernel would read garbage on the GPU. Every launch is checked against
/// this list first and refused with an error if it differs.
pub fn entry_params(ptx: &str, name: &str) -> Option<Vec<ParamKind>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let body = &rest[rest.find('(')? + 1..rest.find(')')?];
    body.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let ty = p.split_whitespace().nth(1)?;
            match ty {
                ".u64" | ".s64" | ".b64" => Some(ParamKind::Bits64),
                ".u32" | ".s32" | ".b32" => Some(ParamKind::Int32),
                ".f32" => Some(ParamKind::Float32),
                _ => None,
            }
        })
        .collect()
}

impl Arg {
    pub(super) fn kind(&self) -> ParamKind {
        match self {
            Arg::Ptr(_) | Arg::I64(_) => ParamKind::Bits64,
            Arg::I32(_) => ParamKind::Int32,
            Arg::F32(_) => ParamKind::Float32,
        }
    }
}

/// A loaded kernel and its parameter list.
#[derive(Debug, Clone)]
pub(super) struct Loaded {
    pub(super) function: Function,
    pub(super) params: Vec<ParamKind>,
}

/// Every kernel loaded into one context, by name.
#[derive(Debug)]
pub struct Kernels {
    functions: HashMap<&'static str, Loaded>,
}

impl Kernels {
    /// Loads the PTX of [`compile_all`] into `device` and looks up every kernel.
    pub fn load(device: &mut Device, ptx: &[String]) -> std::result::Result<Kernels, String> {
        let mut functions = HashMap::new();
        for (src, ptx) in SOURCES.iter().zip(ptx) {
            let loaded = device
                .load_module(ptx, src.kernels)
                .map_err(|e| format!("{}: {e}", src.file))?;
            for (name, function) in src.kernels.iter().copied().zip(loaded) {
                let params = entry_params(ptx, name).ok_or_else(|| {
                    format!(
                        "{}: cannot read the parameters of `{name}` from its PTX",
                        src.file
                    )
                })?;
                functions.insert(name, Loaded { function, params });
            }
        }
        Ok(Kernels { functions })
    }

    pub(super) fn get(&self, name: &str) -> Result<&Loaded> {
        self.functions
            .get(name)
            .ok_or_else(|| backend_error(format!("kernel `{name}` is not loaded")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_params_reads_nvrtc_ptx() {
        let ptx = ".visible .entry lstm_forward_cell(\n\t.param .u64 .ptr .align 1 lstm_forward_cell_param_0,\n\t.param .u32 lstm_forward_cell_param_1,\n\t.param .f32 lstm_forward_cell_param_2\n)\n{\n}";
        assert_eq!(
            entry_params(ptx, "lstm_forward_cell"),
            Some(vec![
                ParamKind::Bits64,
                ParamKind::Int32,
                ParamKind::Float32
            ])
        );
        assert_eq!(entry_params(ptx, "lstm_backward_cell"), None);
    }
}
