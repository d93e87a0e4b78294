//! Running a scheduled graph on a backend.
//!
//! An [`Executable`] owns a graph, its schedule and a [`TensorView`] for every tensor.
//! Views come either from the caller (tensors that outlive one graph, such as parameters
//! shared by a training graph and an inference graph) or from a [`Placement`] computed
//! for the rest. The default placement gives each remaining tensor its own buffer; the
//! planner replaces it with offsets into a few arenas, which is the allocation it
//! estimated. The executable allocates exactly the buffers the placement names.

use std::collections::HashMap;

use crate::backend::{Backend, BufferId, TensorView};
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId, TensorId};
use crate::schedule::schedule;
use crate::shape::DType;

/// Where the tensors a caller does not bind will live: buffer sizes in bytes, and for each
/// placed tensor, the index of its buffer and its offset in elements.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    pub buffer_bytes: Vec<u64>,
    pub tensors: HashMap<TensorId, (usize, usize)>,
}

impl Placement {
    /// One buffer per tensor: simple, and the upper bound of any plan.
    pub fn one_buffer_per_tensor(graph: &Graph, skip: &HashMap<TensorId, TensorView>) -> Self {
        let mut p = Placement::default();
        for (i, info) in graph.tensors().iter().enumerate() {
            let id = TensorId(i);
            if skip.contains_key(&id) {
                continue;
            }
            p.tensors.insert(id, (p.buffer_bytes.len(), 0));
            p.buffer_bytes.push(info.bytes());
        }
        p
    }
}

/// A whole run's memory as the planner laid it out: the arenas to allocate, the slot of
/// every persistent tensor by key, and each program's placement by program name.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub arena_bytes: Vec<u64>,
    /// Persistent key → (arena index, offset in elements).
    pub persistent: HashMap<String, (usize, usize)>,
    pub programs: HashMap<String, Placement>,
}

/// A graph bound to memory on one backend, ready to run any number of times.
#[derive(Debug)]
pub struct Executable {
    graph: Graph,
    /// The nodes in schedule order, each with its input and output views (resolved once
    /// here, not on every run).
    steps: Vec<(NodeId, Vec<TensorView>, Vec<TensorView>)>,
    views: Vec<TensorView>,
    owned: Vec<BufferId>,
}

/// Allocates one buffer per entry of `bytes` (at least one `f32` each). On a failure,
/// frees what it allocated and returns the error.
pub fn allocate_all(backend: &mut dyn Backend, bytes: &[u64]) -> Result<Vec<BufferId>> {
    let mut buffers = Vec::with_capacity(bytes.len());
    let least = DType::F32.size_bytes() as u64;
    for &b in bytes {
        match backend.allocate(b.max(least)) {
            Ok(id) => buffers.push(id),
            Err(e) => {
                for id in buffers {
                    // Best effort: the allocation error is the one worth reporting.
                    let _ = backend.free(id);
                }
                return Err(e);
            }
        }
    }
    Ok(buffers)
}

impl Executable {
    /// Binds `graph` with the caller's `bound` views and one buffer per other tensor.
    pub fn new(
        graph: Graph,
        backend: &mut dyn Backend,
        bound: HashMap<TensorId, TensorView>,
    ) -> Result<Self> {
        let placement = Placement::one_buffer_per_tensor(&graph, &bound);
        Self::with_placement(graph, backend, bound, &placement)
    }

    /// Binds `graph` with the caller's `bound` views and `placement` for the rest,
    /// allocating the placement's buffers (owned by the executable). On an allocation
    /// failure, frees what it allocated and returns the error.
    pub fn with_placement(
        graph: Graph,
        backend: &mut dyn Backend,
        bound: HashMap<TensorId, TensorView>,
        placement: &Placement,
    ) -> Result<Self> {
        let order = schedule(&graph)?;
        check_layout(&graph, &bound, placement)?;
        let owned = allocate_all(backend, &placement.buffer_bytes)?;
        let views = make_views(&graph, &bound, placement, &owned);
        Ok(Self::assemble(graph, &order, views, owned))
    }

    /// Binds `graph` into buffers the caller owns: `buffers[i]` holds at least
    /// `placement.buffer_bytes[i]` bytes. Several executables can share these buffers
    /// (arenas) as long as they never run at the same time.
    pub fn in_buffers(
        graph: Graph,
        bound: HashMap<TensorId, TensorView>,
        placement: &Placement,
        buffers: &[BufferId],
    ) -> Result<Self> {
        let order = schedule(&graph)?;
        check_layout(&graph, &bound, placement)?;
        if buffers.len() != placement.buffer_bytes.len() {
            return Err(Error::Graph(format!(
                "placement names {} buffers, {} given",
                placement.buffer_bytes.len(),
                buffers.len()
            )));
        }
        let views = make_views(&graph, &bound, placement, buffers);
        Ok(Self::assemble(graph, &order, views, Vec::new()))
    }

    fn assemble(
        graph: Graph,
        order: &[NodeId],
        views: Vec<TensorView>,
        owned: Vec<BufferId>,
    ) -> Self {
        let bind = |ts: &[TensorId]| ts.iter().map(|t| views[t.0].clone()).collect();
        let steps = order
            .iter()
            .map(|&n| {
                let node = graph.node(n);
                (n, bind(&node.inputs), bind(&node.outputs))
            })
            .collect();
        Executable {
            graph,
            steps,
            views,
            owned,
        }
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The view of a tensor.
    pub fn view(&self, t: TensorId) -> &TensorView {
        &self.views[t.0]
    }

    /// Writes host values into a tensor.
    pub fn write(&self, backend: &mut dyn Backend, t: TensorId, data: &[f32]) -> Result<()> {
        backend.write(&self.views[t.0], data)
    }

    /// Reads a tensor to the host.
    pub fn read(&self, backend: &mut dyn Backend, t: TensorId) -> Result<Vec<f32>> {
        let mut out = vec![0.0; self.views[t.0].len()];
        backend.read(&self.views[t.0], &mut out)?;
        Ok(out)
    }

    /// Runs every node once, in schedule order.
    pub fn run(&self, backend: &mut dyn Backend) -> Result<()> {
        for (n, ins, outs) in &self.steps {
            backend.execute(&self.graph.node(*n).op, ins, outs)?;
        }
        Ok(())
    }

    /// Frees the buffers this executable allocated (bound views stay with their owner).
    pub fn release(self, backend: &mut dyn Backend) -> Result<()> {
        for b in self.owned {
            backend.free(b)?;
        }
        Ok(())
    }
}

/// Checks every binding and placement before anything is allocated, so a bad one leaks
/// nothing and the views built afterwards are all valid.
fn check_layout(
    graph: &Graph,
    bound: &HashMap<TensorId, TensorView>,
    placement: &Placement,
) -> Result<()> {
    for (id, v) in bound {
        let info = graph.tensors().get(id.0).ok_or_else(|| {
            Error::Graph(format!("binding for tensor #{} outside the graph", id.0))
        })?;
        if v.shape != info.shape {
            return Err(Error::Graph(format!(
                "tensor `{}` {} bound to a view of shape {}",
                info.name, info.shape, v.shape
            )));
        }
    }
    for (i, info) in graph.tensors().iter().enumerate() {
        if bound.contains_key(&TensorId(i)) {
            continue;
        }
        let &(buf, offset) = placement.tensors.get(&TensorId(i)).ok_or_else(|| {
            Error::Graph(format!(
                "tensor `{}` has neither a binding nor a placement",
                info.name
            ))
        })?;
        let end = (offset as u64 + info.shape.numel() as u64) * info.dtype.size_bytes() as u64;
        if placement
            .buffer_bytes
            .get(buf)
            .is_none_or(|&bytes| end > bytes)
        {
            return Err(Error::Graph(format!(
                "tensor `{}` is placed outside its buffer",
                info.name
            )));
        }
    }
    Ok(())
}

/// One view per tensor: the binding, or the placement inside `buffers` (checked before).
fn make_views(
    graph: &Graph,
    bound: &HashMap<TensorId, TensorView>,
    placement: &Placement,
    buffers: &[BufferId],
) -> Vec<TensorView> {
    graph
        .tensors()
        .iter()
        .enumerate()
        .map(|(i, info)| match bound.get(&TensorId(i)) {
            Some(v) => v.clone(),
            None => {
                let (buf, offset) = placement.tensors[&TensorId(i)];
                TensorView {
                    buffer: buffers[buf],
                    offset,
                    shape: info.shape.clone(),
                    dtype: info.dtype,
                }
            }
        })
        .collect()
}
