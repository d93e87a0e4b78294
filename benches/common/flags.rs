//! The command line and the medians of the benches run by hand (`cargo bench --bench X --
//! --flag value`), which time variants in turns themselves rather than through criterion.

use std::collections::HashMap;
use std::str::FromStr;

use anyhow::{bail, Context, Result};

/// The `--flag value` pairs of a bench's command line.
pub struct Flags(HashMap<String, String>);

impl Flags {
    /// Reads the process's arguments; `known` names each flag and what its value is (for
    /// the message when it is missing). cargo bench's own `--bench` is passed over.
    pub fn parse(known: &[(&str, &str)]) -> Result<Flags> {
        let mut values = HashMap::new();
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            if a == "--bench" {
                continue;
            }
            let Some(&(flag, what)) = known.iter().find(|(flag, _)| *flag == a) else {
                bail!("unknown argument `{a}`");
            };
            let value = args
                .next()
                .with_context(|| format!("{flag} needs {what}"))?;
            values.insert(a, value);
        }
        Ok(Flags(values))
    }

    /// The value of `flag` as a `T`, or `default` when it was not given.
    pub fn get<T: FromStr>(&self, flag: &str, default: T) -> Result<T>
    where
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        match self.0.get(flag) {
            Some(v) => v.parse().with_context(|| format!("{flag} `{v}`")),
            None => Ok(default),
        }
    }
}

/// `value` of `flag` read as `N` sizes separated by `:` (`names` says which, in the
/// message when they are not).
pub fn sizes<const N: usize>(flag: &str, value: &str, names: &str) -> Result<[usize; N]> {
    let sizes: Vec<usize> = value
        .split(':')
        .map(|v| {
            v.parse()
                .with_context(|| format!("{flag} `{value}`: `{v}`"))
        })
        .collect::<Result<_>>()?;
    match sizes.try_into() {
        Ok(sizes) => Ok(sizes),
        Err(_) => bail!("{flag} `{value}`: expected {names}"),
    }
}

/// The median of `v` (the upper one of an even count); `v` must not be empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
