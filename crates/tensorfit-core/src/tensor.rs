//! Host-side tensors: the values that cross the boundary between the user and a backend
//! (parameters, data, results). Device-side values are [`crate::TensorView`]s.

use crate::error::{Error, Result};
use crate::shape::Shape;

/// A contiguous row-major `f32` tensor in host memory.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub shape: Shape,
    pub data: Vec<f32>,
}

impl HostTensor {
    /// A tensor of zeros.
    pub fn zeros(shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        let data = vec![0.0; shape.numel()];
        HostTensor { shape, data }
    }

    /// Wraps `data`, checking that its length matches `shape`.
    pub fn new(shape: impl Into<Shape>, data: Vec<f32>) -> Result<Self> {
        let t = HostTensor {
            shape: shape.into(),
            data,
        };
        t.check_filled("a tensor")?;
        Ok(t)
    }

    /// Checks that the values fill the shape, as [`HostTensor::new`] does: the fields are
    /// public, so a tensor built from them may not (and a kernel would read past its
    /// values). `what` names the tensor in the error.
    pub fn check_filled(&self, what: &str) -> Result<()> {
        if self.shape.numel() == self.data.len() {
            return Ok(());
        }
        Err(Error::input(format!(
            "{} values do not fill {what} of shape {}",
            self.data.len(),
            self.shape
        )))
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }
}
