//! Static shapes and element types.
//!
//! Every tensor in a graph has a shape fixed when the graph is built; the planner sizes
//! memory from these shapes alone. `DType` is a run-time value (not a type parameter) so
//! that mixed precision can be added without touching user types.

use std::fmt;

/// Element type of a tensor. Only `F32` exists today; class labels are stored as `F32`
/// holding whole numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
}

impl DType {
    /// Bytes per element: the one definition every byte count uses.
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
        }
    }

    /// The name used in files (safetensors) and messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
        }
    }
}

/// The dimensions of a tensor, outermost first (row-major, contiguous).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    pub fn new(dims: &[usize]) -> Self {
        Shape(dims.to_vec())
    }

    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for a rank-0 shape). Saturates instead of overflowing, so an
    /// absurd user size is reported as too large rather than wrapping around.
    pub fn numel(&self) -> usize {
        self.0.iter().fold(1usize, |acc, &d| acc.saturating_mul(d))
    }

    /// Dimension `i`, or 0 if the shape has fewer dimensions (callers check rank first).
    pub fn dim(&self, i: usize) -> usize {
        self.0.get(i).copied().unwrap_or(0)
    }

    /// True if `suffix` equals the trailing dimensions of `self`.
    pub fn ends_with(&self, suffix: &Shape) -> bool {
        self.0.ends_with(&suffix.0)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Self {
        Shape(d.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Self {
        Shape(d.to_vec())
    }
}

/// Checks that `s` (called `what` in the message) has rank `r`.
pub(crate) fn rank(s: &Shape, r: usize, what: &str) -> Result<(), String> {
    if s.rank() == r {
        Ok(())
    } else {
        Err(format!("{what} must have rank {r}, got {s}"))
    }
}

/// Checks that `s` (called `what` in the message) is `want`.
pub(crate) fn same(s: &Shape, want: &Shape, what: &str) -> Result<(), String> {
    if s == want {
        Ok(())
    } else {
        Err(format!("{what} must have shape {want}, got {s}"))
    }
}

/// The output shapes `op` gives for inputs of `dims` (the op-rule tests' one call).
#[cfg(test)]
pub(crate) fn shapes_of(op: crate::Op, dims: &[&[usize]]) -> Result<Vec<Shape>, String> {
    let inputs: Vec<Shape> = dims.iter().map(|&d| Shape::from(d)).collect();
    op.infer_shapes(&inputs.iter().collect::<Vec<_>>())
}
