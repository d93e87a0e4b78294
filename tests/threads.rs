//! The front door's runners and streams cross threads (`Send`): a runner trained on a
//! worker thread gives the numbers it gives on the thread that opened it, and a stream
//! opened on one thread serves steps on another.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::mpsc;
use std::thread;

use tensorfit::{Control, DevicePolicy, Job, Model, Runner, Sequences, Stream};

use common::{hot_first_step, task_model};

/// 12 sequences of 6 steps whose class is the feature hot at step 0.
fn data() -> Sequences {
    hot_first_step(12, 6)
}

fn open() -> Runner {
    let job = Job::Train {
        batch: 4,
        seq_len: 6,
        eval: None,
    };
    let model = Model::new(task_model(16, 1, 8), 2).expect("model");
    model.open(job, &DevicePolicy::only_cpu()).expect("open")
}

/// Nine steps of training; the loss of each, bit for bit.
fn train(run: &mut Runner) -> Vec<u32> {
    let mut losses = Vec::new();
    run.fit(data().batches(4, 3, 7), |s| {
        losses.push(s.loss.to_bits());
        Control::Continue
    })
    .expect("fit");
    losses
}

#[test]
fn a_runner_trained_on_a_worker_thread_gives_the_same_numbers() {
    let here = train(&mut open());
    let run = open();
    let there = thread::spawn(move || {
        let mut run = run;
        train(&mut run)
    })
    .join()
    .expect("the worker thread");
    assert_eq!(here.len(), 9);
    assert_eq!(here, there);
}

#[test]
fn a_stream_opened_here_serves_steps_on_another_thread() {
    let model = Model::new(task_model(16, 1, 8), 2).expect("model");
    let mut local: Stream = model.stream(2, &DevicePolicy::only_cpu()).expect("stream");
    let remote = model.stream(2, &DevicePolicy::only_cpu()).expect("stream");
    // Two feeds of one step each per call.
    let width = 2 * local.step_width();
    let inputs: Vec<Vec<f32>> = (0..5)
        .map(|t| (0..width).map(|k| f32::from(k % 7 == t)).collect())
        .collect();
    let (to_worker, requests) = mpsc::channel::<Vec<f32>>();
    let (replies, from_worker) = mpsc::channel();
    let worker = thread::spawn(move || {
        let mut stream = remote;
        for x in requests {
            replies.send(stream.step(&x).expect("step")).expect("reply");
        }
    });
    for x in &inputs {
        to_worker.send(x.clone()).expect("request");
        let there = from_worker.recv().expect("a reply");
        assert_eq!(local.step(x).expect("step"), there);
    }
    drop(to_worker);
    worker.join().expect("the worker thread");
}

/// Every front-door type crosses threads; those that hold no device are shared too.
#[test]
fn every_front_door_type_is_send_and_the_device_free_ones_sync() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<Runner>();
    send::<Stream>();
    send_sync::<Model>();
    send_sync::<tensorfit::Plan>();
    send_sync::<DevicePolicy>();
    send_sync::<tensorfit::Devices>();
    send_sync::<Sequences>();
    send_sync::<tensorfit::Shapes>();
    send_sync::<tensorfit::FitOptions>();
    send_sync::<tensorfit::TrainReport>();
    send_sync::<tensorfit::TrainPosition>();
    send_sync::<tensorfit::Batch>();
    send_sync::<tensorfit::Error>();
}
