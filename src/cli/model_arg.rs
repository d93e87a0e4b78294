//! `--model seed|PATH`: a preset by its name, anything else a model description file
//! (`examples/models/*.toml`), read with its `[training]` table.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::ValueEnum;
use tensorfit::nn::{DescriptionFile, ModelDescription};

use super::Model;

/// A model as `--model` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelArg {
    Preset(Model),
    File(PathBuf),
}

impl Default for ModelArg {
    fn default() -> Self {
        ModelArg::Preset(Model::Seed)
    }
}

impl fmt::Display for ModelArg {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ModelArg::Preset(m) => f.write_str(m.name()),
            ModelArg::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl ModelArg {
    /// `--model`'s value parser: a preset's name, or else a path.
    pub fn parse(s: &str) -> Result<ModelArg, String> {
        Ok(match Model::from_str(s, false) {
            Ok(m) => ModelArg::Preset(m),
            Err(_) => ModelArg::File(PathBuf::from(s)),
        })
    }

    /// The description file, if the model is one (not a preset).
    pub fn path(&self) -> Option<&Path> {
        match self {
            ModelArg::Preset(_) => None,
            ModelArg::File(p) => Some(p),
        }
    }

    /// The model, and the file's training settings (none for a preset). A file that
    /// cannot be read, or whose model is refused, is an error naming the file, line and
    /// key; so is a figure left to the data (`vocab = "data"`): only `train --data` reads
    /// such a file ([`ModelArg::load_leaving_to_data`]).
    pub fn load(&self) -> Result<DescriptionFile> {
        let file = self.load_leaving_to_data()?;
        match file.from_data.first() {
            Some(p) => Err(p.no_data().into()),
            None => Ok(file),
        }
    }

    /// [`ModelArg::load`], the figures the file leaves to the data listed in its
    /// `from_data` (held as placeholders until `DescriptionFile::resolve`).
    pub fn load_leaving_to_data(&self) -> Result<DescriptionFile> {
        match self {
            ModelArg::Preset(m) => Ok(DescriptionFile {
                model: m.config(),
                training: Vec::new(),
                from_data: Vec::new(),
                as_list: false,
            }),
            ModelArg::File(p) if !p.exists() => {
                let presets: Vec<&str> = Model::value_variants().iter().map(|m| m.name()).collect();
                bail!(
                    "--model {}: no such file, and not a preset ({})",
                    p.display(),
                    presets.join(", ")
                )
            }
            ModelArg::File(p) if p.is_dir() => bail!(
                "--model {}: is a directory; give a model description file (.toml) or a preset",
                p.display()
            ),
            ModelArg::File(p) if is_safetensors(p) => bail!(
                "--model {}: a safetensors file, not a model description (.toml): a checkpoint is given with --checkpoint, --init or --resume, data with --data",
                p.display()
            ),
            ModelArg::File(p) => Ok(DescriptionFile::load_leaving_to_data(p)?),
        }
    }

    /// Refuses `model` (this argument's) when it is not `stored`, the model of the
    /// checkpoint `path`, naming both; `advice` ends the message.
    pub fn check_is(
        &self,
        model: &ModelDescription,
        path: &Path,
        stored: &ModelDescription,
        advice: &str,
    ) -> Result<()> {
        if model != stored {
            bail!(
                "--model {self} ({model}) is not the model of {} ({stored}); {advice}",
                path.display()
            );
        }
        Ok(())
    }
}

/// Whether `path` starts as a safetensors file does: an 8-byte header length, then the
/// header's `{`.
fn is_safetensors(path: &Path) -> bool {
    use std::io::Read as _;
    let mut start = [0u8; 9];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut start))
        .is_ok_and(|_| start[8] == b'{')
}
