//! Helpers shared by the cross-crate tests: the small models and requests the tests
//! build, the wgpu check, and running the CLI (the closeness rule and the skip rule are
//! `tensorfit-testing`'s).

#![allow(dead_code)]

pub mod api_inputs;
pub mod ranks;
pub mod second_cpu;

use std::process::{Command, Output};

use serde_json::Value;
use tensorfit::core::{Activation, DeviceKind};
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{
    EvalReport, HeadLayer, HeadLayerKind, Job, ModelDescription, OptimConfig, ParamStore,
    SeedShape, TemporalOrder, TrainOptions, Trainer,
};
use tensorfit::session::Request;
use tensorfit::DevicePolicy;

pub mod data_cli;

/// The closeness rule of the whole project (`tensorfit_testing::ratio`):
/// |a - b| <= atol + rtol * |reference|.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    tensorfit_testing::assert_close(what, got, want, atol as f64, rtol as f64);
}

/// Largest absolute value (the scale used for a tensor-relative tolerance).
pub fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

/// 3 features, 2 LSTM layers of `hidden`, a tanh Dense head of `dense` units without
/// BatchNorm (which in training mixes the rows of a batch, padded or not), 3 classes.
pub fn dense_head_model(hidden: usize, dense: usize) -> ModelDescription {
    let mut cfg = SeedShape {
        features: 3,
        hidden,
        layers: 2,
        dense,
        classes: 3,
        activation: Activation::Tanh,
    }
    .description();
    cfg.head.layers = vec![HeadLayer {
        name: "dense".into(),
        kind: HeadLayerKind::Dense {
            units: dense,
            activation: Activation::Tanh,
        },
        residual: false,
    }];
    cfg
}

/// Trains `trainer` on each step `step{s}.` (s = 1..=`steps`) of the PyTorch reference
/// file `file` ([`reference`]), and checks the step's loss, its outputs (the reference's
/// tensor `outputs`, before the update), every gradient (`grad.<name>`) and every
/// parameter after it (`after.<name>`) within 1e-5 of the reference tensor's scale plus
/// 1e-5 relative. The inputs are `x` and `targets`. Returns how many gradients and
/// parameters were compared.
pub fn matches_reference_steps(
    trainer: &mut Trainer,
    file: &str,
    steps: usize,
    (targets, outputs): (&str, &str),
) -> usize {
    let check = check_reference;
    let mut compared = 0;
    for s in 1..=steps {
        let (r, _) = reference(file, &format!("step{s}."));
        let want = |n: &str| r.require(n).unwrap().data.clone();
        let report = trainer
            .train_step(r.require("x").unwrap(), &want(targets))
            .unwrap();
        check(&format!("step{s} loss"), &[report.loss], &want("loss"));
        check(
            &format!("step{s} {outputs}"),
            &report.probs.data,
            &want(outputs),
        );
        let grads = trainer.gradients().unwrap();
        let params = trainer.parameters().unwrap();
        for (kind, store) in [("grad", grads), ("after", params)] {
            for (name, t) in store.iter() {
                let what = format!("step{s} {kind} {name}");
                check(&what, &t.data, &want(&format!("{kind}.{name}")));
                compared += 1;
            }
        }
    }
    compared
}

/// The PyTorch-agreement rule: `got` within 1e-5 of the reference tensor's scale
/// (max|want|) plus 1e-5 relative.
pub fn check_reference(what: &str, got: &[f32], want: &[f32]) {
    assert_close(what, got, want, 1e-5 * max_abs(want), 1e-5);
}

/// Evaluates the `x` and `targets` of reference step `step` (a prefix such as `step1.` of
/// the reference file `file`) and checks the outputs against `eval.<outputs>`
/// ([`check_reference`]). Returns the report and the `eval.` tensors for further checks.
pub fn matches_reference_eval(
    trainer: &mut Trainer,
    file: &str,
    step: &str,
    (targets, outputs): (&str, &str),
) -> (EvalReport, ParamStore) {
    let (r, e) = (reference(file, step).0, reference(file, "eval.").0);
    let report = trainer
        .evaluate(r.require("x").unwrap(), &r.require(targets).unwrap().data)
        .unwrap();
    let want = &e.require(outputs).unwrap().data;
    check_reference(&format!("eval {outputs}"), &report.probs.data, want);
    (report, e)
}

/// A scaled-down seed network for the built-in temporal-order task (152 features in,
/// 6 classes out, tanh dense layer).
pub fn task_model(hidden: usize, layers: usize, dense: usize) -> ModelDescription {
    SeedShape {
        features: TemporalOrder::FEATURES,
        hidden,
        layers,
        dense,
        classes: TemporalOrder::CLASSES,
        activation: Activation::Tanh,
    }
    .description()
}

/// `n` sequences of `steps` steps of the task's 152 features whose class (`i % 6`) is the
/// feature hot at their first step: data the library tests train on from `Vec`s.
pub fn hot_first_step(n: usize, steps: usize) -> tensorfit::Sequences {
    let labels: Vec<f32> = (0..n).map(|i| (i % 6) as f32).collect();
    let inputs = labels
        .iter()
        .map(|&c| {
            (0..steps * 152)
                .map(|k| f32::from(k == c as usize))
                .collect()
        })
        .collect();
    tensorfit::Sequences::new(inputs, labels, 152).expect("sequences")
}

/// Training options with whole truncated-BPTT chunks and Adam at learning rate `lr`.
pub fn train_options(tbptt: usize, lr: f32) -> TrainOptions {
    TrainOptions {
        tbptt,
        chunk: tbptt,
        optim: OptimConfig::adam(lr),
        ..TrainOptions::default()
    }
}

/// A session request on one device capped by `caps` ([`Request::new`]: default Adam, the
/// default 10% margin, nothing excluded).
pub fn request(
    cfg: &ModelDescription,
    job: Job,
    tbptt: usize,
    device: DeviceKind,
    caps: MemoryCaps,
) -> Request {
    let devices = DevicePolicy::only(device);
    Request {
        caps,
        ..devices.request(cfg.clone(), job, (tbptt, OptimConfig::default()))
    }
}

/// A tiny training run of the built-in task: 4 sequences of 8 steps, evaluation on 4
/// held-out sequences only at the end.
pub const TINY_RUN: [&str; 8] = [
    "--batch",
    "4",
    "--seq-len",
    "8",
    "--eval-batch",
    "4",
    "--eval-every",
    "0",
];

/// An untrained checkpoint of a small model with the seed network's input and classes
/// (LSTM 8, Dense 4), no optimizer state, step 0.
pub fn small_checkpoint() -> tensorfit::nn::Checkpoint {
    let cfg = SeedShape {
        hidden: 8,
        dense: 4,
        ..SeedShape::SEED
    }
    .description();
    tensorfit::nn::Checkpoint {
        params: tensorfit::nn::ParamStore::init(&cfg, 1).expect("a valid model"),
        config: cfg,
        optimizer: tensorfit::nn::ParamStore::new(),
        step: 0,
        extra: std::collections::HashMap::new(),
    }
}

/// Whether a wgpu adapter opens (lavapipe in CI). When none does, prints why, so the
/// caller can skip, or fails when `TENSORFIT_REQUIRE` names wgpu.
pub fn wgpu_present() -> bool {
    let Err(why) = tensorfit::devices::open(DeviceKind::Wgpu, &MemoryCaps::default()) else {
        return true;
    };
    tensorfit_testing::skip("this test", "wgpu", &why.to_string());
    false
}

/// A scratch directory for this test process (`name` below it), swept after it ends.
pub fn scratch(name: &str) -> std::path::PathBuf {
    tensorfit_testing::scratch_dir(name)
}

/// The `tensorfit` binary, with its throughput cache kept in the scratch directory.
pub fn tensorfit_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensorfit"));
    c.env("XDG_CACHE_HOME", scratch("cache"));
    c
}

/// Runs `cmd` and requires success; a failure names `what` and shows the stderr.
pub fn succeed(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JSON object a `--json` run printed: its output, or the last of its lines (a run
/// from files prints a line of metrics each epoch before its summary).
pub fn json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.trim().lines().last().unwrap_or_default();
    let whole = serde_json::from_str(text.trim());
    whole
        .or_else(|_| serde_json::from_str(last))
        .unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {text}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Runs the CLI with `args`, requires success, and parses its JSON output.
pub fn ok_json(args: &[&str]) -> Value {
    json(&succeed(
        tensorfit_command().args(args),
        &format!("{args:?}"),
    ))
}

/// Runs the CLI with `args`, requires exit status 1 without a panic, and returns the
/// error output.
pub fn refused(args: &[&str]) -> String {
    let out = tensorfit_command()
        .args(args)
        .output()
        .expect("the binary runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} must be refused: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    err
}

/// The per-step losses of a `train --json` run.
pub fn losses(v: &Value) -> Vec<f64> {
    v["losses"]
        .as_array()
        .expect("`losses` is an array")
        .iter()
        .map(|x| x.as_f64().expect("a loss is a number"))
        .collect()
}

/// A tmpfs of a few bytes mounted for a test (to fill a disk), unmounted when dropped.
#[derive(Debug)]
pub struct SmallDisk {
    pub path: std::path::PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` at a scratch directory `name`; prints why and returns
    /// `None` where this process may not mount (not root, no tmpfs).
    pub fn mount(name: &str, bytes: u64) -> Option<SmallDisk> {
        let path = scratch(name);
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { path }),
            Ok(o) => {
                println!(
                    "skipped: cannot mount a small tmpfs ({})",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!("skipped: cannot run mount ({e})");
                None
            }
        }
    }

    /// Fills the disk with a file `name`, leaving at most `leave` bytes free.
    pub fn fill(&self, name: &str, leave: usize) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.path.join(name)).expect("filler file");
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        f.set_len(len.saturating_sub(leave as u64))
            .expect("shrink filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// The names in `dir`, sorted.
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("readable directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Runs `tensorfit plan --json` with `args`, requires success, and parses the output.
pub fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan", "--json"];
    all.extend_from_slice(args);
    json(&succeed(
        tensorfit_command().args(&all),
        &format!("{all:?}"),
    ))
}

/// The flags of a job: `--mode`, `--batch` and `--seq-len`, then `extra`.
pub fn job<'a>(mode: &'a str, batch: &'a str, seq_len: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--mode", mode, "--batch", batch, "--seq-len", seq_len];
    v.extend_from_slice(extra);
    v
}

/// `tensorfit train` of the tiny run for a million steps, checkpointing into `dir` every
/// `every` steps (not started; the caller adds flags and pipes).
pub fn long_training(dir: &std::path::Path, every: &str) -> Command {
    let mut c = tensorfit_command();
    c.arg("train")
        .args(TINY_RUN)
        .args([
            "--steps",
            "1000000",
            "--checkpoint-every",
            every,
            "--checkpoint-dir",
        ])
        .arg(dir);
    c
}

/// Spawns `cmd` with stdout and stderr piped and returns once `file` exists (a minute at
/// most), looking every 50 ms (tests that stop a run by a signal rely on the run going on
/// a little past the file's first appearance: into an epoch, not at its start).
pub fn spawn_until(cmd: &mut Command, file: &std::path::Path) -> std::process::Child {
    spawn_until_every(cmd, file, std::time::Duration::from_millis(50))
}

/// [`spawn_until`], looking every `every`: a test that must act between the first file
/// and the next of a run of milliseconds looks every millisecond.
pub fn spawn_until_every(
    cmd: &mut Command,
    file: &std::path::Path,
    every: std::time::Duration,
) -> std::process::Child {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(60) {
        if file.exists() {
            return child;
        }
        std::thread::sleep(every);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no {} after a minute", file.display());
}

/// The tensors of reference file `file` (a path under the repository) whose names start
/// with `prefix` (stripped), and the file's metadata.
pub fn reference(
    file: &str,
    prefix: &str,
) -> (
    tensorfit::nn::ParamStore,
    std::collections::HashMap<String, String>,
) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    tensorfit::nn::ParamStore::load(&path, prefix).expect("reference file loads")
}

/// Metadata value `k` as a size.
pub fn meta_usize(meta: &std::collections::HashMap<String, String>, k: &str) -> usize {
    meta[k].parse().expect("the metadata value is a size")
}

/// A file of `examples/data/`.
pub fn example_data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/data")
        .join(name)
}

/// `p` as a command-line argument.
pub fn arg(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A checkpoint's parameters by name, as bits (for equality bit for bit), sorted.
pub fn checkpoint_bits(path: &std::path::Path) -> Vec<(String, Vec<u32>)> {
    let ck = tensorfit::nn::Checkpoint::load(path).expect("a checkpoint");
    let mut v: Vec<(String, Vec<u32>)> = ck
        .params
        .iter()
        .map(|(n, t)| (n.to_string(), t.data.iter().map(|x| x.to_bits()).collect()))
        .collect();
    v.sort();
    v
}

/// Runs `cmd` until `file` exists, then sends it SIGINT and returns what it did.
pub fn interrupted(cmd: &mut Command, file: &std::path::Path) -> Output {
    let child = spawn_until(cmd, file);
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -INT");
    child.wait_with_output().expect("the command ends")
}
