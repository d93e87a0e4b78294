//! `mpirun -np N tensorfit train --data` (docs/distributed.md): each rank reads its rows of
//! every global batch of the file (uneven shards, and a last batch with fewer rows than
//! ranks), the ranks share the validation batches and sum their totals, and the run
//! gives one process's losses, validation metrics and weights; rank 0 alone writes the
//! checkpoints, metrics.jsonl and the curves. Needs the `mpi` feature and `mpirun`;
//! without either each test prints why it skips.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::Value;
use tensorfit::nn::Checkpoint;

use common::ranks::{launch, numbers};
use common::{arg, assert_close, example_data, scratch};

/// Exact but for the order of the average's sums.
const EXACT: (f32, f32) = (1e-6, 1e-5);

/// A head on every step over per-step token labels: the padded steps count in no rank's
/// loss, so ranks weigh their means by the steps they count, not their rows.
const EVERY_STEP: &str = r#"
[input]
kind = "tokens"
vocab = 20
[recurrent]
cell = "lstm"
hidden = 8
layers = 1
[head]
on = "every_step"
layers = []
[loss]
kind = "cross_entropy"
classes = 20
"#;

/// The JSON lines of a `--json` run: one per validation, then the summary.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// `train --data data --model model --batch batch` on one process and on `ranks`, which
/// must give the same validation lines, summary and weights; rank 0 writes the outputs.
fn agrees(test: &str, (data, model): (&Path, &Path), batch: &str, ranks: usize) {
    let dir = scratch(&format!("{test}-{ranks}"));
    let (one, many, ck) = (
        dir.join("one.safetensors"),
        dir.join("many.safetensors"),
        dir.join("ck"),
    );
    let _ = std::fs::remove_dir_all(&ck);
    let args = [
        "--data",
        arg(data),
        "--model",
        arg(model),
        "--epochs",
        "2",
        "--batch",
        batch,
        "--lr",
        "0.05",
        "--val-fraction",
        "0.25",
        "--eval-every",
        "3",
        "--device",
        "cpu",
        "--json",
        "--save",
    ];
    let with = |save: &Path| -> Vec<String> {
        args.iter()
            .map(|s| s.to_string())
            .chain([arg(save).to_string()])
            .collect()
    };
    let mut on_ranks = with(&many);
    on_ranks.extend(["--checkpoint-dir".into(), arg(&ck).into()]);
    let on_ranks: Vec<&str> = on_ranks.iter().map(String::as_str).collect();
    let Some(run) = launch(test, "train", &[(ranks, &on_ranks)]) else {
        return;
    };
    let single: Vec<String> = ["train".to_string()]
        .into_iter()
        .chain(with(&one))
        .collect();
    let single: Vec<&str> = single.iter().map(String::as_str).collect();
    let out = common::succeed(common::tensorfit_command().args(&single), test);
    let want = json_lines(&String::from_utf8_lossy(&out.stdout));
    let got = json_lines(&run.stdout);
    let what = format!("{test} on {ranks} ranks");
    assert_eq!(got.len(), want.len(), "{what}: {}", run.stdout);
    let summary = got.last().unwrap();
    assert_eq!(summary["ranks"], ranks, "{what}: {summary}");
    assert!(summary["weights_hash"].is_string(), "{what}: {summary}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g["step"], &g["best"]), (&w["step"], &w["best"]), "{what}");
        for key in ["train_loss", "val_loss", "val_accuracy", "best_val_loss"] {
            let k = format!("{what}: {key} at step {}", w["step"]);
            assert_close(&k, &numbers(g, key), &numbers(w, key), EXACT.0, EXACT.1);
        }
    }
    let (a, b) = (
        Checkpoint::load(&many).unwrap(),
        Checkpoint::load(&one).unwrap(),
    );
    for (name, t) in b.params.iter() {
        let scale = common::max_abs(&t.data).max(1.0);
        let got = &a.params.get(name).unwrap().data;
        assert_close(
            &format!("{what}: {name}"),
            got,
            &t.data,
            EXACT.0 * scale,
            EXACT.1,
        );
    }
    // Rank 0 writes every file of the checkpoint directory, once.
    let metrics = std::fs::read_to_string(ck.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), want.len() - 1, "{what}: {metrics}");
    for file in ["checkpoint.safetensors", "last.safetensors", "curves.svg"] {
        assert!(ck.join(file).exists(), "{what}: no {file}");
    }
}

#[test]
fn ranks_reading_their_rows_of_each_batch_train_on_a_file_as_one_process() {
    let (data, model) = (
        example_data("classify.safetensors"),
        example_data("classify_model.toml"),
    );
    // 9 sequences to train on, padded to their batch's longest: batches of 7 and 2
    // (4 + 3 and 1 + 1 on 2 ranks, 3 + 2 + 2 and 1 + 1 + none on 3).
    for ranks in [2, 3] {
        agrees("classify", (&data, &model), "7", ranks);
    }
    // Batches of 8 and 1: rank 1 holds no row of the second and counts for nothing.
    agrees("short batch", (&data, &model), "8", 2);
}

#[test]
fn ranks_weigh_a_head_on_every_step_by_the_steps_they_count() {
    let model = scratch("every-step-model").join("model.toml");
    std::fs::write(&model, EVERY_STEP).unwrap();
    let data = example_data("tokens.safetensors");
    agrees("every step", (&data, &model), "5", 2);
}
