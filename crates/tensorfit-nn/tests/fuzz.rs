//! Fuzzing the parsers that read outside data: the checkpoint loader, the model
//! configuration parser and the model description (TOML) parser. Random bytes, random
//! mutations of a valid checkpoint or description (flipped bytes, truncations,
//! insertions) and random configuration texts must give `Ok` or an error, never a panic.
//! Each test prints how many inputs ran.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tensorfit_core::Activation;
use tensorfit_nn::description_json::{from_json, from_v1_json, to_json};
use tensorfit_nn::{Checkpoint, ModelDescription, ParamStore, SeedShape};

fn valid() -> Vec<u8> {
    let cfg = SeedShape {
        features: 5,
        hidden: 3,
        layers: 2,
        dense: 2,
        classes: 3,
        activation: Activation::Tanh,
    }
    .description();
    Checkpoint {
        params: ParamStore::init(&cfg, 1).unwrap(),
        optimizer: ParamStore::new(),
        config: cfg,
        step: 3,
        extra: HashMap::new(),
    }
    .to_bytes()
    .unwrap()
}

fn run(name: &str, cases: u32, strategy: impl Strategy<Value = Vec<u8>>, check: impl Fn(&[u8])) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |bytes| {
            check(&bytes);
            Ok(())
        })
        .unwrap();
    println!("{name}: {cases} inputs, no panic");
}

#[test]
fn checkpoint_loader_survives_random_bytes() {
    run(
        "random bytes",
        20_000,
        proptest::collection::vec(any::<u8>(), 0..2048),
        |b| {
            let _ = Checkpoint::from_bytes(b);
        },
    );
}

#[test]
fn checkpoint_loader_survives_mutated_checkpoints() {
    let good = valid();
    let n = good.len();
    let mutations = (
        proptest::collection::vec((0..n, any::<u8>()), 1..8),
        0..=n,
        proptest::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(move |(flips, cut, insert)| {
            let mut b = valid();
            for (i, x) in flips {
                b[i] ^= x;
            }
            b.truncate(cut);
            let at = cut / 2;
            b.splice(at..at, insert);
            b
        });
    run("mutated checkpoints", 20_000, mutations, |b| {
        let _ = Checkpoint::from_bytes(b);
    });
    // Header bytes specifically: the 8-byte length and the JSON that follows.
    let header =
        proptest::collection::vec((0..256usize.min(n), any::<u8>()), 1..6).prop_map(|flips| {
            let mut b = valid();
            for (i, x) in flips {
                b[i] = x;
            }
            b
        });
    run("mutated headers", 20_000, header, |b| {
        let _ = Checkpoint::from_bytes(b);
    });
}

#[test]
fn configuration_parser_survives_random_text() {
    run(
        "random configuration text",
        20_000,
        proptest::collection::vec(any::<u8>(), 0..200),
        |b| {
            let text = String::from_utf8_lossy(b);
            let _ = from_json(&text);
            let _ = from_v1_json(&text);
        },
    );
    let good = to_json(&ModelDescription::seed());
    let fields =
        proptest::collection::vec((0..good.len(), any::<u8>()), 1..6).prop_map(move |edits| {
            let mut b = good.clone().into_bytes();
            for (i, x) in edits {
                b[i] = x;
            }
            b
        });
    run("mutated configurations", 20_000, fields, |b| {
        let _ = from_json(&String::from_utf8_lossy(b));
    });
}

#[test]
fn description_parser_survives_mutated_descriptions() {
    let parse = |b: &[u8]| {
        let _ = ModelDescription::from_toml(&String::from_utf8_lossy(b), Path::new("f.toml"));
    };
    run(
        "random description text",
        20_000,
        proptest::collection::vec(any::<u8>(), 0..200),
        parse,
    );
    // The seed with token input, an embedding and an unnamed layer, so more keys have text
    // to mutate.
    let good = ModelDescription::seed()
        .to_toml()
        .replace(
            "kind = \"dense\"\nfeatures = 152",
            "kind = \"tokens\"\nvocab = 152\nembedding = 8",
        )
        .replace(", name = \"bn2\"", "")
        .into_bytes();
    let n = good.len();
    let mutations = (
        proptest::collection::vec((0..n, any::<u8>()), 1..6),
        0..=n,
        proptest::collection::vec(
            prop_oneof![Just(b'"'), Just(b'['), Just(b'{'), Just(b'='), any::<u8>()],
            0..8,
        ),
    )
        .prop_map(move |(flips, cut, insert)| {
            let mut b = good.clone();
            for (i, x) in flips {
                b[i] ^= x;
            }
            b.truncate(cut);
            let at = cut / 2;
            b.splice(at..at, insert);
            b
        });
    run("mutated descriptions", 20_000, mutations, parse);
}
