//! The trainer's state on the host: parameters, checkpoints and the optimizer's state
//! in and out, and the last step's gradients.

use std::collections::HashMap;

use tensorfit_core::{Error, HostTensor, Result};

use super::{download, Trainer};
use crate::checkpoint::Checkpoint;
use crate::layers::ParamKind;
use crate::params::ParamStore;
use crate::programs::PersistentKey;

impl Trainer {
    /// Downloads parameters and running statistics.
    pub fn parameters(&mut self) -> Result<ParamStore> {
        let mut out = ParamStore::new();
        for spec in self.model.param_specs()? {
            let key = PersistentKey::named(&spec.name);
            let view = self.persistent_view(&key, spec.shape.clone())?;
            out.insert(&spec.name, download(self.backend.as_mut(), &view)?);
        }
        Ok(out)
    }

    /// Everything needed to continue later: model, optimizer state (Adam's moments
    /// `adam.m.<name>`, `adam.v.<name>`, SGD's `sgd.momentum.<name>`; zeros before the
    /// first step), step.
    pub fn checkpoint(&mut self) -> Result<Checkpoint> {
        let (mut params, mut optimizer) = (ParamStore::new(), ParamStore::new());
        for spec in self.model.param_specs()? {
            if spec.kind == ParamKind::Trainable {
                for name in self.opts.optim.optimizer.state_names(&spec.name) {
                    optimizer.insert(&name, HostTensor::zeros(spec.shape.clone()));
                }
            }
            params.insert(&spec.name, HostTensor::zeros(spec.shape));
        }
        let mut ck = Checkpoint {
            config: self.model.clone(),
            params,
            optimizer,
            step: self.step,
            extra: HashMap::new(),
        };
        self.checkpoint_into(&mut ck)?;
        Ok(ck)
    }

    /// Fills `ck`, a checkpoint of this trainer, with the current state, reusing its host
    /// memory: a session snapshots the state before every step, and fresh megabytes each
    /// time cost more than the copy.
    pub fn checkpoint_into(&mut self, ck: &mut Checkpoint) -> Result<()> {
        for (name, t) in ck.params.iter_mut().chain(ck.optimizer.iter_mut()) {
            match self.persistent.get(&PersistentKey::named(name)) {
                Some(view) if view.shape == t.shape => self.backend.read(view, &mut t.data)?,
                // The optimizer's state before the first step.
                None => t.data.fill(0.0),
                Some(view) => {
                    return Err(Error::input(format!(
                        "`{name}` has shape {}, the checkpoint has {}",
                        view.shape, t.shape
                    )))
                }
            }
        }
        ck.step = self.step;
        Ok(())
    }

    /// Restores the optimizer's state and the step counter from a checkpoint's values.
    pub fn restore_optimizer(&mut self, optimizer: &ParamStore, step: u64) -> Result<()> {
        self.write_named(optimizer)?;
        self.step = step;
        Ok(())
    }

    /// Restores all that `ck`, a checkpoint of this trainer, holds: parameters, running
    /// statistics, the optimizer's state and the step counter.
    pub fn restore_state(&mut self, ck: &Checkpoint) -> Result<()> {
        self.write_named(&ck.params)?;
        self.restore_optimizer(&ck.optimizer, ck.step)
    }

    /// Writes each tensor of `values` into the persistent tensor of its name.
    fn write_named(&mut self, values: &ParamStore) -> Result<()> {
        for (name, t) in values.iter() {
            let view = self.persistent_view(&PersistentKey::named(name), t.shape.clone())?;
            if view.shape != t.shape {
                return Err(Error::input(format!(
                    "`{name}` has shape {}, expected {}",
                    t.shape, view.shape
                )));
            }
            self.backend.write(&view, &t.data)?;
        }
        Ok(())
    }

    /// Downloads the gradients of the most recent training step (as the update used
    /// them), by parameter name.
    pub fn gradients(&mut self) -> Result<ParamStore> {
        let key = self
            .last_train
            .ok_or_else(|| Error::input("no training step has run yet"))?;
        let p = &self.programs[&key];
        let mut out = ParamStore::new();
        for (name, g) in &p.ids.grads {
            let view = p.exe.view(*g).clone();
            out.insert(name, download(self.backend.as_mut(), &view)?);
        }
        Ok(out)
    }
}
