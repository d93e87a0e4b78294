//! Token ids: the one reading of an id stored as `f32` (as class labels are), the one
//! check of a batch of ids against a vocabulary, and the one description of where a
//! token's vector lies in a table ([`Table`]), which every backend's gather and
//! scatter-add kernels share.
//!
//! Ids reach the [`Op::Embedding`](crate::Op::Embedding) and token-input
//! [`Op::LstmForward`](crate::Op::LstmForward) ops as `f32` holding whole numbers. An id
//! that is not a whole number in `0..vocab` is user input gone wrong, and gets
//! [`Error::TokenOutOfRange`] naming its position:
//! - the CPU kernels check every id of a call with [`check_ids`] before reading anything,
//!   and return that error;
//! - a GPU kernel cannot return an error from inside a launch. Both GPU backends never
//!   read outside the table: such an id gives a vector of zeros forward and is skipped
//!   backward. CUDA also leaves its position in the backend's status word, reported as an
//!   `Error::Input` at the next synchronize or read; wgpu has no such word, so the host
//!   must call [`check_ids`] on every batch of ids where it uploads it (the network's
//!   token input does not exist yet; whoever wires it adds that call there).

use crate::error::{Error, Result};

/// Where the vector of each token lies in a table of `vocab` tokens × `width` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    pub vocab: usize,
    pub width: usize,
    /// `[width, vocab]`: token `v` is column `v` (else `[vocab, width]`, row `v`).
    pub by_column: bool,
}

impl Table {
    /// `[vocab, width]`, token `v` is row `v` (`nn.Embedding`'s weight).
    pub fn rows(vocab: usize, width: usize) -> Self {
        Table {
            vocab,
            width,
            by_column: false,
        }
    }

    /// `[width, vocab]`, token `v` is column `v` (a recurrent layer's `w_ih` on token
    /// input, `[4H, V]` for an LSTM).
    pub fn columns(width: usize, vocab: usize) -> Self {
        Table {
            vocab,
            width,
            by_column: true,
        }
    }

    /// Where element `e` of token `v`'s vector lies.
    pub fn at(&self, v: usize, e: usize) -> usize {
        let (v_stride, e_stride) = self.strides();
        v * v_stride + e * e_stride
    }

    /// The distances between neighbouring tokens and between neighbouring elements of a
    /// vector.
    pub fn strides(&self) -> (usize, usize) {
        if self.by_column {
            (1, self.vocab)
        } else {
            (self.width, 1)
        }
    }

    /// Elements of the table.
    pub fn len(&self) -> usize {
        self.vocab * self.width
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The row of the table that `value` names, if it is a whole number in `0..vocab`.
pub fn token_index(value: f32, vocab: usize) -> Option<usize> {
    let whole = value.fract() == 0.0 && value >= 0.0;
    (whole && (value as f64) < vocab as f64).then_some(value as usize)
}

/// Checks every id of `ids` (the tensor called `what`) against `vocab`; the first bad one
/// is an error naming its position. `batch` is the number of ids per time step for a
/// `[T, B]` tensor (the position is then given as step and batch row), or 0 for a flat
/// `[N]` list.
pub fn check_ids(what: &str, ids: &[f32], vocab: usize, batch: usize) -> Result<()> {
    match ids.iter().position(|&v| token_index(v, vocab).is_none()) {
        None => Ok(()),
        Some(n) => {
            let position = match batch {
                0 => format!("[{n}]"),
                b => format!("step {}, batch row {}", n / b, n % b),
            };
            Err(Error::TokenOutOfRange {
                tensor: what.to_string(),
                position,
                value: ids[n],
                vocab,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_numbers_inside_the_vocabulary_name_a_row() {
        assert_eq!(token_index(0.0, 3), Some(0));
        assert_eq!(token_index(2.0, 3), Some(2));
        for bad in [3.0, -1.0, 0.5, f32::NAN, f32::INFINITY, 1e30] {
            assert_eq!(token_index(bad, 3), None, "{bad}");
        }
    }

    #[test]
    fn a_bad_id_is_an_error_naming_its_step_and_batch_row() {
        check_ids("ids", &[0.0, 1.0, 2.0], 3, 0).unwrap();
        let err = check_ids("input", &[0.0, 1.0, 2.0, 7.0], 3, 2).unwrap_err();
        assert!(matches!(err, Error::TokenOutOfRange { value, vocab: 3, .. } if value == 7.0));
        let msg = err.to_string();
        assert!(
            msg.contains("`input`") && msg.contains("step 1, batch row 1"),
            "{msg}"
        );
        let flat = check_ids("ids", &[0.0, -2.0], 3, 0)
            .unwrap_err()
            .to_string();
        assert!(flat.contains("[1]"), "{flat}");
    }
}
