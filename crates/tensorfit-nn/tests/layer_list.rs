//! A model file's layers as one ordered `[[layers]]` list: what it reads to, its
//! defaults, and each way a list can be wrong, refused at its line with the key path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tensorfit_core::Activation;
use tensorfit_nn::{
    BodyLayer, Cell, Conv1dSpec, ConvPadding, DescriptionError, HeadOn, InputSpec,
    ModelDescription, Reduce,
};

fn parse(text: &str) -> Result<ModelDescription, DescriptionError> {
    ModelDescription::from_toml(text, Path::new("list.toml"))
}

const TOKENS: &str = "[input]\nkind = \"tokens\"\nvocab = 65\n";
const DENSE: &str = "[input]\nkind = \"dense\"\nfeatures = 3\n";
const LOSS: &str = "\n[loss]\nkind = \"cross_entropy\"\nclasses = 4\n";

/// A file of `input`, the `[[layers]]` entries (each a list of `key = value` lines) and
/// the loss.
fn file(input: &str, layers: &[&str]) -> String {
    let mut s = input.to_string();
    for keys in layers {
        s += &format!("\n[[layers]]\n{keys}\n");
    }
    s + LOSS
}

#[test]
fn the_seed_as_a_list_is_the_seed() {
    let seed = ModelDescription::seed();
    let text = seed.to_toml_as_list();
    assert!(text.contains("[[layers]]\nkind = \"last_step\""), "{text}");
    assert_eq!(parse(&text).unwrap(), seed);
}

#[test]
fn a_list_reads_in_order_with_pytorchs_defaults() {
    let d = parse(&file(
        TOKENS,
        &[
            "kind = \"embedding\"\ndim = 8",
            "kind = \"gru\"\nhidden = 16",
            "kind = \"dense\"\nunits = 5",
            "kind = \"dropout\"\np = 0.1\nname = \"drop\"",
        ],
    ))
    .unwrap();
    assert_eq!(
        d.input,
        InputSpec::Tokens {
            vocab: 65,
            embedding: Some(8)
        }
    );
    assert_eq!(
        (d.recurrent().unwrap().cell, d.recurrent().unwrap().hidden),
        (Cell::Gru, 16)
    );
    // nn.GRU's num_layers = 1; no "last_step": the layers above and the loss are on
    // every step.
    assert_eq!(d.recurrent().unwrap().layers, 1);
    assert_eq!(d.head.on, HeadOn::EveryStep);
    let names: Vec<&str> = d.head.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["head.0", "drop"]);
}

#[test]
fn convolutions_and_a_stack_read_to_the_body_in_their_order() {
    let d = parse(&file(
        DENSE,
        &[
            "kind = \"conv1d\"\nchannels = 8\nkernel = 3\npadding = \"causal\"\nactivation = \"relu\"",
            "kind = \"conv1d\"\nchannels = 8\nkernel = 2\ndilation = 4\npadding = \"same\"\nresidual = true\nname = \"tcn.1\"",
            "kind = \"gru\"\nhidden = 5",
            "kind = \"max_pool\"",
        ],
    ))
    .unwrap();
    let conv = |name: &str, kernel, dilation, padding, activation, residual| {
        BodyLayer::Conv1d(Conv1dSpec {
            name: name.into(),
            channels: 8,
            kernel,
            dilation,
            padding,
            activation,
            residual,
        })
    };
    assert_eq!(
        d.body[..2],
        [
            conv("body.0", 3, 1, ConvPadding::Causal, Activation::Relu, false),
            conv("tcn.1", 2, 4, ConvPadding::Same, Activation::Identity, true),
        ]
    );
    assert_eq!(
        d.recurrent().map(|r| (r.cell, r.hidden)),
        Some((Cell::Gru, 5))
    );
    assert_eq!(d.head.on, HeadOn::Sequence(Reduce::Max));
    // PyTorch's Conv1d tensors, in the body's order.
    let names: Vec<String> = d
        .param_specs()
        .unwrap()
        .iter()
        .map(|p| format!("{}{}", p.name, p.shape))
        .collect();
    assert_eq!(
        names[..4],
        [
            "body.0.weight[8, 3, 3]",
            "body.0.bias[8]",
            "tcn.1.weight[8, 8, 2]",
            "tcn.1.bias[8]"
        ]
    );
    // Written back (a body the tables cannot say is written as a list), it reads the same.
    assert!(d.to_toml().contains("[[layers]]"));
    assert_eq!(parse(&d.to_toml()).unwrap(), d);
    // A second stack, a conv after the reduction, and a residual that changes the width
    // are refused.
    let lstm = "kind = \"lstm\"\nhidden = 4";
    let text = file(DENSE, &[lstm, lstm]);
    refused(&text, (9, "layers[1]"), "is out of order");
    let conv = "kind = \"conv1d\"\nchannels = 4\nkernel = 3\npadding = \"same\"";
    let text = file(DENSE, &[lstm, "kind = \"last_step\"", conv]);
    refused(&text, (12, "layers[2]"), "is out of order");
    let wide = "kind = \"conv1d\"\nchannels = 4\nkernel = 3\npadding = \"same\"\nresidual = true";
    let e = parse(&file(DENSE, &[wide]))
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`body[0].residual` = true: the layer takes 3 features and gives 4"),
        "{e}"
    );
}

/// The error of `text`: its line and key path, and that its message holds `says`.
fn refused(text: &str, (line, key): (usize, &str), says: &str) {
    let e = parse(text).unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (line, key), "{e}");
    assert!(e.to_string().contains(says), "{e}");
    assert!(e.to_string().starts_with("list.toml:"), "{e}");
}

#[test]
fn a_layer_out_of_order_is_refused_at_its_line_naming_the_order() {
    let lstm = "kind = \"lstm\"\nhidden = 4";
    let order = "this version builds an optional \"embedding\", layers over the steps (at most one \"lstm\" or \"gru\", any \"conv1d\", \"positions\" and \"transformer_encoder\")";
    // A head layer before the recurrent layer (entry 0 starts on line 5).
    let text = file(DENSE, &["kind = \"dense\"\nunits = 3", lstm]);
    refused(&text, (5, "layers[0]"), order);
    // Two recurrent layers.
    let text = file(DENSE, &[lstm, "kind = \"gru\"\nhidden = 4"]);
    refused(
        &text,
        (9, "layers[1]"),
        "`layers[1]` (\"gru\") is out of order",
    );
    // The last step after a head layer, or twice.
    let dense = "kind = \"dense\"\nunits = 3";
    let text = file(DENSE, &[lstm, dense, "kind = \"last_step\""]);
    refused(&text, (13, "layers[2]"), "(\"last_step\") is out of order");
    let text = file(
        DENSE,
        &[lstm, "kind = \"last_step\"", "kind = \"last_step\""],
    );
    refused(&text, (12, "layers[2]"), "out of order");
    // An embedding anywhere but first.
    let text = file(TOKENS, &[lstm, "kind = \"embedding\"\ndim = 3"]);
    refused(&text, (9, "layers[1]"), "(\"embedding\") is out of order");
}

#[test]
fn a_list_without_a_recurrent_layer_or_beside_the_tables_is_refused() {
    let text = file(DENSE, &["kind = \"dense\"\nunits = 3"]);
    refused(&text, (5, "layers[0]"), "out of order");
    let text = format!("layers = []\n{DENSE}{LOSS}");
    refused(
        &text,
        (1, "layers"),
        "`layers` has no layer over the steps (\"lstm\", \"gru\", \"conv1d\", \"transformer_encoder\")",
    );
    let lstm = "kind = \"lstm\"\nhidden = 4";
    let text = file(DENSE, &[lstm]) + "\n[recurrent]\ncell = \"lstm\"\nhidden = 4\nlayers = 1\n";
    refused(&text, (13, "recurrent"), "either as one `[[layers]]` list");
    let text = file(DENSE, &[lstm]) + "\n[head]\non = \"last\"\n";
    refused(&text, (13, "head"), "not both");
}

#[test]
fn each_layer_takes_its_own_keys_and_values() {
    let text = file(DENSE, &["kind = \"lstm\"\nhidden = 4\nunits = 3"]);
    refused(
        &text,
        (8, "layers[0].units"),
        "unknown key `layers[0].units`",
    );
    let text = file(DENSE, &["kind = \"lstm\"\nhidden = 0"]);
    refused(&text, (7, "layers[0].hidden"), "layers[0].hidden");
    let text = file(DENSE, &["kind = \"conv2d\""]);
    refused(&text, (6, "layers[0].kind"), "\"conv2d\" is not one of");
    // A convolution's padding has no default (PyTorch's and Keras's shorten the
    // sequence), and is one of two.
    let text = file(DENSE, &["kind = \"conv1d\"\nchannels = 4\nkernel = 3"]);
    refused(
        &text,
        (5, "layers[0].padding"),
        "missing key `layers[0].padding`",
    );
    let text = file(
        DENSE,
        &["kind = \"conv1d\"\nchannels = 4\nkernel = 3\npadding = \"valid\""],
    );
    refused(&text, (9, "layers[0].padding"), "\"causal\" or \"same\"");
    let text = file(DENSE, &["kind = \"lstm\"\nhidden = 4\ndropout = 1.5"]);
    refused(&text, (8, "layers[0].dropout"), "less than 1");
    let text = file(
        DENSE,
        &["kind = \"lstm\"\nhidden = 4", "kind = \"last_step\"\np = 1"],
    );
    refused(&text, (11, "layers[1].p"), "unknown key");
    // Names as in `[head]`: distinct, and not another part's.
    let text = file(
        DENSE,
        &[
            "kind = \"lstm\"\nhidden = 4",
            "kind = \"dense\"\nunits = 3\nname = \"a\"",
            "kind = \"batchnorm\"\nname = \"a\"",
        ],
    );
    refused(
        &text,
        (16, "layers[2].name"),
        "is also the name of `layers[1]` (line 9)",
    );
}

#[test]
fn an_embedding_needs_token_input_given_once() {
    let emb = "kind = \"embedding\"\ndim = 3";
    let lstm = "kind = \"lstm\"\nhidden = 4";
    let text = file(DENSE, &[emb, lstm]);
    refused(&text, (5, "layers[0]"), "an embedding reads token ids");
    let tokens = format!("{TOKENS}embedding = 5\n");
    let text = file(&tokens, &[emb, lstm]);
    refused(&text, (6, "layers[0]"), "both give an embedding");
}

#[test]
fn a_layer_asks_for_a_residual_connection_and_must_keep_its_width() {
    let lstm = "kind = \"lstm\"\nhidden = 4";
    let text = file(
        DENSE,
        &[
            lstm,
            "kind = \"dense\"\nunits = 4\nresidual = true",
            "kind = \"layernorm\"",
        ],
    );
    let d = parse(&text).unwrap();
    let residual: Vec<bool> = d.head.layers.iter().map(|l| l.residual).collect();
    assert_eq!(residual, [true, false]);
    assert!(d.validate().is_ok());
    // Written back in both forms only where set.
    assert!(d.to_toml().contains("residual = true"));
    assert_eq!(parse(&d.to_toml_as_list()).unwrap(), d);
    let text = file(
        DENSE,
        &[lstm, "kind = \"dense\"\nunits = 4\nresidual = \"yes\""],
    );
    refused(&text, (12, "layers[1].residual"), "must be true or false");
    // A layer that changes the width cannot add its input to its output.
    let text = file(
        DENSE,
        &[lstm, "kind = \"dense\"\nunits = 5\nresidual = true"],
    );
    let e = parse(&text).unwrap().validate().unwrap_err().to_string();
    assert!(
        e.contains("`head.layers[0].residual` = true: the layer takes 4 features and gives 5"),
        "{e}"
    );
    let built = ModelDescription::builder()
        .features(3)
        .gru(4, 1)
        .dense(6, tensorfit_core::Activation::Relu)
        .residual()
        .classify(2)
        .build()
        .unwrap_err()
        .to_string();
    assert!(built.contains("head.layers[0].residual"), "{built}");
}
