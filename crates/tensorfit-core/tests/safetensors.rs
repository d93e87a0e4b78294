//! tensorfit_core::safetensors against the `safetensors` crate, both ways, and broken
//! files: each a typed error naming what is wrong, never a panic.

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use safetensors::tensor::TensorView;
use tensorfit_core::safetensors::{
    header_bytes, read_header, serialize, Dtype, SafeTensors, SafetensorsError, TensorSpec,
};
use tensorfit_testing::files::safetensors as file_of;

/// Tensors of several dtypes and shapes: an empty one, a scalar (shape `[]`, one
/// element), bytes that differ everywhere.
fn samples() -> Vec<(&'static str, Dtype, Vec<usize>, Vec<u8>)> {
    let bytes = |n: usize| (0..n).map(|i| (i * 7 + 3) as u8).collect::<Vec<u8>>();
    vec![
        ("f32", Dtype::F32, vec![2, 3], bytes(24)),
        ("f16", Dtype::F16, vec![3], bytes(6)),
        ("bf16", Dtype::BF16, vec![1, 2], bytes(4)),
        ("f64", Dtype::F64, vec![2], bytes(16)),
        ("i64", Dtype::I64, vec![1], bytes(8)),
        ("i32", Dtype::I32, vec![2, 1], bytes(8)),
        ("u8", Dtype::U8, vec![5], bytes(5)),
        ("bool", Dtype::Bool, vec![3], vec![0, 1, 1]),
        ("layer.0.empty", Dtype::F32, vec![0, 4], vec![]),
        ("scalar", Dtype::F64, vec![], bytes(8)),
    ]
}

fn crate_dtype(dtype: Dtype) -> safetensors::Dtype {
    serde_json::from_value(serde_json::json!(dtype.name())).unwrap()
}

fn metadata() -> HashMap<String, String> {
    HashMap::from([
        ("format".to_string(), "pt".to_string()),
        ("step".to_string(), "7".to_string()),
    ])
}

#[test]
fn every_dtype_of_the_crate_has_our_name_and_size() {
    for dtype in Dtype::all() {
        let theirs = crate_dtype(dtype);
        assert_eq!(theirs.to_string(), dtype.name());
        assert_eq!(theirs.bitsize() as u64, dtype.bits(), "{dtype}");
    }
}

#[test]
fn files_the_crate_writes_read_back_tensor_for_tensor() {
    let samples = samples();
    let views: Vec<(&str, TensorView)> = samples
        .iter()
        .map(|(name, dtype, shape, data)| {
            let view = TensorView::new(crate_dtype(*dtype), shape.clone(), data).unwrap();
            (*name, view)
        })
        .collect();
    for meta in [None, Some(metadata())] {
        let bytes = safetensors::serialize(views.clone(), meta.clone()).unwrap();
        let file = SafeTensors::parse(&bytes).unwrap();
        assert_eq!(file.header().len(), samples.len());
        for (name, dtype, shape, data) in &samples {
            let t = file.tensor(name).unwrap();
            assert_eq!((t.dtype, t.shape, t.data), (*dtype, &shape[..], &data[..]));
        }
        let got: HashMap<String, String> = file.header().metadata().clone().into_iter().collect();
        assert_eq!(got, meta.unwrap_or_default());
        // The same through a stream that does not know the file's length (a pipe).
        let (header, json) = read_header(&mut &bytes[..], None).unwrap();
        assert_eq!(&header, file.header());
        assert_eq!(
            8 + json.len() as u64 + header.data_len(),
            bytes.len() as u64
        );
    }
}

#[test]
fn files_we_write_the_crate_reads_tensor_for_tensor() {
    let samples = samples();
    let tensors: Vec<(TensorSpec, &[u8])> = samples
        .iter()
        .map(|(name, dtype, shape, data)| {
            let spec = TensorSpec {
                name,
                dtype: *dtype,
                shape,
            };
            (spec, &data[..])
        })
        .collect();
    for meta in [HashMap::new(), metadata()] {
        let bytes = serialize(&tensors, &meta).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        assert_eq!(
            n % 8,
            0,
            "the header is padded to 8 bytes, as the crate pads it"
        );
        let (_, theirs) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(theirs.metadata().clone().unwrap_or_default(), meta);
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(file.len(), samples.len());
        for (name, dtype, shape, data) in &samples {
            let t = file.tensor(name).unwrap();
            assert_eq!(t.dtype(), crate_dtype(*dtype));
            assert_eq!((t.shape(), t.data()), (&shape[..], &data[..]));
        }
        // And we read our own.
        let ours = SafeTensors::parse(&bytes).unwrap();
        assert_eq!(ours.tensors().count(), samples.len());
    }
    // The same tensors give the same bytes.
    assert_eq!(
        serialize(&tensors, &metadata()).unwrap(),
        serialize(&tensors, &metadata()).unwrap()
    );
}

#[test]
fn tensors_no_file_can_hold_are_refused_when_writing() {
    let spec = |name, dtype, shape| TensorSpec { name, dtype, shape };
    let none: [(&str, &str); 0] = [];
    for (specs, says) in [
        (vec![spec("", Dtype::F32, &[1][..])], "named ``"),
        (
            vec![spec("__metadata__", Dtype::F32, &[1])],
            "`__metadata__`",
        ),
        (
            vec![spec("a", Dtype::F32, &[1]), spec("a", Dtype::F32, &[2])],
            "named `a`",
        ),
        (vec![spec("huge", Dtype::F64, &[usize::MAX, 2])], "`huge`"),
        (
            vec![spec("odd", Dtype::F4, &[3])],
            "not a whole number of bytes",
        ),
    ] {
        let e = header_bytes(&specs, none).unwrap_err().to_string();
        assert!(e.contains(says), "{says}: {e}");
    }
    let short = serialize(&[(spec("a", Dtype::F32, &[2]), &[0u8; 7][..])], none)
        .unwrap_err()
        .to_string();
    assert_eq!(
        short,
        "tensor `a`: 7 bytes of data where its shape and dtype need 8"
    );
}

/// A tensor's entry in a header.
fn entry(name: &str, dtype: &str, shape: &str, offsets: &str) -> String {
    format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}"#)
}

fn header(entries: &[String]) -> String {
    format!("{{{}}}", entries.join(","))
}

/// Our error for `bytes` (read whole), and whether the crate refuses them too.
fn refused(bytes: &[u8]) -> (SafetensorsError, bool) {
    let ours = SafeTensors::parse(bytes).unwrap_err();
    (ours, safetensors::SafeTensors::deserialize(bytes).is_err())
}

#[test]
fn broken_headers_are_typed_errors_naming_the_tensor() {
    let a = entry("a", "F32", "[2]", "[0,8]");
    let cases: Vec<(&str, Vec<u8>, &str, bool)> = vec![
        ("no length", vec![1, 0, 0], "it ends inside the header length", true),
        (
            "length past the end",
            file_of(&header(std::slice::from_ref(&a)), &[0; 8])[..20].to_vec(),
            "its header claims 54 bytes, the file has 20 in all",
            true,
        ),
        (
            "huge length",
            [(u64::MAX / 2).to_le_bytes().to_vec(), b"{}".to_vec()].concat(),
            "header length 9223372036854775807; a header is 2 to 100000000 bytes",
            true,
        ),
        (
            "not UTF-8",
            file_of("{\"\u{e9}\":1}", &[]).into_iter().map(|b| if b == 0xc3 { 0xff } else { b }).collect(),
            "not UTF-8",
            true,
        ),
        ("not JSON", file_of("{\"a\":", &[]), "header: EOF while parsing", true),
        ("an array", file_of("[1,2]", &[]), "the header is an array, not a JSON object", true),
        (
            "overlap",
            file_of(&header(&[a.clone(), entry("b", "F32", "[1]", "[4,8]")]), &[0; 8]),
            "invalid offset for tensor `b`: bytes 4..8 where the tensors before it end at 8",
            true,
        ),
        (
            "hole",
            file_of(&header(&[a.clone(), entry("b", "F32", "[1]", "[12,16]")]), &[0; 16]),
            "invalid offset for tensor `b`: bytes 12..16 where the tensors before it end at 8",
            true,
        ),
        (
            "backwards",
            file_of(&header(&[entry("b", "F32", "[0]", "[8,0]")]), &[]),
            "invalid offset for tensor `b`",
            true,
        ),
        (
            "wrong byte count",
            file_of(&header(&[entry("a", "F32", "[3]", "[0,8]")]), &[0; 8]),
            "tensor `a`: shape [3] of F32 is 12 bytes, its data offsets hold 8",
            true,
        ),
        (
            "bytes no tensor covers",
            file_of(&header(std::slice::from_ref(&a)), &[0; 12]),
            "its header describes 70 bytes, the file has 74: truncated or padded (4 bytes no tensor covers, at its end)",
            true,
        ),
        (
            "truncated data",
            file_of(&header(std::slice::from_ref(&a)), &[0; 4]),
            "its header describes 70 bytes, the file has 66: truncated or padded (4 bytes missing)",
            true,
        ),
        (
            "a tensor twice",
            file_of(&header(&[a.clone(), a.clone()]), &[0; 8]),
            "the header names `a` twice",
            // The crate keeps one of the two without a word.
            false,
        ),
        (
            "a metadata key twice",
            file_of(r#"{"__metadata__":{"k":"1","k":"2"}}"#, &[]),
            "`__metadata__` gives `k` twice",
            false,
        ),
        (
            "metadata not strings",
            file_of(r#"{"__metadata__":{"k":1}}"#, &[]),
            "`__metadata__` gives `k` a number, not a string",
            true,
        ),
        (
            "a field twice",
            file_of(r#"{"a":{"dtype":"F32","dtype":"I64","shape":[2],"data_offsets":[0,8]}}"#, &[0; 8]),
            "tensor `a`: gives `dtype` twice",
            true,
        ),
        (
            "no shape",
            file_of(r#"{"a":{"dtype":"F32","data_offsets":[0,8]}}"#, &[0; 8]),
            "tensor `a`: has no `shape`",
            true,
        ),
        (
            "negative offset",
            file_of(&header(&[entry("a", "F32", "[2]", "[-8,0]")]), &[]),
            "tensor `a`: its data_offsets is an array holding a number that is not a whole number from 0",
            true,
        ),
        (
            "three offsets",
            file_of(&header(&[entry("a", "F32", "[2]", "[0,8,8]")]), &[0; 8]),
            "tensor `a`: its data_offsets are 3 numbers, not 2",
            true,
        ),
        (
            "unknown dtype",
            file_of(&header(&[entry("a", "F128", "[2]", "[0,8]")]), &[0; 8]),
            "tensor `a` has dtype `F128`, which the safetensors format does not have",
            true,
        ),
        (
            "shape overflow",
            file_of(&header(&[entry("a", "F32", "[4294967296,4294967296]", "[0,8]")]), &[0; 8]),
            "tensor `a`: the byte count of its shape overflows",
            true,
        ),
        (
            "bytes overflow",
            file_of(&header(&[entry("a", "F64", "[4611686018427387904]", "[0,8]")]), &[0; 8]),
            "tensor `a`: the byte count of its shape overflows",
            true,
        ),
        (
            "too deep",
            file_of(&format!("{{\"a\":{}}}", "[".repeat(10_000)), &[]),
            "header: recursion limit exceeded",
            true,
        ),
    ];
    for (case, bytes, says, crate_refuses) in cases {
        let (ours, theirs) = refused(&bytes);
        let message = ours.to_string();
        assert!(message.contains(says), "{case}: {message}");
        assert_eq!(theirs, crate_refuses, "{case}: the crate refuses it too");
    }
}

#[test]
fn a_header_describing_more_bytes_than_a_u64_counts_is_refused() {
    // Eight tensors of 2^61 - 1 bytes each: every count fits, their sum with the header
    // does not. (Not given to the crate, whose sum overflows: a panic in a test build.)
    let size = (1u64 << 61) - 1;
    let entries: Vec<String> = (0..8)
        .map(|k| {
            let offsets = format!("[{},{}]", k * size, (k + 1) * size);
            entry(&format!("t{k}"), "U8", &format!("[{size}]"), &offsets)
        })
        .collect();
    let e = SafeTensors::parse(&file_of(&header(&entries), &[])).unwrap_err();
    assert!(matches!(e, SafetensorsError::TooLarge), "{e}");
}

#[test]
fn a_stream_ending_early_is_truncated_not_an_io_error() {
    let bytes = file_of(&header(&[entry("a", "F32", "[2]", "[0,8]")]), &[0; 8]);
    let e = read_header(&mut &bytes[..20], None).unwrap_err();
    assert!(
        matches!(e, SafetensorsError::Truncated { what: "the header" }),
        "{e:?}"
    );
    let path = std::path::Path::new("dir/x.safetensors");
    assert_eq!(
        e.in_file(path).to_string(),
        "dir/x.safetensors: not a valid safetensors file (it ends inside the header)"
    );
}

#[test]
fn every_cut_and_every_flipped_byte_of_a_file_is_an_error_or_a_file_never_a_panic() {
    let samples = samples();
    let tensors: Vec<(TensorSpec, &[u8])> = samples
        .iter()
        .map(|(name, dtype, shape, data)| {
            (
                TensorSpec {
                    name,
                    dtype: *dtype,
                    shape,
                },
                &data[..],
            )
        })
        .collect();
    let bytes = serialize(&tensors, &metadata()).unwrap();
    for cut in 0..bytes.len() {
        assert!(SafeTensors::parse(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut flipped = bytes.clone();
    for i in 0..bytes.len() {
        for bit in [0x01, 0x20, 0x80] {
            flipped[i] ^= bit;
            // Either refused, or a file whose tensors all lie inside it.
            if let Ok(file) = SafeTensors::parse(&flipped) {
                assert!(file.tensors().all(|(_, t)| t.data.len() <= flipped.len()));
            }
            flipped[i] ^= bit;
        }
    }
}
