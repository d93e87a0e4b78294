//! The pipeline: the split and every epoch's order follow from the seed; batches group
//! similar lengths and pad only to their longest; the reader runs ahead a bounded number
//! of batches; a text's windows come in stream order with the state carried.

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use tensorfit_data::{
    epoch_order, length_grouped_batches, max_batch_bytes, open, same_length_batches,
    shuffled_batches, split, stream_batches, Batch, BatchInputs, BatchOrder, BatchSettings,
    Batches, CharCorpus, CharWindows, Opened, ReadSettings, Source, Values,
};
use tensorfit_testing::repo_file;

fn example(name: &str) -> PathBuf {
    repo_file("examples/data").join(name)
}

fn toy() -> Arc<dyn Source> {
    match open(&example("classify.safetensors"), &ReadSettings::default()).unwrap() {
        Opened::Sequences(s) => s,
        Opened::Corpus(_) => panic!("opened as a corpus"),
    }
}

fn settings(batch: usize) -> BatchSettings {
    BatchSettings {
        batch,
        seed: 11,
        ..BatchSettings::default()
    }
}

#[test]
fn the_split_is_the_same_for_the_same_seed_and_covers_every_sequence_once() {
    let (train, val) = split(100, 0.2, 3).unwrap();
    assert_eq!((train.len(), val.len()), (80, 20));
    assert_eq!(split(100, 0.2, 3).unwrap(), (train.clone(), val.clone()));
    assert_ne!(
        split(100, 0.2, 4).unwrap().1,
        val,
        "another seed, another split"
    );
    let mut all: Vec<usize> = train.iter().chain(&val).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
}

#[test]
fn a_split_that_leaves_nothing_to_train_on_is_refused() {
    assert!(split(1, 0.9, 0).is_err());
    assert!(split(10, 1.0, 0).is_err());
}

#[test]
fn each_epoch_has_its_own_order_and_the_same_epoch_the_same_order() {
    let s = toy();
    let all: Vec<usize> = (0..12).collect();
    let e0 = epoch_order(s.as_ref(), &all, 0, &settings(3)).unwrap();
    assert_eq!(e0, epoch_order(s.as_ref(), &all, 0, &settings(3)).unwrap());
    assert_ne!(e0, epoch_order(s.as_ref(), &all, 1, &settings(3)).unwrap());
    let mut seen: Vec<usize> = e0.concat();
    seen.sort_unstable();
    assert_eq!(seen, all);
}

#[test]
fn batches_group_similar_lengths_together() {
    // 200 sequences of lengths 1..=200 in random file order: grouped batches of 10 span
    // a few lengths each, where ungrouped ones would span most of the range.
    let lengths: Vec<usize> = (0..200).map(|i| (i * 73) % 200 + 1).collect();
    let s = FakeSource::new(lengths);
    let grouped = epoch_order(&s, &(0..200).collect::<Vec<_>>(), 0, &settings(10)).unwrap();
    let ungrouped_settings = BatchSettings {
        group: 1,
        ..settings(10)
    };
    let ungrouped = epoch_order(&s, &(0..200).collect::<Vec<_>>(), 0, &ungrouped_settings).unwrap();
    let spread = |order: &[Vec<usize>]| -> usize {
        order
            .iter()
            .map(|b| {
                let l: Vec<usize> = b.iter().map(|&i| s.lengths()[i]).collect();
                l.iter().max().unwrap() - l.iter().min().unwrap()
            })
            .sum::<usize>()
            / order.len()
    };
    assert!(
        spread(&grouped) < 15,
        "grouped batches span {} steps",
        spread(&grouped)
    );
    assert!(
        spread(&ungrouped) > 100,
        "ungrouped batches span {} steps",
        spread(&ungrouped)
    );
}

#[test]
fn same_length_batches_hold_one_length_each_cover_every_sequence_once_and_keep_lengths_together() {
    let source = toy();
    let lengths = source.lengths();
    let all: Vec<usize> = (0..lengths.len()).collect();
    for seed in [None, Some(1), Some(2)] {
        let batches = same_length_batches(lengths, &all, 2, seed).unwrap();
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, all);
        let batch_lengths: Vec<usize> = batches.iter().map(|b| lengths[b[0]]).collect();
        for (b, &len) in batches.iter().zip(&batch_lengths) {
            assert!(
                b.len() <= 2 && b.iter().all(|&i| lengths[i] == len),
                "{b:?}"
            );
        }
        // Each length's batches are consecutive: the shape changes once per length.
        let mut changes = batch_lengths.clone();
        changes.dedup();
        let mut distinct = changes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(changes.len(), distinct.len(), "{batch_lengths:?}");
        if seed.is_none() {
            assert!(batch_lengths.is_sorted());
        }
    }
    let a = same_length_batches(lengths, &all, 2, Some(1)).unwrap();
    assert_eq!(a, same_length_batches(lengths, &all, 2, Some(1)).unwrap());
    assert_ne!(a, same_length_batches(lengths, &all, 2, None).unwrap());
}

#[test]
fn length_grouped_batches_cover_every_sequence_once_pad_little_and_keep_padded_lengths_together() {
    // 200 sequences of lengths 1..=40 in a scrambled file order.
    let lengths: Vec<usize> = (0..200).map(|i| (i * 37) % 40 + 1).collect();
    let all: Vec<usize> = (0..lengths.len()).collect();
    let padding = |batches: &[Vec<usize>]| -> usize {
        let pad = |b: &Vec<usize>| {
            let longest = b.iter().map(|&i| lengths[i]).max().unwrap();
            b.iter().map(|&i| longest - lengths[i]).sum::<usize>()
        };
        batches.iter().map(pad).sum()
    };
    let in_file_order: Vec<Vec<usize>> = all.chunks(8).map(<[usize]>::to_vec).collect();
    for seed in [None, Some(1), Some(2)] {
        let batches = length_grouped_batches(&lengths, &all, 8, 5, seed).unwrap();
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, all);
        assert!(batches.iter().all(|b| !b.is_empty() && b.len() <= 8));
        assert!(
            padding(&batches) * 4 < padding(&in_file_order),
            "{seed:?}: {} padded steps grouped, {} in file order",
            padding(&batches),
            padding(&in_file_order)
        );
        let padded: Vec<usize> = batches
            .iter()
            .map(|b| b.iter().map(|&i| lengths[i]).max().unwrap())
            .collect();
        let mut changes = padded.clone();
        changes.dedup();
        let mut distinct = changes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(changes.len(), distinct.len(), "{padded:?}");
        if seed.is_none() {
            assert!(padded.is_sorted());
        }
    }
    let a = length_grouped_batches(&lengths, &all, 8, 5, Some(1)).unwrap();
    assert_eq!(
        a,
        length_grouped_batches(&lengths, &all, 8, 5, Some(1)).unwrap()
    );
    assert_ne!(
        a,
        length_grouped_batches(&lengths, &all, 8, 5, Some(2)).unwrap()
    );
    assert!(length_grouped_batches(&lengths, &[200], 8, 5, None).is_err());
}

#[test]
fn shuffled_batches_cover_every_sequence_once_keep_the_last_partial_batch_and_follow_the_seed() {
    let all: Vec<usize> = (0..50).collect();
    let a = shuffled_batches(&all, 8, 1).unwrap();
    // 6 batches of 8 and the last of 2 (PyTorch's drop_last=False).
    let sizes: Vec<usize> = a.iter().map(Vec::len).collect();
    assert_eq!(sizes, [8, 8, 8, 8, 8, 8, 2]);
    let mut seen: Vec<usize> = a.concat();
    assert_ne!(seen, all, "the order is shuffled");
    seen.sort_unstable();
    assert_eq!(seen, all);
    assert_eq!(a, shuffled_batches(&all, 8, 1).unwrap());
    assert_ne!(a, shuffled_batches(&all, 8, 2).unwrap());
    assert!(shuffled_batches(&all, 0, 1).is_err());
    assert_eq!(
        BatchOrder::parse("length-grouped").unwrap(),
        BatchOrder::LengthGrouped
    );
    for o in BatchOrder::ALL {
        assert_eq!(BatchOrder::parse(o.name()).unwrap(), o);
    }
    assert!(BatchOrder::parse("sorted").is_err());
}

#[test]
fn a_batch_is_time_major_and_padded_only_to_its_longest_sequence() {
    let s = toy();
    let no_shuffle = BatchSettings {
        shuffle: false,
        group: 1,
        ..settings(3)
    };
    let batches: Vec<Batch> = Batches::start(s.clone(), &[0, 1, 2], 0, &no_shuffle)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    assert_eq!(b.ids, vec![0, 1, 2]);
    assert_eq!(b.lengths, s.lengths()[..3].to_vec());
    assert_eq!(b.steps, *b.lengths.iter().max().unwrap());
    let BatchInputs::Dense(x) = &b.inputs else {
        panic!("dense inputs")
    };
    assert_eq!(x.shape.dims(), &[b.steps, 3, 3]);
    let mut r = s.reader().unwrap();
    for row in 0..3 {
        let e = r.read(row).unwrap();
        let Values::F32(v) = &e.inputs else { panic!() };
        for t in 0..b.steps {
            let got = &x.data[(t * 3 + row) * 3..(t * 3 + row) * 3 + 3];
            if t < e.len {
                assert_eq!(got, &v[t * 3..t * 3 + 3], "row {row} step {t}");
            } else {
                assert_eq!(got, &[0.0; 3], "row {row} step {t} is padding");
            }
        }
        let (Values::Ids(want), Values::Ids(got)) = (&e.labels, &b.labels) else {
            panic!("class ids")
        };
        assert_eq!(got[row], want[0], "row {row}'s label");
    }
}

#[test]
fn an_absurd_batch_or_read_ahead_counts_the_data_there_is() {
    let s = FakeSource::new(vec![50; 10]);
    // No batch holds more than the 10 sequences, and the count does not overflow.
    let all = max_batch_bytes(s.dataset(), 10);
    assert_eq!(max_batch_bytes(s.dataset(), usize::MAX), all);
    assert_eq!(max_batch_bytes(s.dataset(), 1000), all);
    assert!(max_batch_bytes(s.dataset(), 4) < all);
    // A read-ahead past the epoch's batches reads them all (it allocated its bound).
    let settings = BatchSettings {
        read_ahead: usize::MAX,
        ..settings(4)
    };
    let source: Arc<dyn Source> = Arc::new(s);
    let batches = Batches::start(source, &(0..10).collect::<Vec<_>>(), 0, &settings).unwrap();
    let sizes: Vec<usize> = batches.map(|b| b.unwrap().size()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 10, "{sizes:?}");
}

#[test]
fn the_reader_holds_no_more_than_its_read_ahead() {
    let s = FakeSource::new(vec![50; 400]);
    let settings = BatchSettings {
        read_ahead: 3,
        ..settings(4)
    };
    let per_batch = max_batch_bytes(s.dataset(), 4);
    let bound = (settings.read_ahead + 1) * per_batch;
    let source: Arc<dyn Source> = Arc::new(s);
    let mut batches = Batches::start(source, &(0..400).collect::<Vec<_>>(), 0, &settings).unwrap();
    let (mut seen, mut most) = (0, 0);
    while let Some(b) = batches.next() {
        // Give the reader time to fill its channel, then look.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let in_flight = batches.bytes_in_flight();
        assert!(
            in_flight <= bound,
            "{in_flight} bytes in flight, bound {bound}"
        );
        most = most.max(in_flight);
        assert_eq!(
            b.unwrap().bytes(),
            per_batch,
            "every sequence is as long as the longest"
        );
        seen += 1;
    }
    assert_eq!(seen, 100);
    assert!(
        most > per_batch,
        "the reader ran more than one batch ahead at some point"
    );
    assert_eq!(batches.bytes_in_flight(), 0);
}

#[test]
fn a_read_error_ends_the_epoch_with_that_error() {
    let mut s = FakeSource::new(vec![5; 10]);
    s.fail_at = Some(7);
    let no_shuffle = BatchSettings {
        shuffle: false,
        group: 1,
        ..settings(2)
    };
    let results: Vec<_> = Batches::start(Arc::new(s), &(0..10).collect::<Vec<_>>(), 0, &no_shuffle)
        .unwrap()
        .collect();
    assert_eq!(results.len(), 4, "batches 0-2, then the error of batch 3");
    assert!(results[3]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("sequence 7"));
}

#[test]
fn input_buffers_given_back_hold_the_next_batches_and_give_the_same_batches() {
    let source = toy();
    let all: Vec<usize> = (0..source.lengths().len()).collect();
    let ahead = BatchSettings {
        read_ahead: 1,
        ..settings(2)
    };
    let fresh: Vec<Batch> = Batches::start(source.clone(), &all, 0, &ahead)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(fresh.len() > 4, "{} batches", fresh.len());
    let values = |b: &Batch| match &b.inputs {
        BatchInputs::Dense(x) => x.data.len(),
        BatchInputs::Tokens(_) => panic!("dense inputs"),
    };
    let largest = fresh.iter().map(values).max().unwrap();
    assert!(
        fresh.iter().any(|b| values(b) < largest),
        "batches of one size"
    );
    let batches = Batches::start(source, &all, 0, &ahead).unwrap();
    let buffers = batches.buffers();
    let mut places = Vec::new();
    for (k, batch) in batches.enumerate() {
        let batch = batch.unwrap();
        // A used buffer's earlier values never show in a later batch's padding.
        assert_eq!(batch, fresh[k], "batch {k}");
        let BatchInputs::Dense(x) = batch.inputs else {
            panic!("dense inputs")
        };
        // Every batch is built in a buffer of the largest batch's size, made up front.
        assert_eq!(x.data.capacity(), largest, "batch {k}");
        places.push(x.data.as_ptr() as usize);
        buffers.give_back(x.data);
    }
    places.sort_unstable();
    places.dedup();
    // At most the batch in use, the one in the channel and the one being built
    // (read_ahead + 2), each used again.
    assert!(
        places.len() <= 3,
        "the batches were built in {} buffers",
        places.len()
    );
}

#[test]
fn dropping_batches_early_stops_the_reader() {
    let s = FakeSource::new(vec![5; 1000]);
    let mut batches =
        Batches::start(Arc::new(s), &(0..1000).collect::<Vec<_>>(), 0, &settings(2)).unwrap();
    assert!(batches.next().is_some());
    drop(batches);
}

#[test]
fn text_windows_come_in_stream_order_and_continue_the_previous_batch() {
    let corpus = CharCorpus::open(&example("corpus.txt")).unwrap();
    let vocab = corpus.vocab();
    let windows = Arc::new(CharWindows::new(&corpus, &vocab, (0, corpus.chars), 4, 8).unwrap());
    let n = windows.lengths().len();
    let batches: Vec<Batch> = Batches::start(
        windows.clone(),
        &(0..n).collect::<Vec<_>>(),
        0,
        &settings(4),
    )
    .unwrap()
    .map(Result::unwrap)
    .collect();
    assert_eq!(batches.len(), n / 4);
    let text: Vec<u32> = std::fs::read_to_string(example("corpus.txt"))
        .unwrap()
        .chars()
        .map(|c| vocab.id(c))
        .collect();
    let per_stream = text.len() / 4;
    for (k, b) in batches.iter().enumerate() {
        assert_eq!(b.continues, k > 0);
        let BatchInputs::Tokens(tokens) = &b.inputs else {
            panic!("tokens")
        };
        for s in 0..4 {
            let start = s * per_stream + k * 8;
            let row: Vec<u32> = (0..8).map(|t| tokens[t * 4 + s]).collect();
            assert_eq!(row, text[start..start + 8], "batch {k} stream {s}");
        }
    }
}

/// A source of zeros with the given lengths (one class label each), that can fail.
#[derive(Debug, Clone)]
struct FakeSource {
    scanned: tensorfit_data::Scanned,
    fail_at: Option<usize>,
}

impl FakeSource {
    fn new(lengths: Vec<usize>) -> FakeSource {
        let dataset = tensorfit_data::Dataset {
            inputs: tensorfit_data::Inputs::Dense { features: 2 },
            targets: tensorfit_data::Targets::Classes { classes: 2 },
            labels_per: tensorfit_data::LabelsPer::Sequence,
            sequences: lengths.len(),
            max_len: lengths.iter().copied().max().unwrap_or(0),
            total_steps: lengths.iter().map(|&l| l as u64).sum(),
        };
        let scanned = tensorfit_data::Scanned {
            dataset,
            lengths: lengths.into(),
        };
        FakeSource {
            scanned,
            fail_at: None,
        }
    }
}

impl Source for FakeSource {
    fn scanned(&self) -> &tensorfit_data::Scanned {
        &self.scanned
    }
    fn reader(&self) -> tensorfit_data::Result<Box<dyn tensorfit_data::Reader>> {
        Ok(Box::new(self.clone()))
    }
}

impl tensorfit_data::Reader for FakeSource {
    fn read(&mut self, index: usize) -> tensorfit_data::Result<tensorfit_data::Example> {
        if self.fail_at == Some(index) {
            return Err(tensorfit_data::DataError::Settings(format!(
                "sequence {index} failed"
            )));
        }
        let len = self.scanned.lengths[index];
        Ok(tensorfit_data::Example {
            len,
            inputs: Values::F32(vec![0.0; len * 2]),
            labels: Values::Ids(vec![1]),
        })
    }
}

#[test]
fn stream_batches_hold_window_k_of_every_stream_in_batch_k_and_leave_out_a_partial_batch() {
    let all: Vec<usize> = (0..11).collect();
    assert_eq!(
        stream_batches(&all, 4),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
        "sequence k·4 + s is window k of stream s"
    );
    assert!(stream_batches(&all, 0).is_empty());
}
