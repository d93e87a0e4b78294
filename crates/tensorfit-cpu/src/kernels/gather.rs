//! Gathers and scatter-adds of table rows picked by token ids: the kernels `embedding`
//! and `embedding_backward`, and the pieces a recurrent layer on token input uses for its
//! input projection (`lstm/`: the gates of token `v` are column `v` of `w_ih`, gathered
//! forward and scatter-added backward, instead of a GEMM with a one-hot `x`).
//!
//! A `Table` (`tensorfit_core::tokens`) says where token `v`'s vector lies: a row of `[V, E]` (`nn.Embedding`'s
//! weight) or a column of `[E, V]` (a recurrent layer's `w_ih`), so one gather and one
//! scatter serve both. Ids are checked first ([`tensorfit_core::tokens::check_ids`]): an
//! id outside the vocabulary is an error naming its position, never a read outside the
//! table. The scatter-add sums in the order of the ids, so its result is the same on
//! every run.

use tensorfit_core::tokens::{check_ids, token_index, Table};
use tensorfit_core::Result;

use super::check_len;

/// `out[n, :] = table's vector of ids[n]`, `out` `[N, width]`. `what` names the ids in
/// errors; `batch` is their batch size for `[T, B]` ids, 0 for a flat list (see
/// `check_ids`).
pub fn gather(
    table: &[f32],
    t: Table,
    (what, ids, batch): (&str, &[f32], usize),
    out: &mut [f32],
) -> Result<()> {
    check_len("gather", "table", table, t.len())?;
    check_len("gather", "out", out, ids.len() * t.width)?;
    check_ids(what, ids, t.vocab, batch)?;
    for (row, &id) in out.chunks_exact_mut(t.width.max(1)).zip(ids) {
        let v = token_index(id, t.vocab).unwrap_or_default();
        for (e, o) in row.iter_mut().enumerate() {
            *o = table[t.at(v, e)];
        }
    }
    Ok(())
}

/// `dtable = Σ_n (the vector of ids[n]) += dout[n, :]` over a zeroed `dtable`, in the
/// order of `n` (deterministic). Arguments as [`gather`]'s.
pub fn scatter_add(
    t: Table,
    (what, ids, batch): (&str, &[f32], usize),
    dout: &[f32],
    dtable: &mut [f32],
) -> Result<()> {
    check_len("scatter_add", "dtable", dtable, t.len())?;
    check_len("scatter_add", "dout", dout, ids.len() * t.width)?;
    check_ids(what, ids, t.vocab, batch)?;
    dtable.fill(0.0);
    for (row, &id) in dout.chunks_exact(t.width.max(1)).zip(ids) {
        let v = token_index(id, t.vocab).unwrap_or_default();
        for (e, &g) in row.iter().enumerate() {
            dtable[t.at(v, e)] += g;
        }
    }
    Ok(())
}

/// `nn.Embedding`: `out[n] = table[ids[n]]`, `table` `[V, E]`.
pub fn embedding(table: &[f32], vocab: usize, ids: &[f32], out: &mut [f32]) -> Result<()> {
    let width = table.len().checked_div(vocab).unwrap_or(0);
    gather(table, Table::rows(vocab, width), ("ids", ids, 0), out)
}

/// The gradient of [`embedding`]: `dtable[v] = Σ_{n: ids[n] = v} dout[n]`.
pub fn embedding_backward(
    vocab: usize,
    ids: &[f32],
    dout: &[f32],
    dtable: &mut [f32],
) -> Result<()> {
    let width = dtable.len().checked_div(vocab).unwrap_or(0);
    scatter_add(Table::rows(vocab, width), ("ids", ids, 0), dout, dtable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Error;

    /// The one-hot matrix of `ids` `[N, V]`, for the naive products below.
    fn one_hot(ids: &[f32], vocab: usize) -> Vec<f64> {
        let mut m = vec![0.0; ids.len() * vocab];
        for (n, &id) in ids.iter().enumerate() {
            m[n * vocab + id as usize] = 1.0;
        }
        m
    }

    #[test]
    fn gathering_rows_or_columns_equals_multiplying_by_the_one_hot_matrix() {
        let (vocab, width) = (5, 3);
        let table: Vec<f32> = (0..15).map(|k| (k as f32 * 0.37).sin()).collect();
        let ids = [4.0, 0.0, 4.0, 2.0];
        let hot = one_hot(&ids, vocab);
        for t in [Table::rows(vocab, width), Table::columns(width, vocab)] {
            let mut out = vec![0.0; ids.len() * width];
            gather(&table, t, ("ids", &ids, 0), &mut out).unwrap();
            for n in 0..ids.len() {
                for e in 0..width {
                    let want: f64 = (0..vocab)
                        .map(|v| hot[n * vocab + v] * table[t.at(v, e)] as f64)
                        .sum();
                    assert_eq!(out[n * width + e] as f64, want, "{t:?} n {n} e {e}");
                }
            }
            // Backward: dtable = one_hotᵀ · dout.
            let dout: Vec<f32> = (0..12).map(|k| k as f32 - 5.5).collect();
            let mut dtable = vec![f32::NAN; table.len()];
            scatter_add(t, ("ids", &ids, 0), &dout, &mut dtable).unwrap();
            for v in 0..vocab {
                for e in 0..width {
                    let want: f64 = (0..ids.len())
                        .map(|n| hot[n * vocab + v] * dout[n * width + e] as f64)
                        .sum();
                    assert_eq!(dtable[t.at(v, e)] as f64, want, "{t:?} v {v} e {e}");
                }
            }
        }
    }

    #[test]
    fn an_id_outside_the_vocabulary_is_an_error_naming_its_position() {
        let table = [0.0f32; 6];
        let mut out = [0.0f32; 6];
        let err = embedding(&table, 3, &[1.0, 3.0, 0.0], &mut out).unwrap_err();
        assert!(matches!(err, Error::TokenOutOfRange { .. }), "{err}");
        assert!(err.to_string().contains("[1]"), "{err}");
        let mut dtable = [0.0f32; 6];
        let err = embedding_backward(3, &[0.5, 1.0, 0.0], &out, &mut dtable).unwrap_err();
        assert!(err.to_string().contains("[0]"), "{err}");
    }
}
