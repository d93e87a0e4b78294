//! cuBLAS: one handle on the backend's stream, with a workspace the backend allocates and
//! counts, and the row-major GEMM every op uses.
//!
//! tensorfit's tensors are row-major, cuBLAS is column-major. A row-major `[r, c]` matrix
//! is, byte for byte, the column-major `[c, r]` matrix — its transpose — so the row-major
//! product `C = op(A)·op(B)` is computed as the column-major product
//! `Cᵀ = op(B)ᵀ·op(A)ᵀ`: the operands are swapped and nothing is copied or transposed.
//!
//! FP32 GEMMs run in cuBLAS's default math mode, which does not round to TF32, so results
//! are comparable with the CPU reference (TF32 would be faster on Ampere and newer GPUs but
//! changes products at the 1e-3 level). No op of the current set is a batch of independent
//! GEMMs (the per-step GEMMs of an LSTM depend on each other, and the weight gradients are
//! already single GEMMs over all steps), so there is no strided-batched call yet.
//!
//! One of the crate's few modules allowed `unsafe` (see `lib.rs`); every block states its
//! invariant in a `// SAFETY:` line.
use std::ffi::c_int;

use cudarc::cublas::result::{self as blas, CublasError};
use cudarc::cublas::sys;

use crate::driver::{DevPtr, Device, DeviceMemory};

/// Every cuBLAS entry point this crate calls.
const SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetWorkspace_v2",
    "cublasSgemm_v2",
];

/// Checks that cuBLAS can be loaded and has every entry point used here.
pub fn check() -> Result<(), String> {
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names; no preconditions.
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "no cuBLAS library found (libcublas.so): install the CUDA toolkit's \
                    cuBLAS or put its lib folder on LD_LIBRARY_PATH"
                .into(),
        );
    }
    // SAFETY: the library is present, so `culib` opens it instead of panicking; `get`
    // only looks symbols up.
    let lib = unsafe { sys::culib() };
    for name in SYMBOLS {
        // SAFETY: a lookup only; the pointer is dropped unused.
        if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
            return Err(format!(
                "the cuBLAS library is too old for the bindings (no `{name}`)"
            ));
        }
    }
    Ok(())
}

/// A cuBLAS handle bound to the device's stream, with its workspace.
#[derive(Debug)]
pub struct Blas {
    handle: sys::cublasHandle_t,
    // Freed after the handle is destroyed (fields drop after `Drop::drop`).
    _workspace: DeviceMemory,
}

impl Blas {
    /// A handle on `device`'s stream using a workspace of `workspace_bytes`, allocated
    /// here so that it is counted in the backend's overhead rather than allocated by
    /// cuBLAS on first use. Call only after [`check`] succeeded.
    pub fn new(device: &Device, workspace_bytes: usize) -> Result<Blas, String> {
        device.bind().map_err(crate::driver::describe)?;
        let workspace = device.alloc_zeroed(workspace_bytes).map_err(|e| {
            format!(
                "cannot allocate the cuBLAS workspace: {}",
                crate::driver::describe(e)
            )
        })?;
        let handle =
            blas::create_handle().map_err(|e| format!("cannot create a cuBLAS handle: {e:?}"))?;
        let blas = Blas {
            handle,
            _workspace: workspace,
        };
        // SAFETY: `handle` is alive; the stream belongs to the current context and lives
        // as long as the device, which outlives this handle (the backend drops it first).
        unsafe { blas::set_stream(handle, device.stream() as sys::cudaStream_t) }
            .map_err(|e| format!("cublasSetStream failed: {e:?}"))?;
        // SAFETY: the workspace is device memory of `workspace_bytes` that stays allocated
        // until after the handle is destroyed (field order, see the struct).
        unsafe {
            sys::cublasSetWorkspace_v2(
                handle,
                blas._workspace.ptr().0 as *mut std::ffi::c_void,
                workspace_bytes,
            )
        }
        .result()
        .map_err(|e| format!("cublasSetWorkspace failed: {e:?}"))?;
        Ok(blas)
    }

    /// Row-major `c = alpha·op(a)·op(b) + beta·c`: `a` is stored `[m, k]` (`[k, m]` if
    /// `trans_a`), `b` is stored `[k, n]` (`[n, k]` if `trans_b`), `c` is `[m, n]`. All
    /// of `m`, `n`, `k` are at least 1 and fit in an `i32` (checked by the caller, which
    /// also checked that the three ranges lie in live buffers and `c` overlaps neither).
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm(
        &self,
        trans_a: bool,
        trans_b: bool,
        (m, n, k): (i32, i32, i32),
        alpha: f32,
        a: DevPtr,
        b: DevPtr,
        beta: f32,
        c: DevPtr,
    ) -> Result<(), CublasError> {
        let op = |t: bool| {
            if t {
                sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let lda: c_int = if trans_a { m } else { k };
        let ldb: c_int = if trans_b { k } else { n };
        // SAFETY: column-major Cᵀ[n, m] = op(B)ᵀ[n, k] · op(A)ᵀ[k, m] (see the module
        // documentation) reads exactly the m·k and k·n elements of `a` and `b` and writes
        // the m·n of `c`, ranges the caller checked; alpha and beta are host values that
        // outlive the call (cuBLAS reads them before returning in host pointer mode).
        unsafe {
            blas::sgemm(
                self.handle,
                op(trans_b),
                op(trans_a),
                n,
                m,
                k,
                &alpha,
                b.0 as *const f32,
                ldb,
                a.0 as *const f32,
                lda,
                &beta,
                c.0 as *mut f32,
                n,
            )
        }
    }
}

// SAFETY: a cuBLAS handle may be used from any thread, one at a time (cuBLAS's rule);
// Blas is Send but not Sync, so ownership guarantees that.
unsafe impl Send for Blas {}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: the handle is destroyed exactly once; the backend drops it while the
        // device (context and stream) is still alive. An error only leaks the handle.
        let _ = unsafe { blas::destroy_handle(self.handle) };
    }
}
