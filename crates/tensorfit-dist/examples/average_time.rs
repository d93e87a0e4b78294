//! Time of one gradient averaging step (the seed network's 1,434,406 parameters by
//! default) across the ranks of a launch:
//!
//! ```text
//! cargo build --release -p tensorfit-dist --features mpi --example average_time
//! mpirun --oversubscribe -np 2 target/release/examples/average_time [PARAMS] [REPEATS]
//! ```
//!
//! Rank 0 prints the median and the spread of [`GradientBucket::average`] over the
//! repeats, after a barrier before each so every rank starts together.
use std::time::{Duration, Instant};

use anyhow::Context;
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
    let mut bucket = GradientBucket::new(vec![params]);
    let mut grads = vec![comm.rank() as f32; params];
    let mut times = Vec::with_capacity(repeats);
    for i in 0..repeats + 3 {
        comm.barrier()?;
        let start = Instant::now();
        bucket.average(comm.as_mut(), &mut [&mut grads])?;
        if i >= 3 {
            times.push(start.elapsed());
        }
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if comm.rank() == 0 {
        println!(
            "{} ranks, {params} parameters ({:.2} MB bucket): average {:.2} ms median \
             (min {:.2}, max {:.2}) over {repeats} repeats",
            comm.size(),
            bucket.bytes() as f64 / 1e6,
            ms(times[times.len() / 2]),
            ms(times[0]),
            ms(times[times.len() - 1]),
        );
    }
    Ok(())
}
