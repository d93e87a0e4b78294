//! Ctrl-C (SIGINT), SIGTERM (`kill`, batch schedulers, container stops) and SIGHUP (a
//! closed terminal) stop training *between* steps: the step in progress finishes, the
//! checkpoint is written, and the process exits with 128 + the signal's number. A second
//! signal stops the process at once (the checkpoint on disk is then the previous one,
//! intact: writes are atomic).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use anyhow::Result;

/// A signal that asked the run to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    pub fn name(self) -> String {
        match self.0 {
            1 => "SIGHUP".into(),
            2 => "SIGINT".into(),
            15 => "SIGTERM".into(),
            n => format!("signal {n}"),
        }
    }

    /// The signal of number `n` (agreed on by the ranks of a data-parallel run).
    pub fn from_number(n: i32) -> Signal {
        Signal(n)
    }

    /// Its number, as the ranks exchange it.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The shell's status for a process this signal ended.
    pub fn exit_code(self) -> i32 {
        128 + self.0
    }
}

/// The stop requests received so far (none until one arrives).
#[derive(Debug)]
pub struct Interrupts {
    received: Arc<AtomicI32>,
}

impl Interrupts {
    /// Starts listening for SIGINT, SIGTERM and SIGHUP (on Unix; elsewhere the default
    /// handling stays).
    pub fn install() -> Result<Interrupts> {
        let received = Arc::new(AtomicI32::new(0));
        #[cfg(unix)]
        {
            use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
            let seen = Arc::clone(&received);
            std::thread::spawn(move || {
                for sig in signals.forever() {
                    let s = Signal(sig);
                    if seen.swap(sig, Ordering::SeqCst) != 0 {
                        errln!("\n{}: stopping now", s.name());
                        std::process::exit(s.exit_code());
                    }
                    errln!(
                        "\n{}: finishing the step in progress and writing the checkpoint ({} again stops at once)",
                        s.name(),
                        s.name()
                    );
                }
            });
        }
        Ok(Interrupts { received })
    }

    /// The first signal received, if any.
    pub fn received(&self) -> Option<Signal> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Signal(n)),
        }
    }
}
