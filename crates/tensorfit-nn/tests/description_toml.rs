//! Model description files: the examples in `examples/models/` parse to what they say,
//! descriptions round-trip through `to_toml`, and every kind of bad file is an error that
//! names its line, column and key path (each case below was tried by hand first; the
//! messages are what a user sees).

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tensorfit_core::Activation;
use tensorfit_nn::{
    BodyLayer, Cell, Conv1dSpec, ConvPadding, DescriptionError, DropoutRate, EncoderSpec,
    HeadLayer, HeadLayerKind, HeadOn, HeadSpec, InputSpec, LossSpec, ModelDescription,
    PositionEncoding, PositionsSpec, RecurrentSpec,
};
use tensorfit_testing::repo_file;

fn example(name: &str) -> PathBuf {
    repo_file("examples/models").join(name)
}

fn parse(text: &str) -> Result<ModelDescription, DescriptionError> {
    ModelDescription::from_toml(text, Path::new("my.toml"))
}

#[test]
fn the_seed_example_parses_to_the_seed_preset() {
    let d = ModelDescription::load(&example("seed.toml")).unwrap();
    assert_eq!(d, ModelDescription::seed());
}

#[test]
fn every_example_parses_to_the_model_its_comments_describe() {
    let gru = ModelDescription::load(&example("gru_classifier.toml")).unwrap();
    assert_eq!(gru.recurrent().unwrap().cell, Cell::Gru);
    assert_eq!(gru.recurrent().unwrap().layers, 2);
    assert_eq!(gru.head.on, HeadOn::LAST_STEP);
    assert_eq!(gru.head.layers[0].name, "head.0");
    assert!(matches!(gru.loss, LossSpec::SoftmaxCrossEntropy { .. }));

    let lm = ModelDescription::load(&example("char_lm.toml")).unwrap();
    assert_eq!(
        lm.input,
        InputSpec::Tokens {
            vocab: 65,
            embedding: None
        }
    );
    assert_eq!(lm.recurrent().unwrap().cell, Cell::Lstm);
    assert_eq!(lm.head.on, HeadOn::EveryStep);
    assert!(lm.head.layers.is_empty());
    assert_eq!(lm.loss, LossSpec::SoftmaxCrossEntropy { classes: 65 });

    let reg = ModelDescription::load(&example("regression.toml")).unwrap();
    assert_eq!(reg.loss, LossSpec::MeanSquaredError { outputs: 2 });
    assert_eq!(
        reg.head.layers[0].kind,
        HeadLayerKind::Dense {
            units: 32,
            activation: Activation::Tanh
        }
    );
}

#[test]
fn the_bare_lstm_presets_are_the_example_and_the_script_models() {
    let lm = ModelDescription::load(&example("char_lm.toml")).unwrap();
    assert_eq!(lm, ModelDescription::lstm_language_model(65, 256, 2));
    // `scripts/lstm-classifier-toml.sh FEATURES HIDDEN CLASSES`: the one-layer classifier.
    let script = repo_file("scripts/lstm-classifier-toml.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["152", "12", "6"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}: {text}", script.display());
    let classifier = ModelDescription::lstm_classifier(152, 12, 1, 6);
    assert_eq!(parse(&text).unwrap(), classifier);
}

#[test]
fn every_example_reads_back_the_same_from_its_to_toml() {
    let mut names: Vec<String> = std::fs::read_dir(repo_file("examples/models"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        let d = ModelDescription::load(&example(name)).unwrap();
        assert_eq!(parse(&d.to_toml()).unwrap(), d, "{name}");
        // The same model as one `[[layers]]` list.
        assert_eq!(parse(&d.to_toml_as_list()).unwrap(), d, "{name}");
    }
}

/// The seed's description without its `head.layers` array.
fn seed_without_head_layers() -> String {
    let seed = ModelDescription::seed().to_toml();
    let start = seed.find("layers = [").unwrap();
    let end = start + seed[start..].find("]\n").unwrap() + 2;
    format!("{}{}", &seed[..start], &seed[end..])
}

#[test]
fn head_layers_may_be_written_as_an_array_of_tables_and_default_to_none() {
    let tables = "\n[[head.layers]]\nkind = \"batchnorm\"\nname = \"bn1\"\n\n\
                  [[head.layers]]\nkind = \"dense\"\nunits = 100\nactivation = \"tanh\"\n\
                  name = \"dense\"\n\n[[head.layers]]\nkind = \"batchnorm\"\nname = \"bn2\"\n";
    let text = seed_without_head_layers().replace("\n[loss]", &format!("{tables}\n[loss]"));
    assert!(text.contains("[[head.layers]]"), "{text}");
    assert_eq!(parse(&text).unwrap(), ModelDescription::seed());
    // Without `layers` the head is the output layer alone; without `activation` a dense
    // layer is linear, as nn.Linear.
    assert!(parse(&seed_without_head_layers())
        .unwrap()
        .head
        .layers
        .is_empty());
    let seed = ModelDescription::seed().to_toml();
    let linear = parse(&seed.replace(", activation = \"tanh\"", "")).unwrap();
    assert_eq!(
        linear.head.layers[1].kind,
        HeadLayerKind::Dense {
            units: 100,
            activation: Activation::Identity
        }
    );
}

/// `ModelDescription::seed().to_toml()`, line by line, is the base every bad case edits:
/// `[input]` is line 1, `[recurrent]` 5, `[head]` 10, the head layers 13 to 15, `[loss]` 18.
#[test]
fn each_bad_description_is_an_error_naming_its_line_column_and_key() {
    let base = ModelDescription::seed().to_toml();
    assert_eq!(
        base.lines().nth(13),
        Some("  { kind = \"dense\", units = 100, activation = \"tanh\", name = \"dense\" },")
    );
    // (edit from, edit to, line, key, words the message must hold)
    let cases: &[(&str, &str, usize, &str, &str)] = &[
        ("features = 152", "features = 0", 3, "input.features", "`input.features` must be at least 1, got 0"),
        ("hidden = 250", "hidden = -4", 7, "recurrent.hidden", "must be at least 1, got -4"),
        ("layers = 3", "layers = 3.0", 8, "recurrent.layers", "`recurrent.layers` must be a whole number of at least 1, not float"),
        ("hidden = 250", "hidden = \"250\"", 7, "recurrent.hidden", "must be a whole number of at least 1, not string"),
        ("features = 152", "features = 99999999999999999999", 3, "input.features", "is too large"),
        ("units = 100", "units = 0", 14, "head.layers[1].units", "`head.layers[1].units` must be at least 1, got 0"),
        ("units = 100, ", "units = 100, size = 3, ", 14, "head.layers[1].size", "unknown key `head.layers[1].size`; `head.layers[1]` of kind \"dense\" takes \"kind\", \"units\", \"activation\", \"name\" or \"residual\""),
        ("cell = \"lstm\"", "cell = \"rnn\"", 6, "recurrent.cell", "`recurrent.cell` = \"rnn\" is not one of \"lstm\" or \"gru\""),
        ("cell = \"lstm\"", "cell = 1", 6, "recurrent.cell", "must be a string, one of \"lstm\" or \"gru\", not integer"),
        ("on = \"last\"", "on = \"first\"", 11, "head.on", "is not one of \"last\", \"mean\", \"max\" or \"every_step\""),
        ("activation = \"tanh\"", "activation = \"swish\"", 14, "head.layers[1].activation", "\"swish\" is not one of \"identity\", \"relu\", \"tanh\", \"sigmoid\" or \"gelu\""),
        ("kind = \"batchnorm\", name = \"bn1\"", "kind = \"groupnorm\", name = \"bn1\"", 13, "head.layers[0].kind", "is not one of \"batchnorm\", \"layernorm\", \"dense\" or \"dropout\""),
        ("layers = 3\n", "layers = 3\ndropout = 1.5\n", 9, "recurrent.dropout", "`recurrent.dropout` must be at least 0 and less than 1"),
        ("layers = 3\n", "layers = 3\ndropout = \"0.2\"\n", 9, "recurrent.dropout", "must be a number in [0, 1), not string"),
        ("{ kind = \"batchnorm\", name = \"bn2\" }", "{ kind = \"dropout\", name = \"bn2\" }", 15, "head.layers[2].p", "missing key `head.layers[2].p`"),
        ("{ kind = \"batchnorm\", name = \"bn2\" }", "{ kind = \"dropout\", p = -0.1 }", 15, "head.layers[2].p", "got -0.1"),
        ("{ kind = \"batchnorm\", name = \"bn2\" }", "{ kind = \"dropout\", p = 0.1, units = 3 }", 15, "head.layers[2].units", "of kind \"dropout\" takes \"kind\", \"p\", \"name\" or \"residual\""),
        ("{ kind = \"batchnorm\", name = \"bn2\" }", "{ name = \"bn2\" }", 15, "head.layers[2].kind", "missing key `head.layers[2].kind` in `head.layers[2]`"),
        ("{ kind = \"batchnorm\", name = \"bn2\" }", "\"bn2\"", 15, "head.layers[2]", "`head.layers[2]` must be a table like"),
        ("kind = \"cross_entropy\"", "kind = \"hinge\"", 19, "loss.kind", "is not one of \"cross_entropy\" or \"mse\""),
        ("features = 152\n", "features = 152\nembedding = 32\n", 4, "input.embedding", "unknown key `input.embedding`; `input` of kind \"dense\" takes \"kind\" or \"features\""),
        ("kind = \"dense\"\nfeatures", "kind = \"tokens\"\nfeatures", 3, "input.features", "unknown key `input.features`; `input` of kind \"tokens\" takes \"kind\", \"vocab\" or \"embedding\""),
        ("kind = \"cross_entropy\"", "kind = \"mse\"", 20, "loss.classes", "unknown key `loss.classes`; `loss` of kind \"mse\" takes \"kind\" or \"outputs\""),
        ("classes = 6", "outputs = 6", 20, "loss.outputs", "`loss` of kind \"cross_entropy\" takes \"kind\" or \"classes\""),
        ("hidden = 250\n", "", 5, "recurrent.hidden", "missing key `recurrent.hidden` in `recurrent`"),
        ("[loss]\nkind = \"cross_entropy\"\nclasses = 6\n", "", 1, "loss", "missing key `loss` in a model description"),
        ("name = \"bn2\"", "name = \"bn1\"", 15, "head.layers[2].name", "`head.layers[2].name` = \"bn1\" is also the name of `head.layers[0]` (line 13)"),
        ("name = \"bn2\"", "name = \"out\"", 15, "head.layers[2].name", "is the name of another part of the network"),
        ("name = \"bn2\"", "name = \"bn 2\"", 15, "head.layers[2].name", "a name is words of letters, digits and `_` joined by `.`"),
        ("name = \"bn2\"", "name = 2", 15, "head.layers[2].name", "must be a string, not integer"),
        ("layers = [\n", "layers = 3\n[\n", 14, "", "not valid TOML"),
        ("[input]\nkind = \"dense\"\nfeatures = 152\n", "input = 152\n", 1, "input", "`input` must be a table, not integer"),
        ("[recurrent]", "[optimizer]\nlr = 1\n\n[recurrent]", 5, "optimizer", "unknown key `optimizer`; a model description takes \"input\", \"layers\", \"recurrent\", \"head\", \"loss\" or \"training\""),
        ("classes = 6", "classes = ", 20, "", "not valid TOML"),
        // A key or table given twice is named.
        ("hidden = 250\n", "hidden = 250\nhidden = 8\n", 8, "", "not valid TOML: duplicate key `hidden`: each table and key is given once"),
        ("classes = 6\n", "classes = 6\n[loss]\nkind = \"mse\"\n", 21, "", "not valid TOML: duplicate key `loss`"),
    ];
    let not_an_array =
        seed_without_head_layers().replace("on = \"last\"", "on = \"last\"\nlayers = \"bn1\"");
    let e = parse(&not_an_array).unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (12, "head.layers"), "{e}");
    assert!(
        e.message
            .contains("`head.layers` must be an array of tables, not string"),
        "{e}"
    );
    // A default name (`head.{i}`) taken by a name given earlier.
    let taken = base
        .replace("name = \"bn1\"", "name = \"head.2\"")
        .replace(", name = \"bn2\"", "");
    let e = parse(&taken).unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (15, "head.layers[2].name"), "{e}");
    assert!(
        e.message.contains(
            "`head.layers[2]` is named \"head.2\" by default, and that is also the name of \
             `head.layers[0]` (line 13)"
        ),
        "{e}"
    );
    for &(from, to, line, key, words) in cases {
        assert!(base.contains(from), "the base has no {from:?}");
        let text = base.replacen(from, to, 1);
        let e = parse(&text).expect_err(&text);
        println!("{to:?}\n  -> {e}");
        assert_eq!((e.line, e.key.as_str()), (line, key), "{e}\n{text}");
        assert!(e.message.contains(words), "{e}");
        assert_eq!(e.path, "my.toml");
        assert!(
            e.to_string().starts_with(&format!("my.toml:{line}:")),
            "{e}"
        );
    }
}

#[test]
fn columns_count_characters_from_one() {
    let base = ModelDescription::seed().to_toml();
    let e = parse(&base.replace("hidden = 250", "hidden = 0")).unwrap_err();
    assert_eq!((e.line, e.column), (7, 10), "{e}");
    // A multi-byte character before the value counts once.
    let e = parse(&base.replace("hidden = 250", "hidden = 0 # größe")).unwrap_err();
    assert_eq!(e.column, 10);
    let e = parse(&base.replace("name = \"bn1\" }", "name = \"bé\" , x = 1 }")).unwrap_err();
    assert_eq!(
        (e.line, e.column, e.key.as_str()),
        (13, 39, "head.layers[0].x"),
        "{e}"
    );
}

#[test]
fn files_that_are_not_descriptions_fail_with_their_name() {
    let dir = tensorfit_testing::scratch_dir("description-toml");
    let binary = dir.join("binary.toml");
    std::fs::write(&binary, b"[input]\nkind = \"de\xffnse\"\n").unwrap();
    let e = ModelDescription::load(&binary).unwrap_err();
    assert_eq!((e.line, e.column), (2, 11), "{e}");
    assert!(e.to_string().contains("binary.toml:2:11: not UTF-8"), "{e}");
    let e = ModelDescription::load(&dir.join("absent.toml")).unwrap_err();
    assert!(e.to_string().contains("absent.toml"), "{e}");
    let e = ModelDescription::load(Path::new("/dev/zero")).unwrap_err();
    assert!(e.message.contains("larger than"), "{e}");
    // Into the libraries' error, still naming file, line and key.
    let core = parse("[input]\nkind = 3\n").unwrap_err().into_error();
    assert_eq!(
        core.to_string(),
        "my.toml: line 2, column 8: `input.kind` must be a string, one of \"dense\" or \"tokens\", not integer"
    );
}

fn description() -> impl Strategy<Value = ModelDescription> {
    let size = 1usize..5000;
    let input = prop_oneof![
        size.clone()
            .prop_map(|features| InputSpec::Dense { features }),
        (size.clone(), proptest::option::of(size.clone()))
            .prop_map(|(vocab, embedding)| InputSpec::Tokens { vocab, embedding }),
    ];
    let cell = prop_oneof![Just(Cell::Lstm), Just(Cell::Gru)];
    let activation = prop_oneof![
        Just(Activation::Identity),
        Just(Activation::Relu),
        Just(Activation::Tanh),
        Just(Activation::Sigmoid),
        Just(Activation::Gelu),
    ];
    let rate = prop_oneof![Just(0.0f32), 0.0f32..1.0].prop_map(|p| DropoutRate::new(p).unwrap());
    let kind = prop_oneof![
        Just(HeadLayerKind::BatchNorm),
        Just(HeadLayerKind::LayerNorm),
        (size.clone(), activation.clone())
            .prop_map(|(units, activation)| HeadLayerKind::Dense { units, activation }),
        rate.clone().prop_map(|p| HeadLayerKind::Dropout { p }),
    ];
    // Given names are distinct (`n{i}`), or the default `head.{i}`.
    let layers =
        proptest::collection::vec((kind, any::<bool>(), any::<bool>()), 0..5).prop_map(|ls| {
            ls.into_iter()
                .enumerate()
                .map(|(i, (kind, named, residual))| HeadLayer {
                    name: if named {
                        format!("n{i}.x_{i}")
                    } else {
                        format!("head.{i}")
                    },
                    kind,
                    residual,
                })
                .collect()
        });
    let on = proptest::sample::select(HeadOn::SPELLINGS.map(|(_, on)| on).to_vec());
    let loss = prop_oneof![
        size.clone()
            .prop_map(|classes| LossSpec::SoftmaxCrossEntropy { classes }),
        size.clone()
            .prop_map(|outputs| LossSpec::MeanSquaredError { outputs }),
    ];
    let recurrent = (
        cell,
        size.clone(),
        size.clone(),
        rate.clone(),
        any::<bool>(),
    )
        .prop_map(
            |(cell, hidden, layers, dropout, bidirectional)| RecurrentSpec {
                cell,
                hidden,
                layers,
                dropout,
                bidirectional,
            },
        );
    // Convolutions before and after an optional recurrent stack (at least one layer),
    // each named `c{i}` or by default `body.{i}`, its place in the body.
    let conv = (
        size.clone(),
        1usize..9,
        1usize..5,
        any::<bool>(),
        activation,
        any::<bool>(),
        any::<bool>(),
    );
    let convs = proptest::collection::vec(conv, 0..3);
    // Positions and a Transformer encoder at the body's end, each maybe.
    let positions = prop_oneof![
        Just(PositionEncoding::Sinusoidal),
        size.clone()
            .prop_map(|max_len| PositionEncoding::Learned { max_len }),
    ];
    let encoder = (
        1usize..4,
        1usize..5,
        size,
        rate,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(layers, heads, feedforward, dropout, gelu, norm_first, causal, final_norm)| {
                let mut e = EncoderSpec::new("", layers, heads);
                e.feedforward = feedforward;
                e.dropout = dropout;
                e.activation = if gelu {
                    Activation::Gelu
                } else {
                    Activation::Relu
                };
                e.norm_first = norm_first;
                e.causal = causal;
                e.final_norm = final_norm;
                e
            },
        );
    let ends = (
        proptest::option::of(positions),
        proptest::option::of(encoder),
    );
    let body = (proptest::option::of(recurrent), convs.clone(), convs, ends).prop_map(
        |(recurrent, before, after, (positions, encoder))| {
            let conv = |(channels, kernel, dilation, causal, activation, residual, named)| {
                BodyLayer::Conv1d(Conv1dSpec {
                    name: if named { "c".into() } else { String::new() },
                    channels,
                    kernel,
                    dilation,
                    padding: if causal {
                        ConvPadding::Causal
                    } else {
                        ConvPadding::Same
                    },
                    activation,
                    residual,
                })
            };
            let mut body: Vec<BodyLayer> = before.into_iter().map(conv).collect();
            body.extend(recurrent.map(BodyLayer::Recurrent));
            body.extend(after.into_iter().map(conv));
            body.extend(positions.map(|encoding| {
                BodyLayer::Positions(PositionsSpec {
                    name: String::new(),
                    encoding,
                })
            }));
            body.extend(encoder.map(BodyLayer::Encoder));
            if body.is_empty() {
                body.push(conv((4, 3, 1, true, Activation::Relu, false, false)));
            }
            for (i, layer) in body.iter_mut().enumerate() {
                let name = match layer {
                    BodyLayer::Conv1d(c) => &mut c.name,
                    BodyLayer::Positions(p) => &mut p.name,
                    BodyLayer::Encoder(e) => &mut e.name,
                    BodyLayer::Recurrent(_) => continue,
                };
                *name = match name.is_empty() {
                    true => format!("body.{i}"),
                    false => format!("c{i}"),
                };
            }
            body
        },
    );
    (input, body, on, layers, loss).prop_map(|(input, body, on, layers, loss)| ModelDescription {
        input,
        body,
        head: HeadSpec { on, layers },
        loss,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn any_description_reads_back_the_same_from_its_toml_in_either_form_and_its_json(d in description()) {
        prop_assert_eq!(&parse(&d.to_toml()).unwrap(), &d);
        prop_assert_eq!(&parse(&d.to_toml_as_list()).unwrap(), &d);
        // And as a checkpoint stores it (reading it back checks the whole model).
        if d.validate().is_ok() {
            let json = tensorfit_nn::description_json::to_json(&d);
            prop_assert_eq!(tensorfit_nn::description_json::from_json(&json).unwrap(), d);
        }
    }
}
