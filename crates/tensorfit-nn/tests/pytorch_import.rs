//! PyTorch weights in and out. The state dicts under `tests/data/` were written by
//! `tests/data/state_dicts.py write-small` with `safetensors.torch.save_file(model.state_dict())`
//! for the seed network's small mirror, in f32, f16, bf16 and f64; the f32 one holds the
//! same values as `init.*` of the PyTorch reference file the agreement test uses
//! (`tests/data/seed_small_reference.safetensors`, same seed and construction). The
//! full-size round trip (PyTorch -> tensorfit checkpoint -> `load_state_dict`) runs
//! PyTorch itself, so it runs where PyTorch is installed and says why when it is not.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use safetensors::tensor::{Dtype, TensorView};
use tensorfit_core::{HostTensor, Shape};
use tensorfit_nn::{
    import_state_dict, Checkpoint, Init, ModelDescription, ParamKind, ParamSpec, ParamStore,
    SeedShape,
};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn small_shape() -> SeedShape {
    SeedShape::SMALL_REFERENCE
}

fn small() -> ModelDescription {
    small_shape().description()
}

fn import(dtype: &str) -> ParamStore {
    let path = data(&format!("seed_small_state_dict_{dtype}.safetensors"));
    import_state_dict(&small().param_specs().unwrap(), &path).unwrap()
}

fn scratch() -> PathBuf {
    tensorfit_testing::scratch_dir("import")
}

#[test]
fn a_pytorch_state_dict_imports_as_the_model_pytorch_built() {
    let got = import("f32");
    let reference = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/seed_small_reference.safetensors");
    let (want, _) = ParamStore::load(&reference, "init.").unwrap();
    assert_eq!(got, want);
    got.check_against(&small()).unwrap();
}

#[test]
fn f16_bf16_and_f64_state_dicts_import_rounded_to_nearest_like_pytorch() {
    let f32s = import("f32");
    let rounded = |f: fn(f32) -> f32| {
        let mut s = f32s.clone();
        s.iter_mut()
            .for_each(|(_, t)| t.data.iter_mut().for_each(|v| *v = f(*v)));
        s
    };
    assert_eq!(import("f16"), rounded(|v| half::f16::from_f32(v).to_f32()));
    assert_eq!(
        import("bf16"),
        rounded(|v| half::bf16::from_f32(v).to_f32())
    );
    assert_eq!(import("f64"), f32s);
    // The conversion is not the identity: half precision lost something.
    assert_ne!(import("f16"), f32s);
}

#[test]
fn a_state_dict_that_does_not_fit_names_every_missing_extra_and_misshapen_tensor() {
    // Two LSTM layers (the file has three), five classes (the file has six), and a
    // tensor the file lacks.
    let cfg = SeedShape {
        layers: 2,
        classes: 5,
        ..small_shape()
    }
    .description();
    let mut specs = cfg.param_specs().unwrap();
    specs.push(ParamSpec::trainable(
        "embedding.weight".into(),
        [65, 10],
        Init::Constant(0.0),
    ));
    let e = import_state_dict(&specs, &data("seed_small_state_dict_f16.safetensors"))
        .unwrap_err()
        .to_string();
    println!("{e}");
    for words in [
        "seed_small_state_dict_f16.safetensors: the state dict does not fit the model:",
        "`out.weight` is [6, 5] in the file, the model needs [5, 5]",
        "`out.bias` is [6] in the file, the model needs [5]",
        "missing: `embedding.weight` [65, 10]",
        "not in the model: `lstm.bias_hh_l2`, `lstm.bias_ih_l2`, `lstm.weight_hh_l2`, \
         `lstm.weight_ih_l2`",
    ] {
        assert!(e.contains(words), "no {words:?} in\n{e}");
    }
    assert!(!e.contains("num_batches_tracked"), "{e}");
}

#[test]
fn a_state_dict_of_the_other_direction_says_which_setting_differs() {
    // tools/bidirectional_reference.py's tagger: nn.LSTM(5, 6, 2 layers, bidirectional).
    let file =
        tensorfit_testing::repo_file("tests/data/bidirectional_tagger_state_dict.safetensors");
    let model = |bidirectional: bool| {
        let b = ModelDescription::builder().features(5).lstm(6, 2);
        let b = if bidirectional { b.bidirectional() } else { b };
        b.every_step().classify(4).build().unwrap()
    };
    assert!(import_state_dict(&model(true).param_specs().unwrap(), &file).is_ok());
    let e = import_state_dict(&model(false).param_specs().unwrap(), &file)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`lstm.weight_ih_l0_reverse`")
            && e.contains("give the model's recurrent layer `bidirectional = true`"),
        "{e}"
    );
    // One direction's state dict into a bidirectional model.
    let mut one_way = small();
    one_way.recurrent_mut().unwrap().bidirectional = true;
    let e = import_state_dict(
        &one_way.param_specs().unwrap(),
        &data("seed_small_state_dict_f32.safetensors"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("the model's stack is bidirectional and the state dict's is not"),
        "{e}"
    );
}

#[test]
fn integer_tensors_and_files_that_are_not_safetensors_are_errors_naming_them() {
    let dir = scratch();
    let spec = ParamSpec::trainable("w".into(), [2], Init::Constant(0.0));
    let bytes = [1u8; 16];
    let view = TensorView::new(Dtype::I64, vec![2], &bytes).unwrap();
    let ints = dir.join("ints.safetensors");
    std::fs::write(&ints, safetensors::serialize([("w", view)], None).unwrap()).unwrap();
    let e = import_state_dict(std::slice::from_ref(&spec), &ints)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ints.safetensors"), "{e}");
    assert!(
        e.contains("`w` has dtype I64; F32, F16, BF16 and F64 are read"),
        "{e}"
    );
    let text = dir.join("state_dict.pt");
    std::fs::write(&text, b"PK\x03\x04 a torch.save zip, not safetensors").unwrap();
    let e = import_state_dict(&[spec], &text).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: not a valid safetensors file", text.display())),
        "{e}"
    );
}

#[test]
fn tensors_holding_nan_or_infinity_are_errors_naming_each() {
    let dir = scratch();
    let specs = [
        ParamSpec::trainable("a".into(), [3], Init::Constant(0.0)),
        ParamSpec::trainable("b".into(), [2], Init::Constant(0.0)),
        ParamSpec::trainable("c".into(), [1], Init::Constant(0.0)),
    ];
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (a, b) = (f32s(&[1.0, f32::NAN, 2.0]), f32s(&[0.5, f32::INFINITY]));
    // 1e300 as F64 is beyond f32's range.
    let c = 1e300f64.to_le_bytes();
    let tensors = [
        ("a", TensorView::new(Dtype::F32, vec![3], &a).unwrap()),
        ("b", TensorView::new(Dtype::F32, vec![2], &b).unwrap()),
        ("c", TensorView::new(Dtype::F64, vec![1], &c).unwrap()),
    ];
    let path = dir.join("not_finite.safetensors");
    std::fs::write(&path, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let e = import_state_dict(&specs, &path).unwrap_err().to_string();
    for words in [
        "`a` holds NaN at element 1 (of 3)",
        "`b` holds inf at element 1 (of 2)",
        "`c` holds inf at element 0 (of 1)",
    ] {
        assert!(e.contains(words), "no {words:?} in\n{e}");
    }
}

/// A Python with torch and safetensors: `$TENSORFIT_PYTHON`, else `~/torchvenv/bin/python`
/// (tools/README.md), else none.
fn torch_python() -> Option<PathBuf> {
    let python = std::env::var_os("TENSORFIT_PYTHON")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join("torchvenv/bin/python")))?;
    let ok = Command::new(&python)
        .args(["-c", "import torch, safetensors"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

fn python(python: &Path, args: &[&Path]) -> String {
    let out = Command::new(python)
        .arg(data("state_dicts.py"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn the_seed_network_goes_from_pytorch_into_a_checkpoint_and_back_into_pytorch() {
    let Some(py) = torch_python() else {
        println!(
            "skipped: no Python with torch and safetensors (set TENSORFIT_PYTHON or install \
             ~/torchvenv as tools/README.md says)"
        );
        return;
    };
    let dir = scratch();
    let state_dict = dir.join("seed_state_dict.safetensors");
    python(&py, &[Path::new("write-seed"), &state_dict]);
    let cfg = ModelDescription::seed();
    let tensors = cfg.param_specs().unwrap().len();
    let params = import_state_dict(&cfg.param_specs().unwrap(), &state_dict).unwrap();
    // Adam's moments are in every training checkpoint; the Python side leaves them out.
    let mut optimizer = ParamStore::new();
    for spec in cfg.param_specs().unwrap() {
        if spec.kind == ParamKind::Trainable {
            for moment in ["m", "v"] {
                let zeros = HostTensor::zeros(Shape::new(spec.shape.dims()));
                optimizer.insert(&format!("adam.{moment}.{}", spec.name), zeros);
            }
        }
    }
    let checkpoint = dir.join("seed_checkpoint.safetensors");
    Checkpoint {
        config: cfg,
        params,
        optimizer,
        step: 1,
        extra: HashMap::new(),
    }
    .save(&checkpoint)
    .unwrap();
    let said = python(&py, &[Path::new("load-back"), &checkpoint, &state_dict]);
    println!("{said}");
    assert!(
        said.contains(&format!("loaded back: {tensors} tensors equal")),
        "{said}"
    );
}
