//! Launching MPI ranks from a test: `mpirun --oversubscribe` on PATH, bounded in time so
//! that a regression fails instead of hanging the suite, and skipped (saying why, or
//! failing when `TENSORFIT_REQUIRE` names `mpi`) where MPI is unavailable.
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a launch printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    /// mpirun's exit status (`None` when a signal ended it).
    pub code: Option<i32>,
    /// The ranks' standard output.
    pub stdout: String,
    /// Standard output, then standard error.
    pub output: String,
    pub took: Duration,
}

/// `mpirun` on PATH.
pub fn mpirun() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("mpirun"))
        .find(|p| p.is_file())
}

/// Runs `mpirun --oversubscribe line…` (`-np N program args`, or several `:`-separated
/// parts), killing the launch after `limit`. `None`, with the skip printed, when
/// `not_built` says why the calling test's build has no MPI, or mpirun is missing.
pub fn launch(
    test: &str,
    not_built: Option<&str>,
    line: &[String],
    limit: Duration,
) -> Option<Run> {
    Some(spawn(test, not_built, line)?.finish(limit))
}

/// A launch under way (see [`spawn`]).
#[derive(Debug)]
pub struct Launched {
    test: String,
    line: Vec<String>,
    child: Child,
    out: JoinHandle<String>,
    err: JoinHandle<String>,
    start: Instant,
}

/// Starts `mpirun --oversubscribe line…` and returns at once (its output is read in the
/// background); `None` as for [`launch`].
pub fn spawn(test: &str, not_built: Option<&str>, line: &[String]) -> Option<Launched> {
    let why = match (not_built, mpirun()) {
        (Some(why), _) => why,
        (None, None) => "no mpirun on PATH (apt-get install openmpi-bin libopenmpi-dev)",
        (None, Some(mpirun)) => {
            let start = Instant::now();
            let mut child = Command::new(mpirun)
                .arg("--oversubscribe")
                .args(line)
                // Open MPI refuses to start as root without these (containers, CI).
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{test}: mpirun did not start: {e}"));
            let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
                std::thread::spawn(move || {
                    let mut text = String::new();
                    if let Some(mut pipe) = pipe {
                        let _ = pipe.read_to_string(&mut text);
                    }
                    text
                })
            };
            let out = read(child.stdout.take().map(|p| Box::new(p) as _));
            let err = read(child.stderr.take().map(|p| Box::new(p) as _));
            return Some(Launched {
                test: test.to_string(),
                line: line.to_vec(),
                child,
                out,
                err,
                start,
            });
        }
    };
    crate::skip(test, "mpi", why);
    None
}

impl Launched {
    /// mpirun's process id (to signal it as a user's Ctrl-C does).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the launch to end; kills it and fails the test if it runs past `limit`
    /// (counted from its start).
    pub fn finish(mut self, limit: Duration) -> Run {
        let (test, line) = (&self.test, &self.line);
        let status = loop {
            let waited = self.child.try_wait();
            if let Some(status) =
                waited.unwrap_or_else(|e| panic!("{test}: waiting for mpirun: {e}"))
            {
                break status;
            }
            if self.start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{test}: mpirun {line:?} still ran after {limit:?}\n{}{}",
                    self.out.join().unwrap_or_default(),
                    self.err.join().unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self.out.join().unwrap_or_default();
        Run {
            ok: status.success(),
            code: status.code(),
            output: stdout.clone() + &self.err.join().unwrap_or_default(),
            stdout,
            took: self.start.elapsed(),
        }
    }
}
