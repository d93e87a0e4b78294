//! The data-parallel exchange on one rank and the ranks' bookkeeping, without MPI.

use super::*;
use tensorfit_dist::Solo;

#[test]
fn one_rank_keeps_its_gradients_and_a_repeated_step_gets_the_same_average() {
    let mut ranks = Ranks::new(Box::new(Solo), 4).unwrap();
    let mut grads = vec![vec![1.0f32, -2.0], vec![0.5]];
    let mut loss = 0.25;
    ranks.exchange(1, &mut grads, &mut loss).unwrap();
    assert_eq!(
        (grads.clone(), loss),
        (vec![vec![1.0, -2.0], vec![0.5]], 0.25)
    );
    let (mut again, mut l) = (vec![vec![9.0f32, 9.0], vec![9.0]], 9.0);
    ranks.exchange(1, &mut again, &mut l).unwrap();
    assert_eq!((again, l), (grads, 0.25));
}

#[test]
fn a_rank_that_counts_nothing_gives_a_zero_gradient_not_a_division_by_zero() {
    let mut ranks = Ranks::new(Box::new(Solo), 4).unwrap();
    ranks.set_step(4, 0);
    let (mut grads, mut loss) = (vec![vec![3.0f32]], 2.0);
    ranks.exchange(1, &mut grads, &mut loss).unwrap();
    assert_eq!((grads, loss), (vec![vec![0.0]], 0.0));
}

#[test]
fn a_stop_asked_before_a_step_is_agreed_at_its_exchange_and_only_there() {
    let mut ranks = Ranks::new(Box::new(Solo), 2).unwrap();
    let (mut grads, mut loss) = (vec![vec![1.0f32]], 1.0);
    ranks.exchange(1, &mut grads, &mut loss).unwrap();
    assert_eq!(ranks.agreed_stop(), None);
    ranks.ask_stop(15);
    ranks.ask_stop(2);
    assert_eq!(ranks.agreed_stop(), None, "agreed only at the exchange");
    ranks.exchange(2, &mut grads, &mut loss).unwrap();
    assert_eq!(ranks.agreed_stop(), Some(15), "the first signal received");
}

#[test]
fn the_ranks_agree_on_the_signal_most_of_them_received() {
    assert_eq!(agreed_signal(&[0.0, 0.0, 0.0]), None);
    assert_eq!(agreed_signal(&[1.0 / 3.0, 2.0 / 3.0, 0.0]), Some(15));
    assert_eq!(agreed_signal(&[0.5, 0.0, 0.5]), Some(2), "a tie: SIGINT");
    assert_eq!(agreed_signal(&[0.0, 0.0, 0.5]), Some(1));
}

#[test]
fn a_global_batch_smaller_than_the_ranks_is_refused_naming_the_flag() {
    #[derive(Debug)]
    struct Three;
    impl Communicator for Three {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            3
        }
        fn all_reduce_sum(&mut self, _: &mut [f32]) -> std::result::Result<(), DistError> {
            Ok(())
        }
        fn broadcast_bytes(
            &mut self,
            _: &mut [u8],
            _: usize,
        ) -> std::result::Result<(), DistError> {
            Ok(())
        }
        fn broadcast_f32(&mut self, _: &mut [f32], _: usize) -> std::result::Result<(), DistError> {
            Ok(())
        }
        fn barrier(&mut self) -> std::result::Result<(), DistError> {
            Ok(())
        }
    }
    let err = Ranks::new(Box::new(Three), 2).unwrap_err();
    assert!(
        err.to_string()
            .contains("--batch 2 is the global batch, shared by 3 ranks"),
        "{err}"
    );
}

/// Rank 0 of 2, whose partner adds `other(len)` to every sum of `len` values.
#[derive(Debug)]
struct Pair {
    other: fn(usize) -> Vec<f32>,
}

impl Communicator for Pair {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        2
    }
    fn all_reduce_sum(&mut self, data: &mut [f32]) -> std::result::Result<(), DistError> {
        let other = (self.other)(data.len());
        data.iter_mut().zip(other).for_each(|(v, o)| *v += o);
        Ok(())
    }
    fn broadcast_bytes(&mut self, _: &mut [u8], _: usize) -> std::result::Result<(), DistError> {
        Ok(())
    }
    fn broadcast_f32(&mut self, _: &mut [f32], _: usize) -> std::result::Result<(), DistError> {
        Ok(())
    }
    fn barrier(&mut self) -> std::result::Result<(), DistError> {
        Ok(())
    }
}

/// What rank 1 adds when it has ended: its flag, the last value.
fn ended(len: usize) -> Vec<f32> {
    let mut v = vec![0.0; len];
    v[len - 1] = 1.0;
    v
}

/// What rank 1 adds when it steps on zero gradients.
fn stepping(len: usize) -> Vec<f32> {
    vec![0.0; len]
}

#[test]
fn a_rank_still_stepping_learns_that_another_ended_its_run_and_names_it() {
    let mut ranks = Ranks::new(Box::new(Pair { other: ended }), 4).unwrap();
    let (mut grads, mut loss) = (vec![vec![1.0f32; 3]], 1.0);
    let err = ranks.exchange(7, &mut grads, &mut loss).unwrap_err();
    assert!(
        err.to_string()
            .contains("rank 1 ended its run (its last step done) while rank 0 went on to step 7"),
        "{err}"
    );
    assert!(err.to_string().contains("no rank died"), "{err}");
}

#[test]
fn a_rank_that_ends_while_another_steps_names_it_and_ranks_that_end_together_pass() {
    let mut ranks = Ranks::new(Box::new(Pair { other: stepping }), 4).unwrap();
    let err = ranks.end(5).unwrap_err();
    assert!(
        err.to_string()
            .contains("rank 1 went on to another step after the last step of rank 0"),
        "{err}"
    );
    let mut ranks = Ranks::new(Box::new(Pair { other: ended }), 4).unwrap();
    ranks.end(5).unwrap();
    // After steps, the end is as long as a step's exchange.
    let mut ranks = Ranks::new(Box::new(Pair { other: stepping }), 4).unwrap();
    let (mut grads, mut loss) = (vec![vec![1.0f32; 3]], 1.0);
    ranks.exchange(1, &mut grads, &mut loss).unwrap();
    ranks.comm = Box::new(Pair {
        other: |len| {
            // 3 gradients, the loss, the units, 3 kinds, 3 signals, 2 ranks' ends.
            assert_eq!(len, 13);
            ended(len)
        },
    });
    ranks.end(1_000).unwrap();
}

#[test]
fn one_rank_holds_the_same_weights_as_itself() {
    let mut a = ParamStore::new();
    a.insert(
        "w",
        tensorfit_core::HostTensor::new([2], vec![1.0, 2.0]).unwrap(),
    );
    let h = weights_hash(&a);
    let mut ranks = Ranks::new(Box::new(Solo), 1).unwrap();
    assert_eq!(ranks.check_same_weights(&a, 1).unwrap(), h);
}
