//! The threads that run the CPU kernels: one process-wide rayon pool whose threads flush
//! subnormal floats to zero (see `denormals.rs` for why).
//!
//! Every kernel large enough to split runs inside [`kernel_pool`]'s `install`, so its
//! serial parts and all of its parallel parts (`par_iter`, [`available`]) run on these
//! threads and nowhere else; the caller's thread only waits. The pool is built once per process
//! and shared by every [`crate::CpuBackend`], so backends made and dropped (tests, a
//! session's fallback) do not multiply threads. Its size follows rayon's rule
//! (`RAYON_NUM_THREADS`, else one thread per logical CPU), as the global pool's does.
//! Opening the CPU device (its `info` names the thread count) builds the pool, so its
//! threads exist before anything is planned.
//!
//! A kernel too small to split, or one that runs on one thread whatever its size
//! ([`Work`], [`runs_inline`]), runs instead on the caller's thread,
//! with subnormals flushed for its duration (`denormals::Flushed`): handing it to the
//! pool and waiting for it costs two thread wake-ups, tens of microseconds on a busy
//! machine, more than such a kernel takes (a stream step of the seed network is 18 ops,
//! most of them a few hundred values). While it runs, [`available`] is 1, and every
//! parallel loop of the kernels asks it first, so nothing reaches rayon's global pool.
//! A kernel's sums do not depend on how many threads share it, so the results are the
//! same bits either way.

use std::cell::Cell;
use std::sync::OnceLock;

use rayon::{ThreadPool, ThreadPoolBuilder};
use tensorfit_core::args::{
    Args, GruBackwardInputs, GruForwardInputs, LstmBackwardInputs, LstmForwardInputs,
};
use tensorfit_core::{Op, RecurrentDims, Result, Shape};

use crate::{backend_error, denormals};

static POOL: OnceLock<std::result::Result<ThreadPool, String>> = OnceLock::new();

/// The kernel pool, built on first use. An error if the operating system refused to
/// start its threads (then every kernel call reports it).
pub fn kernel_pool() -> Result<&'static ThreadPool> {
    POOL.get_or_init(|| {
        ThreadPoolBuilder::new()
            .thread_name(|i| format!("tensorfit-cpu-{i}"))
            .start_handler(|_| {
                denormals::flush_to_zero();
            })
            .build()
            .inspect(|pool| {
                // Each thread takes its allocator arena now (glibc gives a thread its own
                // on its first allocation, reserving 64 MiB of address space), so that the
                // process's memory read before a plan (`ulimit -v` counts its address
                // space) already holds them.
                pool.broadcast(|_| drop(std::hint::black_box(Box::new(0u64))));
            })
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| backend_error(format!("cannot start the kernel threads: {e}")))
}

thread_local! {
    /// Whether this thread is running a kernel inline (see [`run_inline`]).
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Below this many multiply-adds a product (a GEMM, a recurrent layer) runs on the
/// caller's thread where the CPU has AVX-512: `gemm_fast` splits no product below it
/// either, so handing it to the pool buys nothing (without AVX-512, below the reference
/// GEMM's own threshold, `gemm::PARALLEL_MIN_MULADDS`). Passes over tensors run there
/// below `PARALLEL_MIN_ELEMENTS` values per tensor, where their kernels do not split.
pub const INLINE_MAX_MULADDS: usize = 1 << 20;

/// The size of one kernel call, as [`runs_inline`] weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A product: its multiply-adds.
    MulAdds(usize),
    /// A pass over tensors: the values of the largest.
    Values(usize),
    /// A call its kernel runs on one thread whatever its size: an inference forward of a
    /// recurrent layer on the fast path whose batch is split neither by rows nor by
    /// columns (its time loop is one part, and its packed weights are kept from the call
    /// before: `kernels::packs`).
    OneThread,
}

impl Work {
    /// The work of `op` on tensors of the shapes `inputs` and `outputs`.
    pub fn of(op: &Op, inputs: Vec<&Shape>, outputs: &[&Shape]) -> Work {
        /// Per row of a recurrent layer, forward: `x · w_ihᵀ` (dense input) and
        /// `h · w_hhᵀ`; backward (`passes` 2) does about twice that. `inference`: a
        /// forward that keeps nothing for a backward (which, too small to split by rows,
        /// may split by columns: `recurrent/columns.rs`).
        fn recurrent(d: &impl RecurrentDims, passes: usize, inference: bool) -> Work {
            use crate::kernels::recurrent::{columns, fast};
            let ((steps, batch, hidden), (input, tokens)) = (d.sizes(), d.input());
            let gates = d.gate_width() / hidden.max(1);
            let pass = columns::Pass::forward(!inference);
            let one_part = !fast::splits((steps, batch), hidden)
                && columns::shares_on_pool((steps, batch), (hidden, gates), pass) < 2;
            if inference && one_part && crate::kernels::gemm_fast::simd().is_some() {
                return Work::OneThread;
            }
            let per_row = if tokens { hidden } else { input + hidden };
            Work::MulAdds(d.rows() * per_row * d.gate_width() * passes)
        }
        let largest = inputs.iter().chain(outputs).map(|s| s.numel()).max();
        let values = |_: String| Work::Values(largest.unwrap_or(0));
        match op {
            Op::MatMul { trans_a, .. } if inputs.len() == 2 && outputs.len() == 1 => {
                // `a` as the kernel reads it: `[rows, last]`, `k` its columns (or rows,
                // transposed); `c` has `m · n` values, each a sum of `k` products.
                let a = inputs[0];
                let last = a.dims().last().copied().unwrap_or(1).max(1);
                let k = if *trans_a { a.numel() / last } else { last };
                Work::MulAdds(outputs[0].numel() * k)
            }
            Op::LstmForward { keep_for_backward } => LstmForwardInputs::from_vec("lstm", inputs)
                .map_or_else(values, |i| recurrent(&i.dims(), 1, !keep_for_backward)),
            Op::GruForward { keep_for_backward } => GruForwardInputs::from_vec("gru", inputs)
                .map_or_else(values, |i| recurrent(&i.dims(), 1, !keep_for_backward)),
            Op::LstmBackward { .. } => LstmBackwardInputs::from_vec("lstm", inputs)
                .map_or_else(values, |i| recurrent(&i.dims(), 2, false)),
            Op::GruBackward { .. } => GruBackwardInputs::from_vec("gru", inputs)
                .map_or_else(values, |i| recurrent(&i.dims(), 2, false)),
            _ => values(String::new()),
        }
    }
}

/// Whether a kernel call of `work` runs on the caller's thread (see the module's
/// comment).
pub fn runs_inline(work: Work) -> bool {
    match work {
        Work::MulAdds(n) => match crate::kernels::gemm_fast::simd() {
            Some(_) => n < INLINE_MAX_MULADDS,
            None => n < crate::kernels::gemm::PARALLEL_MIN_MULADDS,
        },
        Work::Values(n) => n < crate::kernels::PARALLEL_MIN_ELEMENTS,
        Work::OneThread => true,
    }
}

/// Runs `f` on this thread as a kernel: subnormals flushed to zero, and [`available`]
/// 1, so every parallel loop inside runs serially here.
pub fn run_inline<R>(f: impl FnOnce() -> R) -> R {
    /// Clears the flag however `f` ends (a panic too).
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            INLINE.set(self.0);
        }
    }
    let _flushed = denormals::Flushed::new();
    let _reset = Reset(INLINE.replace(true));
    f()
}

/// Whether this thread is running a kernel inline.
pub fn inline() -> bool {
    INLINE.get()
}

/// The threads the kernel now running may split its work across: the pool's, or 1 when
/// it runs inline. Kernels ask this, never `rayon::current_num_threads` (which, on a
/// thread outside every pool, would start rayon's global pool).
pub fn available() -> usize {
    if inline() {
        1
    } else {
        rayon::current_num_threads()
    }
}

/// `f` on every item: on the pool's threads, or in turn on this one when the kernel runs
/// inline or there is only one.
pub fn try_for_each<T: Send, E: Send>(
    items: Vec<T>,
    f: impl Fn(T) -> std::result::Result<(), E> + Sync + Send,
) -> std::result::Result<(), E> {
    use rayon::prelude::*;
    if items.len() <= 1 || inline() {
        items.into_iter().try_for_each(f)
    } else {
        items.into_par_iter().try_for_each(f)
    }
}

/// [`try_for_each`] for an `f` that cannot fail.
pub fn for_each<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync + Send) {
    let _ = try_for_each(items, |t| {
        f(t);
        Ok::<(), std::convert::Infallible>(())
    });
}

/// The number of threads kernels run on (1 if the pool cannot be built).
pub fn kernel_threads() -> usize {
    kernel_pool().map_or(1, ThreadPool::current_num_threads)
}

/// Whether the kernel threads flush subnormals to zero on this target.
pub fn kernels_flush_to_zero() -> bool {
    kernel_pool().is_ok_and(|pool| {
        pool.broadcast(|_| denormals::flushing_to_zero())
            .iter()
            .all(|&f| f)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an LSTM forward of `steps × batch` rows (the seed network's first layer,
    /// 152 → 250) runs on the caller's thread.
    fn lstm_inline(steps: usize, batch: usize, keep_for_backward: bool) -> bool {
        let shapes: Vec<Shape> = [
            &[steps, batch, 152][..],
            &[batch, 250],
            &[batch, 250],
            &[1000, 152],
            &[1000, 250],
            &[1000],
            &[1000],
        ]
        .iter()
        .map(|d| Shape::from(*d))
        .collect();
        let op = Op::LstmForward { keep_for_backward };
        runs_inline(Work::of(&op, shapes.iter().collect(), &[]))
    }

    #[test]
    fn small_calls_run_inline_and_large_ones_on_the_pool() {
        let fast = crate::kernels::gemm_fast::simd().is_some();
        // A stream step of one sequence (402 K multiply-adds), and of 16 on the fast path
        // (one part, its weights kept packed; one step is never split by columns).
        assert!(lstm_inline(1, 1, false));
        assert_eq!(lstm_inline(1, 16, false), fast);
        // 16 sequences of 200 steps, on more than one thread, are split (by rows, 8 a
        // thread on two: `recurrent/fast.rs`).
        assert_eq!(lstm_inline(200, 16, false), fast && kernel_threads() < 2);
        // A batch of 100 is split; a training forward packs afresh and may split.
        assert!(!lstm_inline(200, 100, false));
        assert!(!lstm_inline(50, 32, true));
        assert!(!lstm_inline(50, 16, true));
        // Passes by their largest tensor.
        let small = Shape::from([250]);
        let large = Shape::from([crate::kernels::PARALLEL_MIN_ELEMENTS]);
        assert!(runs_inline(Work::of(&Op::Copy, vec![&small], &[&small])));
        assert!(!runs_inline(Work::of(&Op::Copy, vec![&large], &[&large])));
        // The head's product at batch 1: 250 · 100 multiply-adds.
        let (x, w, y) = (
            Shape::from([1, 250]),
            Shape::from([100, 250]),
            Shape::from([1, 100]),
        );
        let matmul = Op::MatMul {
            trans_a: false,
            trans_b: true,
        };
        assert_eq!(
            Work::of(&matmul, vec![&x, &w], &[&y]),
            Work::MulAdds(25_000)
        );
    }

    #[test]
    fn an_inline_run_is_one_thread_with_subnormals_flushed_and_then_not() {
        std::thread::spawn(|| {
            let inside = run_inline(|| (available(), inline(), denormals::flushing_to_zero()));
            assert_eq!(
                inside,
                (
                    1,
                    true,
                    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
                )
            );
            assert!(!inline());
            assert!(!denormals::flushing_to_zero());
        })
        .join()
        .unwrap();
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn every_kernel_thread_flushes_subnormals_to_zero() {
        assert!(kernels_flush_to_zero());
        let pool = kernel_pool().unwrap();
        let products =
            pool.broadcast(|_| std::hint::black_box(1e-20f32) * std::hint::black_box(1e-20f32));
        assert_eq!(products, vec![0.0; pool.current_num_threads()]);
    }
}
