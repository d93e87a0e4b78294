//! How a process learns whether it is one rank of many: the launcher's environment, and
//! the communicator that goes with it.
use std::time::Duration;

use crate::{Communicator, DistError, Solo};

/// How long a collective may wait for the other ranks before the run is ended (a rank
/// that died or hangs). Long enough for a slow rank's step and its first-step kernel
/// compilation; `--collective-timeout` changes it.
pub const DEFAULT_COLLECTIVE_TIMEOUT: Duration = Duration::from_secs(300);

/// The environment variables launchers set to the number of ranks: Open MPI's `mpirun`,
/// then MPICH's / Slurm's PMI.
const SIZE_VARIABLES: [&str; 2] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];

/// The variables launchers set to a rank's index among the ranks of its own host: Open
/// MPI's, then MPICH's.
const LOCAL_RANK_VARIABLES: [&str; 2] = ["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"];

/// A launcher's word that this process is one of `size` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// The variable that said so.
    pub var: &'static str,
    pub size: usize,
    /// This rank's index among the ranks on its host, when the launcher says: the GPU
    /// ordinal a rank takes when a host's GPUs are shared out (`cuda:{local_rank}`).
    pub local_rank: Option<usize>,
}

/// The launch this process's environment describes, if any.
pub fn launcher() -> Result<Option<Launch>, DistError> {
    launcher_from(|var| std::env::var(var).ok())
}

fn launcher_from(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, DistError> {
    for var in SIZE_VARIABLES {
        if let Some(value) = get(var) {
            let size = value
                .trim()
                .parse()
                .map_err(|_| DistError::BadLauncherVariable {
                    var,
                    value: value.clone(),
                })?;
            let local_rank = LOCAL_RANK_VARIABLES
                .iter()
                .find_map(|var| get(var)?.trim().parse().ok());
            return Ok(Some(Launch {
                var,
                size,
                local_rank,
            }));
        }
    }
    Ok(None)
}

/// The communicator of this process: MPI's world when a launcher started several ranks
/// (built with the `mpi` feature), otherwise [`Solo`]. Call it once, before the training
/// step's first collective; `collective_timeout` bounds every collective's wait.
///
/// Without the `mpi` feature, a launch of several ranks is refused
/// ([`DistError::NotBuiltWithMpi`]) rather than training each rank alone; a launch of
/// one rank runs as [`Solo`].
pub fn world(collective_timeout: Duration) -> Result<Box<dyn Communicator>, DistError> {
    choose(launcher()?, collective_timeout)
}

fn choose(
    launch: Option<Launch>,
    collective_timeout: Duration,
) -> Result<Box<dyn Communicator>, DistError> {
    match launch {
        None => Ok(Box::new(Solo)),
        #[cfg(feature = "mpi")]
        Some(_) => Ok(Box::new(crate::mpi_comm::MpiCommunicator::init(
            collective_timeout,
        )?)),
        #[cfg(not(feature = "mpi"))]
        Some(Launch { var, size, .. }) => {
            let _ = collective_timeout;
            if size > 1 {
                Err(DistError::NotBuiltWithMpi { var, size })
            } else {
                Ok(Box::new(Solo))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |var| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn open_mpi_and_pmi_launches_are_recognised_and_a_plain_start_is_not() {
        assert_eq!(launcher_from(env(&[])).unwrap(), None);
        assert_eq!(
            launcher_from(env(&[
                ("OMPI_COMM_WORLD_SIZE", "3"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "1")
            ]))
            .unwrap(),
            Some(Launch {
                var: "OMPI_COMM_WORLD_SIZE",
                size: 3,
                local_rank: Some(1)
            })
        );
        assert_eq!(
            launcher_from(env(&[("PMI_SIZE", "2")])).unwrap(),
            Some(Launch {
                var: "PMI_SIZE",
                size: 2,
                local_rank: None
            })
        );
    }

    #[test]
    fn a_launcher_variable_that_is_not_a_count_is_named_in_the_error() {
        let err = launcher_from(env(&[("PMI_SIZE", "two")])).unwrap_err();
        assert!(err.to_string().contains("PMI_SIZE=\"two\""), "{err}");
    }

    #[test]
    fn no_launcher_means_one_process() {
        let comm = choose(None, DEFAULT_COLLECTIVE_TIMEOUT).unwrap();
        assert_eq!((comm.rank(), comm.size()), (0, 1));
    }

    #[cfg(not(feature = "mpi"))]
    #[test]
    fn a_build_without_mpi_refuses_to_be_one_of_several_ranks() {
        let launch = Launch {
            var: "OMPI_COMM_WORLD_SIZE",
            size: 2,
            local_rank: None,
        };
        let err = choose(Some(launch), DEFAULT_COLLECTIVE_TIMEOUT).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("built without MPI") && message.contains("--features mpi"),
            "{message}"
        );
        let one = Launch { size: 1, ..launch };
        assert_eq!(
            choose(Some(one), DEFAULT_COLLECTIVE_TIMEOUT)
                .unwrap()
                .size(),
            1
        );
    }
}
