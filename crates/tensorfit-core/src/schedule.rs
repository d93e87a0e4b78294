//! The schedule: the order in which a graph's nodes run.
//!
//! A node runs after the producers of its inputs. An update node additionally runs after
//! every other node that reads one of its targets, so that those readers see the value
//! from before the update (the parameters used by forward and backward, not the stepped
//! ones). Among ready nodes the one added first runs first, which keeps forward before
//! backward and makes the order, and so the memory plan, deterministic.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId};

/// Returns every node of `graph` in an order that respects the rules above.
pub fn schedule(graph: &Graph) -> Result<Vec<NodeId>> {
    let nodes = graph.nodes();
    let n = nodes.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    let mut edge = |from: usize, to: usize, succ: &mut Vec<Vec<usize>>| {
        if from != to {
            succ[from].push(to);
            indeg[to] += 1;
        }
    };
    // Readers of each tensor, to order updates after them.
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); graph.tensors().len()];
    for (i, node) in nodes.iter().enumerate() {
        for &t in &node.inputs {
            readers[t.0].push(i);
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        for &t in &node.inputs {
            if let Some(p) = graph.tensor(t).producer {
                edge(p.0, i, &mut succ);
            }
        }
        if node.op.is_update() {
            for &t in &node.outputs {
                if let Some(p) = graph.tensor(t).producer {
                    edge(p.0, i, &mut succ);
                }
                for &r in &readers[t.0] {
                    edge(r, i, &mut succ);
                }
            }
        }
    }
    // Two updates of the same target run in the order they were added.
    for (i, a) in nodes.iter().enumerate() {
        if !a.op.is_update() {
            continue;
        }
        for (j, b) in nodes.iter().enumerate().skip(i + 1) {
            if b.op.is_update() && b.outputs.iter().any(|t| a.outputs.contains(t)) {
                edge(i, j, &mut succ);
            }
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(NodeId(i));
        for &j in &succ[i] {
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.insert(j);
            }
        }
    }
    if order.len() != n {
        return Err(Error::Graph(
            "the update nodes form a cycle (an update reads a value another update of the same step must write first)".into(),
        ));
    }
    Ok(order)
}
