//! Flush-to-zero for the threads that run the CPU kernels: the only `unsafe` of this
//! crate, fenced here.
//!
//! Why: gradients carried back through many LSTM steps decay into the subnormal range
//! (below `f32::MIN_POSITIVE`), and on many x86 processors every arithmetic instruction
//! that reads or produces a subnormal takes a microcode assist worth a hundred cycles or
//! more. A training step then slows by an order of magnitude once sequences are long
//! (issue 12; PyTorch has the same cliff and removes it with
//! `torch.set_flush_denormal(True)`). Subnormal values are far below anything that
//! changes a weight update, so the kernels treat them as zero: the threads of the kernel
//! pool (see `threads.rs`) run with
//! - x86-64: MXCSR's FTZ (results that would be subnormal become zero) and DAZ
//!   (subnormal inputs read as zero) bits set; SSE, AVX and AVX-512 all obey MXCSR;
//! - aarch64: FPCR's FZ bit, which does both for scalar and vector (AdvSIMD) arithmetic.
//!
//! Elsewhere [`flush_to_zero`] does nothing and returns `false`, and the kernels run with
//! IEEE subnormals (correct, possibly slow).
//!
//! Contract: [`flush_to_zero`] changes the floating-point mode of the *calling thread*
//! for the rest of its life. It is called only by the kernel pool's start handler, on
//! threads that the pool owns and that run nothing but kernels, so no other code sees the
//! changed mode. [`Flushed`] sets the same mode on the caller's thread for the duration
//! of one kernel run there (`threads::run_inline`) and puts the thread's own mode back
//! when it is dropped (a panic too), so no code but that kernel sees it.

/// Sets flush-to-zero (and, on x86-64, denormals-are-zero) on the calling thread.
/// Returns whether this target supports it (and it is now set).
pub fn flush_to_zero() -> bool {
    imp::flush_to_zero()
}

/// Whether the calling thread flushes subnormals to zero (always `false` on targets
/// [`flush_to_zero`] does not support).
pub fn flushing_to_zero() -> bool {
    imp::flushing_to_zero()
}

/// Subnormals flushed to zero on this thread while it lives: the mode the thread had is
/// put back when it is dropped.
#[derive(Debug)]
pub struct Flushed {
    saved: imp::Mode,
}

impl Flushed {
    /// Flushes subnormals on this thread (nothing on targets without the mode).
    pub fn new() -> Self {
        let saved = imp::mode();
        imp::flush_to_zero();
        Flushed { saved }
    }
}

impl Default for Flushed {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Flushed {
    fn drop(&mut self) {
        imp::set_mode(self.saved);
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::asm;

    /// MXCSR bit 15: results that would be subnormal are flushed to zero.
    const FTZ: u32 = 1 << 15;
    /// MXCSR bit 6: subnormal operands are read as zero.
    const DAZ: u32 = 1 << 6;

    fn read() -> u32 {
        let mut csr: u32 = 0;
        // SAFETY: `stmxcsr` stores the 32-bit MXCSR register to the address given, which
        // points at `csr`, a live, aligned, writable u32 on this stack frame; it touches
        // no other memory and no flags. MXCSR exists on every x86-64 processor.
        #[allow(unsafe_code)]
        unsafe {
            asm!("stmxcsr [{p}]", p = in(reg) &mut csr, options(nostack, preserves_flags));
        }
        csr
    }

    pub fn flush_to_zero() -> bool {
        let csr = read() | FTZ | DAZ;
        // SAFETY: `ldmxcsr` loads MXCSR from `csr`, a live, aligned u32; the value is the
        // register's own with two mode bits added (DAZ is supported by every x86-64
        // processor: SSE2 is part of the architecture), so no reserved bit is set and no
        // exception is unmasked. Rust assumes the default floating-point environment, so
        // the changed mode is confined to the kernel pool's threads (module contract):
        // its only effect is that subnormal values there read and compute as zero, which
        // no kernel relies on and no memory access depends on.
        #[allow(unsafe_code)]
        unsafe {
            asm!("ldmxcsr [{p}]", p = in(reg) &csr, options(nostack, preserves_flags, readonly));
        }
        flushing_to_zero()
    }

    pub fn flushing_to_zero() -> bool {
        read() & (FTZ | DAZ) == FTZ | DAZ
    }

    /// The thread's floating-point mode: MXCSR.
    pub type Mode = u32;

    pub fn mode() -> Mode {
        read()
    }

    /// Puts back a mode [`mode`] read on this thread.
    pub fn set_mode(csr: Mode) {
        // SAFETY: `ldmxcsr` loads MXCSR from `csr`, a live, aligned u32 that `stmxcsr`
        // stored from this thread's own register earlier (`Flushed`), so every bit is one
        // the processor accepted then; only the mode of this thread changes, back to what
        // it was.
        #[allow(unsafe_code)]
        unsafe {
            asm!("ldmxcsr [{p}]", p = in(reg) &csr, options(nostack, preserves_flags, readonly));
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod imp {
    use std::arch::asm;

    /// FPCR bit 24 (FZ): subnormal operands and results are flushed to zero.
    const FZ: u64 = 1 << 24;

    fn read() -> u64 {
        let fpcr: u64;
        // SAFETY: reading FPCR into a register has no side effect and touches no memory.
        #[allow(unsafe_code)]
        unsafe {
            asm!("mrs {0}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
        }
        fpcr
    }

    pub fn flush_to_zero() -> bool {
        let fpcr = read() | FZ;
        // SAFETY: writes FPCR with one mode bit added to its own value (no trap enabled,
        // rounding unchanged). As on x86-64, the mode is confined to the kernel pool's
        // threads (module contract) and only turns subnormal values into zero there.
        #[allow(unsafe_code)]
        unsafe {
            asm!("msr fpcr, {0}", in(reg) fpcr, options(nomem, nostack, preserves_flags));
        }
        flushing_to_zero()
    }

    pub fn flushing_to_zero() -> bool {
        read() & FZ == FZ
    }

    /// The thread's floating-point mode: FPCR.
    pub type Mode = u64;

    pub fn mode() -> Mode {
        read()
    }

    /// Puts back a mode [`mode`] read on this thread.
    pub fn set_mode(fpcr: Mode) {
        // SAFETY: writes FPCR with the value read from it on this thread earlier
        // (`Flushed`): the thread's own mode, put back.
        #[allow(unsafe_code)]
        unsafe {
            asm!("msr fpcr, {0}", in(reg) fpcr, options(nomem, nostack, preserves_flags));
        }
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod imp {
    pub fn flush_to_zero() -> bool {
        false
    }

    pub fn flushing_to_zero() -> bool {
        false
    }

    /// No mode to keep on this target.
    pub type Mode = ();

    pub fn mode() -> Mode {}

    pub fn set_mode(_: Mode) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest positive normal f32 halved: a subnormal.
    fn subnormal() -> f32 {
        std::hint::black_box(f32::MIN_POSITIVE / 2.0)
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn a_thread_that_flushes_turns_subnormals_into_zero_and_others_do_not() {
        // A fresh thread, so the test thread's own mode is left alone.
        let (flushed, product, sum) = std::thread::spawn(|| {
            let ok = flush_to_zero();
            let tiny = subnormal();
            // A subnormal operand reads as zero (DAZ / FZ) ...
            let sum = std::hint::black_box(tiny) + 0.0;
            // ... and a product that would be subnormal is zero (FTZ / FZ).
            let product = std::hint::black_box(1e-20f32) * std::hint::black_box(1e-20f32);
            (ok && flushing_to_zero(), product, sum)
        })
        .join()
        .unwrap_or((false, 1.0, 1.0));
        assert!(flushed, "flush_to_zero did not set the mode");
        assert_eq!(product, 0.0, "a subnormal product was not flushed");
        assert_eq!(sum, 0.0, "a subnormal operand was not read as zero");
        // This thread never asked: IEEE subnormals as usual.
        assert!(!flushing_to_zero());
        assert!(subnormal() > 0.0);
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn a_flushed_scope_flushes_and_then_puts_the_threads_mode_back() {
        let (inside, after, product) = std::thread::spawn(|| {
            let (inside, product) = {
                let _flushed = Flushed::new();
                let p = std::hint::black_box(1e-20f32) * std::hint::black_box(1e-20f32);
                (flushing_to_zero(), p)
            };
            (inside, flushing_to_zero(), product)
        })
        .join()
        .unwrap_or((false, true, 1.0));
        assert!(inside, "not flushing inside the scope");
        assert_eq!(product, 0.0, "a subnormal product was not flushed");
        assert!(!after, "the thread's mode was not put back");
    }
}
