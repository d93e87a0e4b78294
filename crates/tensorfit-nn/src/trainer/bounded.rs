//! A trainer on a plan made for a bound ([`crate::bound`]): every shape within the bound
//! runs in the bound's arenas, with no new planning and no new allocation.
//!
//! A program the plan does not hold takes the placement of its cover, once
//! [`check_within`] finds that it corresponds to it; the carried state of a smaller batch
//! takes the slot of the smallest planned batch that holds it (its first rows). Each
//! shape's programs are built and bound once and then kept, so a shape seen before costs
//! nothing more. The state carried across calls lives on the host (`carry_across.rs`) or
//! is zeroed at each call's start, so batches of different sizes sharing one slot see
//! only their own state; a stream (`stream_steps.rs`) keeps its state in the slot
//! between calls, which a call of another batch size mapped to the same slot overwrites,
//! as one of the same batch size does in an exact plan.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use tensorfit_core::{Backend, Error, Layout, Result};

use super::Trainer;
use crate::bound::{check_within, cover, describe};
use crate::description::ModelDescription;
use crate::options::{Job, ProgramKey, TrainOptions};
use crate::params::ParamStore;
use crate::programs::{PersistentKey, Program};

/// The bound a trainer's layout was planned for.
#[derive(Debug)]
pub(super) struct Bounded {
    job: Job,
    /// The programs the plan holds ([`TrainOptions::bound_programs`]).
    keys: Vec<ProgramKey>,
    /// Those built so far, to check smaller programs against.
    built: HashMap<ProgramKey, Program>,
}

impl Trainer {
    /// [`Trainer::with_layout`] for a layout planned for the bound `bound` (a [`Job`]
    /// read as maxima: the programs of [`TrainOptions::bound_programs`]): every training
    /// step and evaluation within the bound runs in its arenas, each on its own extent.
    pub fn with_bound(
        backend: Box<dyn Backend>,
        model: ModelDescription,
        params: &ParamStore,
        opts: TrainOptions,
        layout: Layout,
        bound: Job,
    ) -> Result<Self> {
        let keys = opts.bound_programs(&model, bound);
        let missing = keys
            .iter()
            .find(|k| !layout.programs.contains_key(&k.to_string()));
        if let Some(k) = missing {
            return Err(Error::input(format!(
                "the memory plan was not made for the bound {}: it lacks program `{k}`",
                describe(bound)
            )));
        }
        let mut t = Trainer::with_layout(backend, model, params, opts, layout)?;
        t.bound = Some(Bounded {
            job: bound,
            keys,
            built: HashMap::new(),
        });
        Ok(t)
    }

    /// The bound this trainer's plan was made for (`None`: one shape, or no plan).
    pub fn bound(&self) -> Option<Job> {
        self.bound.as_ref().map(|b| b.job)
    }

    /// Whether the shapes of `job` run on this trainer's memory as it is: no plan, a plan
    /// that holds their programs, or a bound that holds their shapes. When not, the job
    /// must be planned again (a new trainer on a new plan).
    pub fn serves(&self, job: Job) -> bool {
        let Some((layout, _)) = &self.layout else {
            return true;
        };
        self.opts.job_programs(&self.model, job).iter().all(|&k| {
            layout.programs.contains_key(&k.to_string())
                || self
                    .bound
                    .as_ref()
                    .is_some_and(|b| cover(&b.keys, k).is_some())
        })
    }

    /// Checks that the plan has a place for every program of `keys` (itself, or a cover
    /// in the bound) before any of them runs or the carried state is touched.
    pub(super) fn check_planned(&self, keys: &[ProgramKey]) -> Result<()> {
        let Some((layout, _)) = &self.layout else {
            return Ok(());
        };
        for &key in keys {
            if layout.programs.contains_key(&key.to_string()) {
                continue;
            }
            match &self.bound {
                Some(b) if cover(&b.keys, key).is_none() => return Err(outside(b.job, key)),
                Some(_) => {}
                None => return Err(super::not_planned(layout, key)),
            }
        }
        Ok(())
    }

    /// The planned program whose placement the program `ids` takes: itself when the plan
    /// holds it (or there is no plan), else its cover in the bound, checked to
    /// correspond. A program outside the bound is an error saying so.
    pub(super) fn planned_key(&mut self, ids: &Program) -> Result<ProgramKey> {
        let key = ids.key;
        let Some((layout, _)) = &self.layout else {
            return Ok(key);
        };
        if layout.programs.contains_key(&key.to_string()) {
            return Ok(key);
        }
        // Without a bound the caller reports the program missing from the plan.
        let Some(bound) = self.bound.as_mut() else {
            return Ok(key);
        };
        let planned = cover(&bound.keys, key).ok_or_else(|| outside(bound.job, key))?;
        let cover = match bound.built.entry(planned) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(Program::build(&self.model, &self.opts.optim, planned)?),
        };
        check_within(ids, cover)?;
        Ok(planned)
    }

    /// The slot of carried state `key` of a batch the plan does not hold: that of the
    /// smallest larger batch it holds, when the plan is a bound's.
    pub(super) fn carried_slot_within<'l>(
        &self,
        layout: &'l Layout,
        key: &PersistentKey,
    ) -> Option<&'l (usize, usize)> {
        let &PersistentKey::Carried { slot, batch } = key else {
            return None;
        };
        let most = self.bound.as_ref()?.keys.iter().map(|k| k.batch).max()?;
        (batch + 1..=most).find_map(|b| {
            let larger = PersistentKey::Carried { slot, batch: b };
            layout.persistent.get(&larger.to_string())
        })
    }
}

/// The error for program `key`, outside the plan's bound `bound`.
fn outside(bound: Job, key: ProgramKey) -> Error {
    Error::input(format!(
        "program `{key}` is outside the plan's bound ({}): plan again with a bound that holds this batch size and sequence length",
        describe(bound)
    ))
}
