//! Time of one gradient averaging step (the seed network's 1,434,406 parameters by
//! default) across the ranks of a launch, against rsmpi's blocking `MPI_Allreduce` of the
//! same buffer (no time bound, no staging, no bitwise-identical guarantee):
//!
//! ```text
//! cargo build --release -p tensorfit-dist --features mpi --example average_time
//! mpirun --oversubscribe -np 2 target/release/examples/average_time [PARAMS] [REPEATS]
//! ```
//!
//! The two alternate, each after a barrier so every rank starts together; rank 0 prints
//! the median and the range of each over the repeats.
use std::time::{Duration, Instant};

use anyhow::Context;
use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;
use tensorfit_dist::{world, GradientBucket, DEFAULT_COLLECTIVE_TIMEOUT};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let params: usize = args
        .next()
        .map_or(Ok(1_434_406), |a| a.parse())
        .context("PARAMS")?;
    let repeats: usize = args
        .next()
        .map_or(Ok(30), |a| a.parse())
        .context("REPEATS")?;
    let mut comm = world(DEFAULT_COLLECTIVE_TIMEOUT)?;
    // MPI's world as rsmpi sees it (initialised by `world` when launched by mpirun).
    let raw = (comm.size() > 1).then(mpi::topology::SimpleCommunicator::world);
    let mut bucket = GradientBucket::new(vec![params]);
    let mut grads = vec![comm.rank() as f32; params];
    let mut sums = vec![0.0f32; params];
    let (mut ours, mut blocking) = (Vec::new(), Vec::new());
    for i in 0..repeats + 3 {
        comm.barrier()?;
        let start = Instant::now();
        bucket.average(comm.as_mut(), &mut [&mut grads])?;
        let took = start.elapsed();
        comm.barrier()?;
        let start = Instant::now();
        if let Some(raw) = &raw {
            raw.all_reduce_into(&grads[..], &mut sums[..], SystemOperation::sum());
        }
        if i >= 3 {
            ours.push(took);
            blocking.push(start.elapsed());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let summary = |times: &mut Vec<Duration>| {
        times.sort();
        format!(
            "{:.2} ms median ({:.2}–{:.2})",
            ms(times[times.len() / 2]),
            ms(times[0]),
            ms(times[times.len() - 1])
        )
    };
    if comm.rank() == 0 {
        println!(
            "{} ranks, {params} parameters ({:.2} MB bucket), {repeats} repeats: \
             GradientBucket::average {}, blocking MPI_Allreduce {}",
            comm.size(),
            bucket.bytes() as f64 / 1e6,
            summary(&mut ours),
            summary(&mut blocking),
        );
    }
    Ok(())
}
