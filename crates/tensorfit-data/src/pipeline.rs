//! From a scanned source to batches: the train/validation split, each epoch's order
//! (shuffled from the seed and the epoch: the whole epoch at random ([`shuffled_batches`])
//! or sequences of similar lengths batched together ([`length_grouped_batches`])) and the
//! background reader that builds batches a bounded number ahead.
//!
//! Host memory: the reader holds at most `read_ahead` finished batches in its channel and
//! one more it is building or waiting to send; the consumer holds the one it is using.
//! So at most `read_ahead + 2` batches exist at once, each at most
//! [`max_batch_bytes`](crate::max_batch_bytes); [`Batches::bytes_in_flight`] is the exact
//! figure of those built and not yet handed over. Their dense inputs live in
//! `read_ahead + 2` buffers made when the reader starts ([`InputBuffers`]): the consumer
//! gives each back when its step is done.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use tensorfit_core::Rng;

use crate::batch::{Assembly, Batch, InputBuffers};
use crate::dataset::{Inputs, Source};
use crate::error::{DataError, Result};

/// Mixed into the seed for the split, so that it differs from the epochs' orders.
const SPLIT_SALT: u64 = 0x5EED_0000_5B11_7000;
/// Mixed with the epoch number into the seed of an epoch's order.
const EPOCH_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;

/// How batches are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSettings {
    /// Sequences per batch (for the windows of a text, its number of streams decides).
    pub batch: usize,
    pub seed: u64,
    /// Shuffle each epoch (training); `false`: file order (evaluation, prediction).
    pub shuffle: bool,
    /// Batches grouped by length: the shuffled order is cut into groups of this many
    /// batches, each group sorted by length before it is cut into batches. 1: no grouping.
    pub group: usize,
    /// Finished batches the background reader may hold.
    pub read_ahead: usize,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            batch: 32,
            seed: 0,
            shuffle: true,
            group: 50,
            read_ahead: 2,
        }
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.int_inclusive(0, i));
    }
}

/// How many of `n` items validate at `val_fraction` (checked to be in [0, 1)).
pub(crate) fn val_count(n: u64, val_fraction: f64) -> Result<u64> {
    if !(0.0..1.0).contains(&val_fraction) {
        return Err(DataError::Settings(format!(
            "a validation fraction is at least 0 and below 1, not {val_fraction}"
        )));
    }
    Ok((n as f64 * val_fraction).round() as u64)
}

/// Refuses an index of `indices` that is not one of the `n` sequences of the data: the
/// readers find a sequence's place in their file by it.
fn check_indices(indices: &[usize], n: usize) -> Result<()> {
    match indices.iter().find(|&&i| i >= n) {
        Some(i) => Err(DataError::Settings(format!(
            "sequence {i} is not in the data ({n} sequences)"
        ))),
        None => Ok(()),
    }
}

/// Splits sequences `0..n` into (training, validation): `val_fraction` of them, chosen
/// from `seed`, validate; both lists in file order.
pub fn split(n: usize, val_fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    let val = val_count(n as u64, val_fraction)? as usize;
    let mut order: Vec<usize> = (0..n).collect();
    shuffle(&mut order, &mut Rng::new(seed ^ SPLIT_SALT));
    let (mut val, mut train) = (order[..val].to_vec(), order[val..].to_vec());
    if train.is_empty() {
        return Err(DataError::Settings(format!(
            "{n} sequences leave none to train on with a validation fraction of {val_fraction}"
        )));
    }
    val.sort_unstable();
    train.sort_unstable();
    Ok((train, val))
}

/// The batches of epoch `epoch` over `indices` of `source`, as lists of sequence indices.
/// For the windows of a text ([`Source::streams`]) `indices` are all of them in order
/// (`0..n`): they are batched in that order, window k of every stream in batch k.
pub fn epoch_order(
    source: &dyn Source,
    indices: &[usize],
    epoch: u64,
    settings: &BatchSettings,
) -> Result<Vec<Vec<usize>>> {
    if settings.batch == 0 || settings.group == 0 {
        return Err(DataError::Settings("batch and group are at least 1".into()));
    }
    check_indices(indices, source.lengths().len())?;
    if let Some(streams) = source.streams() {
        return Ok(stream_batches(indices, streams));
    }
    let mut order = indices.to_vec();
    let mut rng = Rng::new(epoch_seed(settings.seed, epoch));
    if settings.shuffle {
        shuffle(&mut order, &mut rng);
    }
    let lengths = source.lengths();
    let mut batches = Vec::with_capacity(order.len().div_ceil(settings.batch));
    for group in order.chunks_mut(settings.batch * settings.group) {
        if settings.group > 1 {
            group.sort_by_key(|&i| lengths[i]);
        }
        batches.extend(group.chunks(settings.batch).map(<[usize]>::to_vec));
    }
    if settings.shuffle {
        shuffle(&mut batches, &mut rng);
    }
    Ok(batches)
}

/// The batches of the windows of a text in `streams` streams ([`Source::streams`]): in
/// order, window k of every stream in batch k (`indices` are all of them, `0..n`), so that
/// each batch continues the one before it.
pub fn stream_batches(indices: &[usize], streams: usize) -> Vec<Vec<usize>> {
    indices
        .chunks(streams.max(1))
        .filter(|c| c.len() == streams)
        .map(<[usize]>::to_vec)
        .collect()
}

/// How a training epoch's sequences are cut into batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchOrder {
    /// The whole epoch shuffled and cut into batches in that order, each padded to its
    /// own longest sequence (PyTorch's `DataLoader(shuffle=True)` with
    /// `pack_padded_sequence`): consecutive batches are independent draws.
    #[default]
    Shuffled,
    /// Sequences of similar lengths batched together ([`length_grouped_batches`]): less
    /// padding, but the batches of one padded length run one after another, so
    /// consecutive steps see correlated batches, which costs convergence.
    LengthGrouped,
}

impl BatchOrder {
    /// Every order, in the order `--help` lists them.
    pub const ALL: [BatchOrder; 2] = [BatchOrder::Shuffled, BatchOrder::LengthGrouped];

    /// The order's name on the command line and in a run's stored settings.
    pub fn name(self) -> &'static str {
        match self {
            BatchOrder::Shuffled => "shuffled",
            BatchOrder::LengthGrouped => "length-grouped",
        }
    }

    /// The order named `name` ([`BatchOrder::name`]).
    pub fn parse(name: &str) -> Result<BatchOrder> {
        BatchOrder::ALL
            .into_iter()
            .find(|o| o.name() == name)
            .ok_or_else(|| {
                DataError::Settings(format!(
                    "no batch order `{name}`: one of shuffled, length-grouped"
                ))
            })
    }
}

/// The seed of training epoch `epoch`'s order in a run seeded with `seed`.
pub fn epoch_seed(seed: u64, epoch: u64) -> u64 {
    seed.wrapping_add(epoch.wrapping_mul(EPOCH_STRIDE))
}

/// A training epoch's batches of `indices` (sequences of `lengths`) in `order`, drawn
/// from `seed` ([`epoch_seed`]): [`shuffled_batches`], or [`length_grouped_batches`] in
/// groups of [`BatchSettings`]' default 50 batches. `tensorfit train --data` and the
/// library's training loop both draw them here.
pub fn epoch_batches(
    lengths: &[usize],
    indices: &[usize],
    batch: usize,
    order: BatchOrder,
    seed: u64,
) -> Result<Vec<Vec<usize>>> {
    check_indices(indices, lengths.len())?;
    match order {
        BatchOrder::Shuffled => shuffled_batches(indices, batch, seed),
        BatchOrder::LengthGrouped => {
            let group = BatchSettings::default().group;
            length_grouped_batches(lengths, indices, batch, group, Some(seed))
        }
    }
}

/// Batches of `indices` in a random order: all of them shuffled from `seed`, then cut
/// into batches of `batch` in that order, the last one partial when `batch` does not
/// divide them (PyTorch's `drop_last=False`). Each batch is padded to its own longest.
pub fn shuffled_batches(indices: &[usize], batch: usize, seed: u64) -> Result<Vec<Vec<usize>>> {
    if batch == 0 {
        return Err(DataError::Settings("batch is at least 1".into()));
    }
    let mut order = indices.to_vec();
    shuffle(&mut order, &mut Rng::new(seed));
    Ok(order.chunks(batch).map(<[usize]>::to_vec).collect())
}

/// Batches in which every sequence has the same length (no padding at all), for models
/// that cannot mask padded steps: `indices` grouped by their length in `lengths`, each
/// group cut into batches of at most `batch`. With `shuffle: Some(seed)` the sequences of
/// each length and the order of the lengths are shuffled from the seed; batches of one
/// length stay together, so a run changes shape once per length, not once per batch.
/// With `None`: lengths in increasing order, sequences in file order.
pub fn same_length_batches(
    lengths: &[usize],
    indices: &[usize],
    batch: usize,
    shuffle_seed: Option<u64>,
) -> Result<Vec<Vec<usize>>> {
    if batch == 0 {
        return Err(DataError::Settings("batch is at least 1".into()));
    }
    check_indices(indices, lengths.len())?;
    let mut by_length: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for &i in indices {
        by_length.entry(lengths[i]).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = by_length.into_values().collect();
    if let Some(seed) = shuffle_seed {
        let mut rng = Rng::new(seed);
        for g in &mut groups {
            shuffle(g, &mut rng);
        }
        shuffle(&mut groups, &mut rng);
    }
    Ok(groups
        .iter()
        .flat_map(|g| g.chunks(batch).map(<[usize]>::to_vec))
        .collect())
}

/// Batches of sequences of different lengths, grouped by length so that a batch padded to
/// its longest sequence pads little, for models that mask padded steps. With
/// `shuffle: Some(seed)`: `indices` shuffled from the seed, cut into groups of `group`
/// batches, each group sorted by length and cut into batches ([`epoch_order`]'s
/// grouping). Batches of the same padded length then run together, in a shuffled order
/// of those lengths, so a run changes shape once per padded length, not once per batch.
/// With `None`: all of `indices` sorted by length (file order within a length), in
/// increasing length.
pub fn length_grouped_batches(
    lengths: &[usize],
    indices: &[usize],
    batch: usize,
    group: usize,
    shuffle_seed: Option<u64>,
) -> Result<Vec<Vec<usize>>> {
    if batch == 0 || group == 0 {
        return Err(DataError::Settings("batch and group are at least 1".into()));
    }
    check_indices(indices, lengths.len())?;
    let mut order = indices.to_vec();
    let mut rng = shuffle_seed.map(Rng::new);
    let group = match rng.as_mut() {
        Some(rng) => {
            shuffle(&mut order, rng);
            batch.saturating_mul(group)
        }
        None => order.len().max(1),
    };
    let mut batches: Vec<Vec<usize>> = Vec::with_capacity(order.len().div_ceil(batch));
    for g in order.chunks_mut(group) {
        g.sort_by_key(|&i| lengths[i]);
        batches.extend(g.chunks(batch).map(<[usize]>::to_vec));
    }
    let padded = |b: &Vec<usize>| padded_steps(lengths, b);
    let mut rank: std::collections::BTreeMap<usize, usize> =
        batches.iter().map(|b| (padded(b), 0)).collect();
    let mut ranks: Vec<usize> = (0..rank.len()).collect();
    if let Some(rng) = rng.as_mut() {
        shuffle(&mut ranks, rng);
    }
    for (r, slot) in ranks.into_iter().zip(rank.values_mut()) {
        *slot = r;
    }
    batches.sort_by_key(|b| rank[&padded(b)]);
    Ok(batches)
}

/// The steps a batch of the sequences `batch` is padded to: its longest sequence's, of
/// `lengths` (0 for an empty batch; an index past `lengths` counts for nothing).
pub fn padded_steps(lengths: &[usize], batch: &[usize]) -> usize {
    batch
        .iter()
        .filter_map(|&i| lengths.get(i))
        .max()
        .copied()
        .unwrap_or(0)
}

/// The input buffers of reading `order` of `source` at most `read_ahead` batches ahead:
/// one for each batch that can exist at once (`read_ahead + 2`, no more than the batches),
/// each of the largest batch's dense values; none for token inputs (4 bytes a step).
fn input_buffers(source: &dyn Source, order: &[Vec<usize>], read_ahead: usize) -> InputBuffers {
    let Inputs::Dense { features } = source.dataset().inputs else {
        return InputBuffers::default();
    };
    let lengths = source.lengths();
    let values = |batch: &Vec<usize>| batch.len() * padded_steps(lengths, batch) * features;
    let largest = order.iter().map(values).max().unwrap_or(0);
    InputBuffers::new(read_ahead.saturating_add(2).min(order.len()), largest)
}

/// Batches read by a background thread, a bounded number ahead; an iterator of
/// `Result<Batch>` that ends after the epoch's last batch or its first error.
#[derive(Debug)]
pub struct Batches {
    /// `None` once dropped (which stops the reader).
    rx: Option<Receiver<Result<Batch>>>,
    in_flight: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    batches: usize,
    buffers: InputBuffers,
}

impl Batches {
    /// Starts reading epoch `epoch` of `indices` of `source`.
    pub fn start(
        source: Arc<dyn Source>,
        indices: &[usize],
        epoch: u64,
        settings: &BatchSettings,
    ) -> Result<Batches> {
        let order = epoch_order(source.as_ref(), indices, epoch, settings)?;
        Batches::in_order(source, order, settings.read_ahead)
    }

    /// Starts reading the batches `order` (lists of sequence indices) of `source`, in that
    /// order, at most `read_ahead` finished batches ahead.
    pub fn in_order(
        source: Arc<dyn Source>,
        order: Vec<Vec<usize>>,
        read_ahead: usize,
    ) -> Result<Batches> {
        for (k, batch) in order.iter().enumerate() {
            if batch.is_empty() {
                return Err(DataError::Settings(format!(
                    "batch {k} of the order has no sequences"
                )));
            }
            check_indices(batch, source.lengths().len())?;
        }
        let mut reader = source.reader()?;
        let continues = source.streams().is_some();
        // Never more batches ahead than there are (the channel allocates its bound).
        let (tx, rx) = sync_channel(read_ahead.min(order.len()));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let batches = order.len();
        let buffers = input_buffers(source.as_ref(), &order, read_ahead);
        let (counter, stopped, pool) = (in_flight.clone(), stop.clone(), buffers.clone());
        let handle = std::thread::Builder::new()
            .name("tensorfit-data".into())
            .spawn(move || {
                pool.fill();
                for (k, batch) in order.into_iter().enumerate() {
                    if stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    // Each sequence goes into its row as it is read.
                    let steps = padded_steps(source.lengths(), &batch);
                    let mut rows = Assembly::new(source.dataset(), batch.len(), steps, &pool);
                    let built = batch
                        .into_iter()
                        .try_for_each(|i| rows.place(i, reader.read(i)?))
                        .and_then(|()| rows.finish(continues && k > 0));
                    let failed = built.is_err();
                    if let Ok(b) = &built {
                        counter.fetch_add(b.bytes(), Ordering::SeqCst);
                    }
                    if tx.send(built).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|e| {
                DataError::Settings(format!("cannot start the data reader thread: {e}"))
            })?;
        Ok(Batches {
            rx: Some(rx),
            in_flight,
            stop,
            handle: Some(handle),
            batches,
            buffers,
        })
    }

    /// The buffers the batches' dense inputs are built in: give each batch's input back
    /// ([`InputBuffers::give_back`]) when its step is done with it.
    pub fn buffers(&self) -> InputBuffers {
        self.buffers.clone()
    }

    /// Batches of the epoch.
    pub fn len(&self) -> usize {
        self.batches
    }

    pub fn is_empty(&self) -> bool {
        self.batches == 0
    }

    /// Bytes of the batches built and not yet returned by `next` (at most
    /// `read_ahead + 1` batches).
    pub fn bytes_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

impl Iterator for Batches {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        match self.rx.as_ref()?.recv() {
            Ok(built) => {
                if let Ok(b) = &built {
                    self.in_flight.fetch_sub(b.bytes(), Ordering::SeqCst);
                }
                Some(built)
            }
            Err(_) => {
                let handle = self.handle.take()?;
                handle.join().err().map(|_| Err(DataError::ReaderStopped))
            }
        }
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        // The reader stops before its next batch, or when its next send fails.
        self.stop.store(true, Ordering::Relaxed);
        self.rx = None;
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
