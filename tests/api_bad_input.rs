//! The library's front door under the mistakes a real app makes, before anything runs
//! (sequences, device policies, models, checkpoints): every case is a typed
//! [`tensorfit::Error`] whose message names what is wrong (the argument, the expected
//! and the given value), never a panic, an abort or a hang. `tests/api_bad_run_input.rs`
//! does the same for a run's inputs, streams and files; `tests/bad_input.rs` for the
//! command line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::{DeviceKind, HostTensor};
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{InputSpec, Job, LossSpec, ModelDescription, OptimConfig, ParamStore};
use tensorfit::{DevicePolicy, Error, Model, Sequences, Training};

use common::api_inputs::*;
use common::task_model;

// --- Sequences -------------------------------------------------------------------------

#[test]
fn sequences_without_any_sequence_say_so() {
    bad_input(Sequences::new(vec![], vec![], 2), &["no sequences"]);
}

#[test]
fn sequences_of_zero_features_name_the_argument() {
    bad_input(
        Sequences::new(vec![vec![0.0; 4]], vec![0.0], 0),
        &["features", "at least 1"],
    );
}

#[test]
fn a_sequence_that_is_not_whole_steps_names_its_length_and_the_feature_count() {
    bad_input(
        Sequences::new(vec![vec![0.0; 5]], vec![0.0], 2),
        &["sequence 0 has 5 values", "2 features"],
    );
}

#[test]
fn labels_that_do_not_divide_among_the_sequences_give_both_counts() {
    bad_input(
        Sequences::new(vec![vec![0.0; 4]; 2], vec![0.0; 3], 2),
        &["3 labels for 2 sequences"],
    );
}

#[test]
fn step_labels_for_more_sequences_than_given_are_refused() {
    // Two sequences of 3 steps, four rows of 3 labels: the label count divides evenly,
    // yet half of the labels belong to no sequence.
    bad_input(
        Sequences::with_step_labels(vec![vec![0.0; 3]; 2], vec![vec![0.0; 3]; 4], 1),
        &["4 rows of labels for 2 sequences"],
    );
}

#[test]
fn step_labels_of_the_wrong_length_name_the_sequence() {
    bad_input(
        Sequences::with_step_labels(vec![vec![0.0; 3]; 2], vec![vec![0.0; 3], vec![0.0; 2]], 1),
        &["sequence 1 has 2 labels for 3 steps"],
    );
}

#[test]
fn a_batch_of_a_sequence_that_does_not_exist_names_it() {
    let data = Sequences::new(vec![vec![0.0; 4]; 2], vec![0.0, 1.0], 2).unwrap();
    bad_input(
        data.batch(&[0, 5]),
        &["sequence 5 does not exist", "there are 2"],
    );
}

#[test]
fn batches_of_zero_sequences_are_one_error_and_a_batch_past_the_data_is_all_of_it() {
    let data = Sequences::new(vec![vec![0.0; 4]; 3], vec![0.0; 3], 2).unwrap();
    // Batches of 0 would be an endless run of empty batches.
    let got: Vec<_> = data.batches(0, 2, 1).collect();
    assert_eq!(got.len(), 1, "one error, then nothing");
    bad_input(
        got.into_iter().next().unwrap(),
        &["batch of 0", "at least 1"],
    );
    // PyTorch's drop_last=False: a batch of 4 of 3 sequences is all 3, once an epoch.
    let got: Vec<_> = data
        .batches(4, 2, 1)
        .map(|b| b.unwrap().labels.len())
        .collect();
    assert_eq!(got, [3, 3]);
}

// --- DevicePolicy ----------------------------------------------------------------------

#[test]
fn a_memory_margin_outside_zero_to_one_is_refused_with_the_value() {
    for m in [1.0, -0.1, f64::NAN] {
        bad_input(DevicePolicy::auto().margin(m), &["[0, 1)", &format!("{m}")]);
    }
}

#[test]
fn a_device_kind_that_is_not_here_is_no_device() {
    if tensorfit::devices::open(DeviceKind::Cuda, &MemoryCaps::default()).is_ok() {
        println!("CUDA is present here: nothing to refuse");
        return;
    }
    match small().open(EVAL, &DevicePolicy::only(DeviceKind::Cuda)) {
        Err(Error::NoDevice(m)) => assert!(m.contains("cuda"), "{m}"),
        other => panic!("expected no device, got {other:?}"),
    }
}

#[test]
fn a_memory_cap_too_small_for_anything_is_out_of_memory_on_that_device() {
    let devices = cpu().cap(DeviceKind::Cpu, 1024);
    for r in [
        small().open(EVAL, &devices).map(|_| ()),
        small().stream(1, &devices).map(|_| ()),
    ] {
        match r {
            Err(e @ Error::OutOfMemory { .. }) => {
                let Error::OutOfMemory {
                    requested,
                    available,
                    ..
                } = e
                else {
                    unreachable!()
                };
                assert!(requested > available, "{requested} <= {available}");
                assert!(available <= 1024, "{available}");
            }
            other => panic!("expected out of memory, got {other:?}"),
        }
    }
    // The plan that fits nowhere can still be read, and refuses to start.
    let plan = small().plan(EVAL, &devices).unwrap();
    assert!(!plan.fits() && plan.device().is_none() && plan.peak_bytes().is_none());
    assert!(plan.table().contains("cpu"), "{}", plan.table());
    assert!(plan.to_json().is_object());
    assert!(matches!(
        plan.start(&small()),
        Err(Error::OutOfMemory { .. })
    ));
}

#[test]
fn every_device_capped_too_small_is_an_answer_not_a_hang() {
    let mut devices = DevicePolicy::auto();
    for kind in [DeviceKind::Cpu, DeviceKind::Wgpu, DeviceKind::Cuda] {
        devices = devices.cap(kind, 1024);
    }
    match small().open(EVAL, &devices) {
        Err(e @ (Error::OutOfMemory { .. } | Error::NoDevice(_))) => println!("{e}"),
        other => panic!(
            "expected out of memory or no device, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[test]
fn a_job_that_fits_only_on_a_software_gpu_says_how_to_ask_for_it() {
    if !common::wgpu_present() {
        return;
    }
    let devices = DevicePolicy::auto().cap(DeviceKind::Cpu, 1024);
    match small().open(EVAL, &devices) {
        Err(Error::NoDevice(m)) => {
            assert!(m.contains("software device"), "{m}");
            assert!(m.contains("DevicePolicy::only(DeviceKind::Wgpu)"), "{m}");
        }
        // A hardware GPU here fits the job and is chosen.
        Ok(run) => assert!(run.device().starts_with("wgpu") || run.device().starts_with("cuda")),
        Err(e) => panic!("expected no device, got {e}"),
    }
}

// --- Model -----------------------------------------------------------------------------

#[test]
fn a_model_built_in_code_with_a_zero_size_names_the_field() {
    let mut d = task_model(8, 1, 4);
    d.recurrent_mut().unwrap().hidden = 0;
    bad_input(
        Model::new(d, 1),
        &["recurrent.hidden", "= 0", "between 1 and"],
    );
    let mut d = task_model(8, 1, 4);
    d.recurrent_mut().unwrap().layers = 0;
    bad_input(Model::new(d, 1), &["recurrent.layers", "= 0"]);
    let mut d = task_model(8, 1, 4);
    d.loss = LossSpec::SoftmaxCrossEntropy { classes: 1 };
    bad_input(Model::new(d, 1), &["loss.classes", "= 1", "between 2 and"]);
}

#[test]
fn a_model_built_in_code_with_an_absurd_size_is_refused_before_allocating() {
    let mut d = task_model(8, 1, 4);
    d.recurrent_mut().unwrap().hidden = usize::MAX;
    bad_input(Model::new(d, 1), &["recurrent.hidden", "must be between"]);
    let mut d = task_model(8, 1, 4);
    d.recurrent_mut().unwrap().hidden = 1 << 20;
    d.recurrent_mut().unwrap().layers = 1000;
    bad_input(Model::new(d, 1), &["parameters", "at most"]);
}

#[test]
fn a_model_larger_than_the_host_is_out_of_memory_before_its_weights_are_drawn() {
    // 32768 units in 8 layers: about 64 billion parameters (257 GB), under the
    // description's own bound (2^36) but beyond this host: drawing them would abort the
    // app (a vector that cannot be allocated aborts) or fill the host's memory.
    let mut d = task_model(8, 1, 4);
    d.recurrent_mut().unwrap().hidden = 1 << 15;
    d.recurrent_mut().unwrap().layers = 8;
    let bytes = 4 * d
        .param_specs()
        .unwrap()
        .iter()
        .map(|s| s.shape.numel() as u64)
        .sum::<u64>();
    match tensorfit::cpu::host_memory::available() {
        Some(available) => assert!(bytes > available, "{bytes} bytes fit in {available}"),
        None => return println!("the host's free memory is unknown here: nothing to check"),
    }
    match Model::new(d, 1) {
        Err(e @ Error::OutOfMemory { .. }) => {
            let m = e.to_string();
            assert!(m.contains("host") && m.contains("weights"), "{m}");
        }
        other => panic!("expected out of memory on the host, got {other:?}"),
    }
}

#[test]
fn a_description_that_is_not_valid_is_refused_by_every_constructor() {
    let mut d: ModelDescription = task_model(8, 1, 4);
    d.input = InputSpec::Dense { features: 0 };
    bad_input(Model::new(d.clone(), 1), &["input.features", "= 0"]);
    bad_input(
        Model::with_weights(d, small().parameters().clone()),
        &["input.features", "= 0"],
    );
}

#[test]
fn weights_of_another_model_name_the_tensor_and_both_shapes() {
    let other = Model::new(task_model(16, 1, 4), 1).unwrap();
    bad_input(
        Model::with_weights(task_model(8, 1, 4), other.parameters().clone()),
        &["lstm.weight_ih_l0", "[64, 152]", "[32, 152]"],
    );
    bad_input(
        Model::with_weights(task_model(8, 1, 4), ParamStore::new()),
        &["`lstm.weight_ih_l0` is missing"],
    );
}

#[test]
fn a_weight_whose_values_do_not_fill_its_shape_is_refused() {
    let mut params = small().parameters().clone();
    let shape = params.get("out.bias").unwrap().shape.clone();
    // The fields are public: an app can build a tensor `HostTensor::new` would refuse.
    params.insert(
        "out.bias",
        HostTensor {
            shape,
            data: vec![0.0; 2],
        },
    );
    bad_input(
        Model::with_weights(task_model(8, 1, 4), params),
        &["`out.bias`", "2 values", "[6]"],
    );
}

#[test]
fn a_checkpoint_of_another_model_is_refused_by_the_plan_of_this_one() {
    let path = common::scratch("api_bad_input").join("other.safetensors");
    Model::new(task_model(16, 1, 4), 1)
        .unwrap()
        .save(&path)
        .unwrap();
    let other = Model::load(&path).unwrap();
    let plan = small().plan(EVAL, &cpu()).unwrap();
    bad_input(plan.start(&other), &["the plan is for the model"]);
}

#[test]
fn a_checkpoint_whose_weights_are_not_its_models_is_refused_on_load() {
    let ck = tensorfit::nn::Checkpoint {
        config: task_model(8, 1, 4),
        params: Model::new(task_model(16, 1, 4), 1)
            .unwrap()
            .parameters()
            .clone(),
        optimizer: ParamStore::new(),
        step: 0,
        extra: Default::default(),
    };
    let path = common::scratch("api_bad_input").join("mismatched.safetensors");
    std::fs::write(&path, ck.to_bytes().unwrap()).unwrap();
    match Model::load(&path) {
        Err(Error::File { path, message }) => {
            assert!(path.ends_with("mismatched.safetensors"), "{path:?}");
            assert!(
                message.contains("`lstm.weight_ih_l0` has shape [64, 152]")
                    && message.contains("[32, 152]"),
                "{message}"
            );
        }
        other => panic!("expected a file error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_training_setting_out_of_range_names_the_setting() {
    let zero = Training {
        tbptt: Some(0),
        ..Training::default()
    };
    bad_input(
        small().with_training(zero).open(TRAIN, &cpu()),
        &["tbptt", "at least 1"],
    );
    for lr in [f32::NAN, -1.0, 0.0] {
        let t = Training {
            optim: OptimConfig::adam(lr),
            ..Training::default()
        };
        bad_input(small().with_training(t).open(TRAIN, &cpu()), &["lr > 0"]);
    }
}

#[test]
fn a_job_of_zero_or_absurd_size_names_batch_and_length() {
    let jobs = [
        Job::Eval {
            batch: 0,
            seq_len: 6,
        },
        Job::Eval {
            batch: 4,
            seq_len: 0,
        },
        Job::Train {
            batch: 4,
            seq_len: 6,
            eval: Some((0, 6)),
        },
    ];
    for job in jobs {
        bad_input(small().plan(job, &cpu()), &["batch must be at least 1"]);
    }
    let huge = Job::Eval {
        batch: usize::MAX,
        seq_len: usize::MAX,
    };
    bad_input(small().plan(huge, &cpu()), &["more than any device holds"]);
    bad_input(small().stream(0, &cpu()), &["at least one sequence"]);
}
