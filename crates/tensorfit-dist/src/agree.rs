//! What the ranks of one run check before their first other collective: that each was
//! started with the same settings ([`agree`]). Ranks that differ in their model, their
//! batch or their data would otherwise exchange buffers of different lengths (which MPI
//! answers with a truncation error or memory corruption) or average the gradients of
//! different networks; instead every rank stops together, with one message naming each
//! setting that differs and the ranks of each value.
//!
//! The exchange cannot itself truncate: every buffer's length is known to every rank
//! before it is sent. First each rank's digest of all its settings, their count and a
//! digest of their names (a fixed-size row per rank, all-gathered); only on a mismatch,
//! the digest of each setting (the count agreed first), then the text of each differing
//! setting (its length all-gathered first, then broadcast from each rank in turn).
//! All-gathers are sums of a zero table in which each rank fills its own row with 16-bit
//! pieces: exact in f32 whatever the order of the sum.

use std::collections::BTreeMap;

use crate::{Communicator, DistError};

/// 16-bit pieces per gathered u64.
const PIECES: usize = 4;

/// Longest part of a line shown of a setting's value, and how far before the first
/// character that differs it starts.
const SHOWN: usize = 100;
const CONTEXT: usize = 30;

/// Checks, with every other rank, that each of `settings` (a name as messages say it,
/// such as `--batch`, and the value as text) is the same on every rank. On a difference
/// every rank returns the same [`DistError::Disagree`]. A collective call: every rank
/// must call it with the same names in the same order (the same program does).
pub fn agree(comm: &mut dyn Communicator, settings: &[(&str, String)]) -> Result<(), DistError> {
    let names = digest_all(settings.iter().map(|(name, _)| name.as_bytes()));
    let values: Vec<u64> = settings
        .iter()
        .map(|(name, value)| digest_all([name.as_bytes(), value.as_bytes()].into_iter()))
        .collect();
    let bytes: Vec<[u8; 8]> = values.iter().map(|v| v.to_le_bytes()).collect();
    let all = digest_all(bytes.iter().map(|b| &b[..]));
    let rows = all_gather_u64(comm, &[all, settings.len() as u64, names])?;
    if rows.iter().all(|r| r[0] == all) {
        return Ok(());
    }
    // Another build: the settings cannot be compared one by one.
    let lists: Vec<(u64, u64)> = rows.iter().map(|r| (r[1], r[2])).collect();
    if lists.iter().any(|l| *l != lists[0]) {
        return Err(DistError::Disagree(format!(
            "the ranks run different builds of tensorfit: {}",
            groups(&lists, |(count, _)| format!("{count} settings checked"))
        )));
    }
    let each = all_gather_u64(comm, &values)?;
    let mut said = Vec::new();
    for (i, (name, value)) in settings.iter().enumerate() {
        if each.iter().all(|r| r[i] == values[i]) {
            continue;
        }
        let texts: Vec<String> = all_gather_bytes(comm, value.as_bytes())?
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect();
        said.push(format!("{name}: {}", differing(&texts)));
    }
    Err(DistError::Disagree(said.join("; ")))
}

/// How `texts` (one per rank) differ: each value with its ranks; for values of several
/// lines, the first line where they differ.
fn differing(texts: &[String]) -> String {
    let long = texts
        .iter()
        .any(|t| t.contains('\n') || t.chars().count() > SHOWN);
    if !long {
        return groups(texts, |t| format!("`{t}`"));
    }
    let lines: Vec<Vec<&str>> = texts.iter().map(|t| t.lines().collect()).collect();
    let longest = lines.iter().map(Vec::len).max().unwrap_or(0);
    let at = (0..longest)
        .find(|&k| lines.iter().any(|l| l.get(k) != lines[0].get(k)))
        .unwrap_or(0);
    // Within a long line, from a little before the first character that differs.
    let line = |k: usize| lines[k].get(at).copied().unwrap_or("").trim();
    let from = (0..lines.len())
        .map(|k| common_prefix(line(k), line(0)))
        .min()
        .unwrap_or(0)
        .saturating_sub(CONTEXT);
    let shown: Vec<String> = lines
        .iter()
        .map(|l| match l.get(at) {
            Some(l) => format!("`{}`", window(l.trim(), from)),
            None => "(no such line)".to_string(),
        })
        .collect();
    format!("line {} differs: {}", at + 1, groups(&shown, String::clone))
}

/// The characters `a` and `b` begin with alike.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// `line` whole if it has at most [`SHOWN`] characters, else as many from its
/// character `from`, an ellipsis where it is cut.
fn window(line: &str, from: usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    // A line that fits is shown whole.
    let from = match chars.len() <= SHOWN {
        true => 0,
        false => from.min(chars.len()),
    };
    let to = chars.len().min(from + SHOWN);
    let cut = |yes: bool| if yes { "…" } else { "" };
    let part: String = chars[from..to].iter().collect();
    format!("{}{part}{}", cut(from > 0), cut(to < chars.len()))
}

/// Each distinct value of `per_rank` shown by `show`, with the ranks holding it, in the
/// order of their first rank: "`8` on ranks 0, 2, `4` on rank 1".
fn groups<T: Ord + Clone>(per_rank: &[T], show: impl Fn(&T) -> String) -> String {
    let mut ranks: BTreeMap<T, Vec<usize>> = BTreeMap::new();
    for (r, v) in per_rank.iter().enumerate() {
        ranks.entry(v.clone()).or_default().push(r);
    }
    let mut by_first: Vec<(&T, &Vec<usize>)> = ranks.iter().collect();
    by_first.sort_by_key(|(_, r)| r[0]);
    by_first
        .iter()
        .map(|(v, r)| {
            let list: Vec<String> = r.iter().map(usize::to_string).collect();
            let s = if r.len() == 1 { "" } else { "s" };
            format!("{} on rank{s} {}", show(v), list.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every rank's `mine`, by rank: one sum of a zero table in which each rank fills its own
/// row. Every rank must give as many values.
pub fn all_gather_u64(
    comm: &mut dyn Communicator,
    mine: &[u64],
) -> Result<Vec<Vec<u64>>, DistError> {
    let (rank, size, width) = (comm.rank(), comm.size(), mine.len() * PIECES);
    let mut table = vec![0f32; size * width];
    for (i, v) in mine.iter().enumerate() {
        for p in 0..PIECES {
            table[rank * width + i * PIECES + p] = ((v >> (16 * p)) & 0xFFFF) as f32;
        }
    }
    comm.all_reduce_sum(&mut table)?;
    Ok(table
        .chunks(width.max(1))
        .take(size)
        .map(|row| {
            row.chunks(PIECES)
                .map(|pieces| {
                    pieces
                        .iter()
                        .enumerate()
                        .fold(0u64, |v, (p, &x)| v | ((x as u64) << (16 * p)))
                })
                .collect()
        })
        .collect())
}

/// Every rank's `mine`, by rank: their lengths all-gathered, then each broadcast from its
/// rank into a buffer of its length on every other.
pub fn all_gather_bytes(
    comm: &mut dyn Communicator,
    mine: &[u8],
) -> Result<Vec<Vec<u8>>, DistError> {
    let lengths = all_gather_u64(comm, &[mine.len() as u64])?;
    let mut out = Vec::with_capacity(lengths.len());
    for (root, len) in lengths.iter().enumerate() {
        let mut buf = match root == comm.rank() {
            true => mine.to_vec(),
            false => vec![0u8; len[0] as usize],
        };
        if !buf.is_empty() {
            comm.broadcast_bytes(&mut buf, root)?;
        }
        out.push(buf);
    }
    Ok(out)
}

/// FNV-1a over `parts`, each followed by its length (so that the parts' borders count).
fn digest_all<'a>(parts: impl Iterator<Item = &'a [u8]>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |b: u8| h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    for part in parts {
        part.iter().for_each(|&b| eat(b));
        (part.len() as u64)
            .to_le_bytes()
            .iter()
            .for_each(|&b| eat(b));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solo;

    #[test]
    fn one_rank_agrees_with_itself_and_gathers_its_own_values() {
        let mut solo = Solo;
        agree(
            &mut solo,
            &[("--batch", "8".into()), ("model", "a\nb".into())],
        )
        .unwrap();
        let got = all_gather_u64(&mut solo, &[u64::MAX, 0, 0x1234_5678_9abc_def0]).unwrap();
        assert_eq!(got, [vec![u64::MAX, 0, 0x1234_5678_9abc_def0]]);
        assert_eq!(
            all_gather_bytes(&mut solo, b"abc").unwrap(),
            [b"abc".to_vec()]
        );
    }

    #[test]
    fn a_difference_names_each_value_with_its_ranks() {
        let texts = ["8", "4", "8"].map(String::from);
        assert_eq!(differing(&texts), "`8` on ranks 0, 2, `4` on rank 1");
    }

    #[test]
    fn values_of_several_lines_show_the_first_line_that_differs() {
        let a = "[head]\nactivation = \"tanh\"\nx = 1".to_string();
        let b = "[head]\nactivation = \"relu\"\nx = 1".to_string();
        assert_eq!(
            differing(&[a.clone(), b.clone()]),
            "line 2 differs: `activation = \"tanh\"` on rank 0, `activation = \"relu\"` on rank 1"
        );
        // A line that fits is shown whole, however far in it differs.
        let dense = "[head]\n{ kind = \"dense\", units = 8, activation = \"tanh\" },";
        let got = differing(&[dense.to_string(), dense.replace("tanh", "relu")]);
        assert!(
            got.starts_with("line 2 differs: `{ kind = \"dense\", units = 8, activation = \"tanh\" },` on rank 0"),
            "{got}"
        );
        let shorter = "[head]".to_string();
        assert_eq!(
            differing(&[shorter, a.clone()]),
            "line 2 differs: (no such line) on rank 0, `activation = \"tanh\"` on rank 1"
        );
        // Ranks whose values differ further on, but not at the line shown, share it.
        let later = format!("{a}\ny = 2");
        assert_eq!(
            differing(&[a, later, b]),
            "line 2 differs: `activation = \"tanh\"` on ranks 0, 1, `activation = \"relu\"` on rank 2"
        );
    }

    #[test]
    fn a_long_line_is_shown_from_a_little_before_where_it_differs() {
        let a = format!("{} end = 1", "x".repeat(200));
        let b = format!("{} end = 2", "x".repeat(200));
        let got = differing(&[a, b]);
        assert!(
            got.starts_with("line 1 differs: `…xxx")
                && got.contains(" end = 1` on rank 0")
                && got.contains(" end = 2` on rank 1"),
            "{got}"
        );
    }

    #[test]
    fn a_digest_sees_where_one_part_ends() {
        let ab = digest_all([&b"ab"[..], b"c"].into_iter());
        let a_bc = digest_all([&b"a"[..], b"bc"].into_iter());
        assert_ne!(ab, a_bc);
    }
}
