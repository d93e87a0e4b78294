//! The backends this build knows: THE list of providers, one line per backend under its
//! feature, and the providers a program (or a test) adds at run time with [`register`].
//!
//! Everything that depends on the kind of a device goes through here: discovery and
//! opening (`devices.rs`), `--assume` figures, the `--device` and `--device-memory`
//! names ([`parse_kind`]), the planner's facts about the hardware ([`hardware`]: the
//! estimate, the host budget) and the kinds counted in a data-parallel step. A backend
//! left out of the build by its feature stays in the list as [`Entry::NotBuilt`], so its
//! devices are listed as "not in this build (tensorfit's `cuda` feature)".

use std::sync::{PoisonError, RwLock};

use tensorfit_core::{DeviceKind, Error, Hardware, Provider, Result};

/// One kind of device this build knows.
#[derive(Debug, Clone, Copy)]
pub enum Entry {
    /// A backend in this build, through its provider.
    Built(&'static dyn Provider),
    /// One of tensorfit's backends that this build leaves out: the feature that builds it
    /// is named like its kind.
    NotBuilt(DeviceKind),
}

impl Entry {
    /// The kind of the entry's devices.
    pub fn kind(self) -> DeviceKind {
        match self {
            Entry::Built(p) => p.kind(),
            Entry::NotBuilt(kind) => kind,
        }
    }
}

/// The entry for tensorfit's backend crate `$krate`, built by the feature `$feature`
/// (the kind's name): its provider, or, without the feature, why its devices are absent.
macro_rules! backend {
    ($feature:literal, $krate:ident) => {{
        #[cfg(feature = $feature)]
        let entry = Entry::Built(&$krate::PROVIDER);
        #[cfg(not(feature = $feature))]
        let entry = Entry::NotBuilt(DeviceKind::new($feature));
        entry
    }};
}

/// THE list: tensorfit's backends, fastest kinds first (the order devices are listed,
/// planned and named in). Adding a backend is one line here (`docs/adding-a-backend.md`).
fn built_in() -> Vec<Entry> {
    vec![
        backend!("cuda", tensorfit_cuda),
        backend!("wgpu", tensorfit_wgpu),
        Entry::Built(&tensorfit_cpu::PROVIDER),
    ]
}

/// Providers added with [`register`], after the built-in ones.
static REGISTERED: RwLock<Vec<&'static dyn Provider>> = RwLock::new(Vec::new());

/// Adds `provider` to this process's backends, after the built-in ones: discovery, the
/// planner, `--device` and every other user of the list see its devices from now on. A
/// kind already known (by its name or one of its aliases), or a name that cannot be a
/// device id's (empty, upper case, with `:` or spaces), is refused.
pub fn register(provider: &'static dyn Provider) -> Result<()> {
    let name = provider.kind().name();
    let mut registered = REGISTERED.write().unwrap_or_else(PoisonError::into_inner);
    let known: Vec<Entry> = built_in()
        .into_iter()
        .chain(registered.iter().map(|&p| Entry::Built(p)))
        .collect();
    for n in std::iter::once(name).chain(provider.aliases().iter().copied()) {
        let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
        if n.is_empty() || !n.chars().all(plain) {
            return Err(Error::input(format!(
                "a device kind's name is lower-case letters, digits, `-` and `_`: `{n}` is not"
            )));
        }
        if find(&known, n).is_some() {
            return Err(Error::input(format!(
                "device kind `{n}` is already known: a provider for `{name}` is registered once"
            )));
        }
    }
    registered.push(provider);
    Ok(())
}

/// The entry of `entries` named `name` (lower case), by its kind's name or an alias.
fn find(entries: &[Entry], name: &str) -> Option<Entry> {
    entries.iter().copied().find(|e| match e {
        Entry::Built(p) => p.kind().name() == name || p.aliases().contains(&name),
        Entry::NotBuilt(kind) => kind.name() == name,
    })
}

/// Every kind this build knows, built or not, then the registered ones.
pub fn entries() -> Vec<Entry> {
    let registered = REGISTERED.read().unwrap_or_else(PoisonError::into_inner);
    built_in()
        .into_iter()
        .chain(registered.iter().map(|&p| Entry::Built(p)))
        .collect()
}

/// tensorfit's own kinds, built or not, in the list's order: the same in every build of
/// this version, whatever a process registered (what ranks of one launch agree on).
pub fn built_in_kinds() -> Vec<DeviceKind> {
    built_in().into_iter().map(Entry::kind).collect()
}

/// The kinds of [`entries`], in order.
pub fn kinds() -> Vec<DeviceKind> {
    entries().into_iter().map(Entry::kind).collect()
}

/// The provider of `kind`, or why its devices cannot be used in this build.
pub fn provider(kind: DeviceKind) -> std::result::Result<&'static dyn Provider, String> {
    match entries().into_iter().find(|e| e.kind() == kind) {
        Some(Entry::Built(p)) => Ok(p),
        Some(Entry::NotBuilt(kind)) => Err(not_built(kind)),
        None => Err(format!(
            "no backend for device kind `{}` is registered",
            kind.name()
        )),
    }
}

/// The planner's facts about `kind`'s hardware. A kind without a provider here (in a
/// test, a device of a backend this build leaves out) is taken as a GPU with memory of
/// its own ([`Hardware::OWN_MEMORY`]): no device of it is ever opened.
pub fn hardware(kind: DeviceKind) -> Hardware {
    provider(kind).map_or(Hardware::OWN_MEMORY, |p| p.hardware())
}

/// The kind named `text` (any case): a kind's name or one of its aliases (`vulkan` for
/// wgpu), of a backend built or not.
pub fn parse_kind(text: &str) -> Result<DeviceKind> {
    let text = text.trim().to_ascii_lowercase();
    match find(&entries(), &text) {
        Some(e) => Ok(e.kind()),
        None => Err(Error::input(format!(
            "unknown device kind `{text}` ({})",
            names().join(", ")
        ))),
    }
}

/// The names of every kind, in the list's order: what `--device` takes besides `auto`.
pub fn names() -> Vec<&'static str> {
    kinds().into_iter().map(DeviceKind::name).collect()
}

/// Why a device of `kind` cannot be used in a build without its backend.
pub fn not_built(kind: DeviceKind) -> String {
    format!("not in this build (tensorfit's `{}` feature)", kind.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_kinds_are_known_by_name_built_or_not() {
        assert_eq!(names()[..3], ["cuda", "wgpu", "cpu"]);
        let built = [cfg!(feature = "cuda"), cfg!(feature = "wgpu"), true];
        for (kind, built) in [DeviceKind::Cuda, DeviceKind::Wgpu, DeviceKind::Cpu]
            .into_iter()
            .zip(built)
        {
            assert_eq!(parse_kind(&kind.name().to_uppercase()).unwrap(), kind);
            assert_eq!(provider(kind).is_ok(), built, "{kind:?}");
        }
        assert_eq!(
            parse_kind("vulkan").is_ok(),
            cfg!(feature = "wgpu"),
            "an alias is the provider's"
        );
        let unknown = parse_kind("tpu").unwrap_err().to_string();
        assert!(
            unknown.contains("unknown device kind `tpu` (cuda, wgpu, cpu"),
            "{unknown}"
        );
        assert!(provider(DeviceKind::new("tpu")).is_err());
        assert_eq!(hardware(DeviceKind::Cpu), tensorfit_cpu::HARDWARE);
    }

    /// The CPU's provider under another name.
    #[derive(Debug)]
    struct Named(&'static str);

    impl Provider for Named {
        fn kind(&self) -> DeviceKind {
            DeviceKind::new(self.0)
        }
        fn count(&self) -> std::result::Result<usize, String> {
            Ok(1)
        }
        fn open(&self, index: usize, cap: Option<u64>) -> Result<Box<dyn tensorfit_core::Backend>> {
            tensorfit_cpu::PROVIDER.open(index, cap)
        }
        fn assumed_info(
            &self,
            name: String,
            total_bytes: u64,
            gpu: tensorfit_core::GpuModel,
        ) -> tensorfit_core::DeviceInfo {
            tensorfit_cpu::PROVIDER.assumed_info(name, total_bytes, gpu)
        }
        fn hardware(&self) -> Hardware {
            tensorfit_cpu::HARDWARE
        }
    }

    #[test]
    fn a_known_kind_or_a_name_that_cannot_be_an_id_is_not_registered() {
        for name in ["cpu", "cuda", "wgpu", "", "Big", "a:b", "two words"] {
            let provider: &'static Named = Box::leak(Box::new(Named(name)));
            assert!(register(provider).is_err(), "{name}");
        }
        assert!(parse_kind("a:b").is_err());
    }
}
