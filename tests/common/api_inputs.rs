//! The small models, jobs and checks of the library's bad-input tests
//! (`tests/api_bad_input.rs`, `tests/api_bad_run_input.rs`).

use std::fmt::Debug;

use tensorfit::core::HostTensor;
use tensorfit::nn::{InputSpec, Job, LossSpec};
use tensorfit::{DevicePolicy, Error, Model};

use super::task_model;

/// The message of `r`'s [`Error::BadInput`], after checking that it holds every one of
/// `fragments`.
pub fn bad_input<T: Debug>(r: Result<T, Error>, fragments: &[&str]) -> String {
    match r {
        Err(Error::BadInput(b)) => {
            let m = b.message;
            for f in fragments {
                assert!(m.contains(f), "`{f}` is not in: {m}");
            }
            m
        }
        Err(e) => panic!("expected bad input naming {fragments:?}, got {e:?}"),
        Ok(v) => panic!(
            "expected bad input naming {fragments:?}, got a {}",
            std::any::type_name_of_val(&v)
        ),
    }
}

/// 152 features, one LSTM layer of 8, a Dense layer of 4, 6 classes.
pub fn small() -> Model {
    Model::new(task_model(8, 1, 4), 1).unwrap()
}

/// The small model with `loss`'s output layer instead of 6 classes.
pub fn small_with(loss: LossSpec) -> Model {
    let mut d = task_model(8, 1, 4);
    d.loss = loss;
    Model::new(d, 1).unwrap()
}

/// The small model on token ids of a vocabulary of 5.
pub fn small_on_tokens() -> Model {
    let mut d = task_model(8, 1, 4);
    d.input = InputSpec::Tokens {
        vocab: 5,
        embedding: None,
    };
    Model::new(d, 1).unwrap()
}

pub fn cpu() -> DevicePolicy {
    DevicePolicy::only_cpu()
}

pub const TRAIN: Job = Job::Train {
    batch: 4,
    seq_len: 6,
    eval: None,
};
pub const EVAL: Job = Job::Eval {
    batch: 4,
    seq_len: 6,
};

/// `[6, 4, 152]` zeros: a batch of the planned shape for the small model.
pub fn batch() -> HostTensor {
    HostTensor::zeros([6, 4, 152])
}
