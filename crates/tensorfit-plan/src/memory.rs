//! The memory plan: every byte a run will allocate, placed before anything is allocated.
//!
//! A run is one or more *programs* (graphs run one at a time: a training segment, a
//! state-advancing chunk, an evaluation chunk) that share *persistent* tensors
//! (parameters, optimizer moments, running statistics, carried LSTM state). The plan
//! packs the persistent tensors into persistent arenas, places each program's other
//! tensors by liveness into scratch arenas that all programs share (they never run at
//! once), and adds the backend's own overhead. The session then allocates exactly these
//! arenas: the plan is the allocation, so the estimate can only miss by what the backend
//! itself holds.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{json, Value};
use tensorfit_core::{
    DType, DeviceInfo, Error, Graph, Layout, Placement, Result, Role, Shape, TensorId,
};

use crate::arena::{align_up, place, Item};
use crate::liveness::{liveness, Category, Liveness};
use crate::size::format_bytes;

/// What the device imposes on a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_buffer_bytes: u64,
    pub alignment_bytes: u64,
    pub overhead_bytes: u64,
}

impl From<&DeviceInfo> for Limits {
    fn from(d: &DeviceInfo) -> Self {
        Limits {
            max_buffer_bytes: d.max_buffer_bytes,
            alignment_bytes: d.alignment_bytes.max(ELEMENT_BYTES),
            overhead_bytes: d.overhead_bytes,
        }
    }
}

/// One program of a run, as the planner needs it.
#[derive(Debug, Clone)]
pub struct ProgramSpec<'a> {
    pub name: String,
    pub graph: &'a Graph,
    /// Tensors the host reads after a run; they stay alive to its end.
    pub outputs: Vec<TensorId>,
    /// Every parameter and state leaf of the graph, with the key under which all programs
    /// share it.
    pub persistent: Vec<(TensorId, String)>,
}

/// The smallest alignment of a view's offset: one element of the widest type (`f32`).
const ELEMENT_BYTES: u64 = DType::F32.size_bytes() as u64;

/// One placed tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub shape: Shape,
    pub dtype: DType,
    /// Bytes of the tensor itself (before alignment).
    pub bytes: u64,
    pub category: Category,
    pub arena: usize,
    pub offset_bytes: u64,
    /// Schedule positions of its first and last use in its program (a persistent
    /// tensor: `None`, alive the whole run).
    pub uses: Option<(usize, usize)>,
}

impl Entry {
    /// The offset in elements of the tensor's type, as a view counts it.
    pub fn offset_elements(&self) -> usize {
        (self.offset_bytes / self.dtype.size_bytes() as u64) as usize
    }
}

/// Bytes of a tensor of `shape` and `dtype`.
fn bytes_of(shape: &Shape, dtype: DType) -> u64 {
    (shape.numel() as u64).saturating_mul(dtype.size_bytes() as u64)
}

/// The placement of one program.
#[derive(Debug, Clone)]
pub struct ProgramPlan {
    pub name: String,
    /// Placement of the program's non-persistent tensors; `buffer_bytes` lists every arena
    /// of the plan (persistent ones included), so it indexes the plan's buffers directly.
    pub placement: Placement,
    pub entries: Vec<Entry>,
    /// Nodes in the program's schedule (positions run `0..=steps`, the last being the
    /// host reading its outputs).
    pub steps: usize,
    /// Most bytes of non-persistent tensors alive at once, the schedule position where
    /// that happens first, and their categories then.
    pub live_peak_bytes: u64,
    pub live_peak_step: usize,
    pub live_peak_by_category: Vec<(Category, u64)>,
}

/// A whole run's memory. See the module documentation.
#[derive(Debug, Clone)]
pub struct MemoryPlan {
    /// Sizes of every arena: the persistent ones first, then the scratch ones.
    pub arena_bytes: Vec<u64>,
    pub persistent_arenas: usize,
    /// Persistent tensors, named by their keys.
    pub persistent: Vec<Entry>,
    pub programs: Vec<ProgramPlan>,
    pub overhead_bytes: u64,
    pub alignment_bytes: u64,
}

impl MemoryPlan {
    /// Plans `programs` for a device with `limits`.
    pub fn new(programs: &[ProgramSpec<'_>], limits: Limits) -> Result<Self> {
        let align = limits.alignment_bytes.max(ELEMENT_BYTES);
        let cap = limits.max_buffer_bytes;

        let lives: Vec<Liveness> = programs
            .iter()
            .map(|p| liveness(p.graph, &p.outputs))
            .collect::<Result<_>>()?;

        // Persistent tensors: one slot per key, whichever program names it first.
        let mut keys: Vec<(String, Shape, DType, Category)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (p, live) in programs.iter().zip(&lives) {
            let cats = &live.categories;
            let bound: HashMap<TensorId, &String> =
                p.persistent.iter().map(|(t, k)| (*t, k)).collect();
            for (i, info) in p.graph.tensors().iter().enumerate() {
                let persistent = matches!(info.role, Role::Parameter | Role::State);
                match (persistent, bound.get(&TensorId(i))) {
                    (true, None) => {
                        return Err(Error::Graph(format!(
                            "program `{}`: persistent tensor `{}` has no key",
                            p.name, info.name
                        )))
                    }
                    (false, Some(_)) => {
                        return Err(Error::Graph(format!(
                            "program `{}`: `{}` is not a parameter or state",
                            p.name, info.name
                        )))
                    }
                    _ => {}
                }
                let Some(key) = bound.get(&TensorId(i)) else {
                    continue;
                };
                match index.get(*key) {
                    Some(&k) if keys[k].1 != info.shape => {
                        return Err(Error::Graph(format!(
                            "`{key}` is {} in one program and {} in another",
                            keys[k].1, info.shape
                        )))
                    }
                    Some(&k) => {
                        // Optimizer state is only recognisable where Adam runs.
                        if cats[i] == Category::OptimizerState {
                            keys[k].3 = Category::OptimizerState;
                        }
                    }
                    None => {
                        index.insert((*key).clone(), keys.len());
                        let key = (*key).clone();
                        keys.push((key, info.shape.clone(), info.dtype, cats[i]));
                    }
                }
            }
        }
        let items: Vec<Item> = keys
            .iter()
            .map(|(_, shape, dtype, _)| Item {
                bytes: bytes_of(shape, *dtype),
                start: 0,
                end: usize::MAX,
            })
            .collect();
        let (spots, mut arena_bytes) = place(&items, align, cap, |i| keys[i].0.clone())?;
        let persistent_arenas = arena_bytes.len();
        let persistent: Vec<Entry> = keys
            .iter()
            .zip(&spots)
            .map(|((name, shape, dtype, category), spot)| Entry {
                name: name.clone(),
                shape: shape.clone(),
                dtype: *dtype,
                bytes: bytes_of(shape, *dtype),
                category: *category,
                arena: spot.arena,
                offset_bytes: spot.offset,
                uses: None,
            })
            .collect();

        // Each program's other tensors, by liveness, into scratch arenas shared by all.
        let mut placed = Vec::with_capacity(programs.len());
        let mut scratch: Vec<u64> = Vec::new();
        for (p, live) in programs.iter().zip(lives) {
            let items: Vec<Item> = live
                .lifetimes
                .iter()
                .map(|l| Item {
                    bytes: p.graph.tensor(l.tensor).bytes(),
                    start: l.start,
                    end: l.end,
                })
                .collect();
            let (spots, sizes) = place(&items, align, cap, |i| {
                p.graph.tensor(live.lifetimes[i].tensor).name.clone()
            })?;
            for (a, &s) in sizes.iter().enumerate() {
                if a == scratch.len() {
                    scratch.push(s);
                } else {
                    scratch[a] = scratch[a].max(s);
                }
            }
            placed.push((live, spots));
        }
        arena_bytes.extend(&scratch);

        let mut plans = Vec::with_capacity(programs.len());
        for (p, (live, spots)) in programs.iter().zip(placed) {
            let mut placement = Placement {
                buffer_bytes: arena_bytes.clone(),
                tensors: HashMap::new(),
            };
            let mut entries = Vec::with_capacity(spots.len());
            for (l, spot) in live.lifetimes.iter().zip(&spots) {
                let info = p.graph.tensor(l.tensor);
                let arena = persistent_arenas + spot.arena;
                let offset = (spot.offset / info.dtype.size_bytes() as u64) as usize;
                placement.tensors.insert(l.tensor, (arena, offset));
                entries.push(Entry {
                    name: info.name.clone(),
                    shape: info.shape.clone(),
                    dtype: info.dtype,
                    bytes: info.bytes(),
                    category: l.category,
                    arena,
                    offset_bytes: spot.offset,
                    uses: Some((l.start, l.end)),
                });
            }
            // Sweep the schedule for the moment with the most live bytes.
            let mut best = (0u64, vec![0u64; Category::ALL.len()], 0usize);
            for step in 0..=live.steps {
                let mut by = vec![0u64; Category::ALL.len()];
                for l in live
                    .lifetimes
                    .iter()
                    .filter(|l| l.start <= step && step <= l.end)
                {
                    by[l.category as usize] += align_up(p.graph.tensor(l.tensor).bytes(), align);
                }
                let total: u64 = by.iter().sum();
                if total > best.0 {
                    best = (total, by, step);
                }
            }
            plans.push(ProgramPlan {
                name: p.name.clone(),
                placement,
                entries,
                steps: live.steps,
                live_peak_bytes: best.0,
                live_peak_step: best.2,
                live_peak_by_category: Category::ALL.iter().copied().zip(best.1).collect(),
            });
        }
        Ok(MemoryPlan {
            arena_bytes,
            persistent_arenas,
            persistent,
            programs: plans,
            overhead_bytes: limits.overhead_bytes,
            alignment_bytes: align,
        })
    }

    /// The estimated peak: every arena plus the backend's overhead.
    pub fn peak_bytes(&self) -> u64 {
        self.arena_bytes.iter().sum::<u64>() + self.overhead_bytes
    }

    /// Bytes in scratch arenas (shared by the programs).
    pub fn scratch_bytes(&self) -> u64 {
        self.arena_bytes[self.persistent_arenas..].iter().sum()
    }

    /// The layout the trainer allocates: these arenas, persistent slots by key, and each
    /// program's placement by name.
    pub fn layout(&self) -> Layout {
        Layout {
            arena_bytes: self.arena_bytes.clone(),
            persistent: self
                .persistent
                .iter()
                .map(|e| (e.name.clone(), (e.arena, e.offset_elements())))
                .collect(),
            programs: self
                .programs
                .iter()
                .map(|p| (p.name.clone(), p.placement.clone()))
                .collect(),
        }
    }

    /// The program whose tensors take the most bytes at once.
    pub fn largest_program(&self) -> Option<&ProgramPlan> {
        self.programs.iter().max_by_key(|p| p.live_peak_bytes)
    }

    /// The peak split into labelled parts that add up exactly to [`Self::peak_bytes`]:
    /// persistent tensors by category, the largest program's live tensors by category,
    /// the scratch bytes not covered by them (reuse gaps and alignment), and the backend.
    pub fn breakdown(&self) -> Vec<(&'static str, u64)> {
        let mut parts: Vec<(&'static str, u64)> = Vec::new();
        let mut add = |label: &'static str, bytes: u64| {
            if bytes == 0 {
                return;
            }
            match parts.iter_mut().find(|(l, _)| *l == label) {
                Some(p) => p.1 += bytes,
                None => parts.push((label, bytes)),
            }
        };
        let persistent_total: u64 = self.arena_bytes[..self.persistent_arenas].iter().sum();
        let mut persistent_used = 0;
        for c in Category::ALL {
            let b: u64 = self
                .persistent
                .iter()
                .filter(|e| e.category == c)
                .map(|e| align_up(e.bytes, self.alignment_bytes))
                .sum();
            persistent_used += b;
            add(c.label(), b);
        }
        let mut scratch_used = 0;
        if let Some(p) = self.largest_program() {
            for &(c, b) in &p.live_peak_by_category {
                scratch_used += b;
                add(c.label(), b);
            }
        }
        add(
            "alignment and reuse gaps",
            persistent_total.saturating_sub(persistent_used)
                + self.scratch_bytes().saturating_sub(scratch_used),
        );
        add("backend overhead", self.overhead_bytes);
        parts
    }

    /// A table a person can read: totals by category, then the largest entries.
    pub fn table(&self, largest: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "estimated peak {} = {} arena(s) of {} + backend overhead {}",
            format_bytes(self.peak_bytes()),
            self.arena_bytes.len(),
            self.arena_bytes
                .iter()
                .map(|&b| format_bytes(b))
                .collect::<Vec<_>>()
                .join(" + "),
            format_bytes(self.overhead_bytes)
        );
        let _ = writeln!(s, "  {:<34} {:>12}", "part", "bytes");
        for (label, b) in self.breakdown() {
            let _ = writeln!(s, "  {label:<34} {:>12}", format_bytes(b));
        }
        let mut all: Vec<(&str, &Entry)> =
            self.persistent.iter().map(|e| ("persistent", e)).collect();
        for p in &self.programs {
            all.extend(p.entries.iter().map(|e| (p.name.as_str(), e)));
        }
        all.sort_by_key(|(_, e)| std::cmp::Reverse(e.bytes));
        if largest > 0 {
            let _ = writeln!(
                s,
                "  largest tensors:\n  {:<30} {:<20} {:>10}  {:<30} program",
                "entry", "shape", "bytes", "category"
            );
            for (prog, e) in all.iter().take(largest) {
                let _ = writeln!(
                    s,
                    "  {:<30} {:<20} {:>10}  {:<30} {prog}",
                    e.name,
                    e.shape.to_string(),
                    format_bytes(e.bytes),
                    e.category.label()
                );
            }
        }
        s
    }

    /// The plan as JSON: peak, arenas, breakdown, and every entry.
    pub fn to_json(&self) -> Value {
        let entry = |e: &Entry| {
            json!({
                "name": e.name, "shape": e.shape.dims(), "bytes": e.bytes,
                "category": e.category.key(), "arena": e.arena, "offset": e.offset_bytes,
            })
        };
        json!({
            "estimated_peak_bytes": self.peak_bytes(),
            "arena_bytes": self.arena_bytes,
            "overhead_bytes": self.overhead_bytes,
            "breakdown": self.breakdown().iter().map(|(l, b)| json!({"part": l, "bytes": b})).collect::<Vec<_>>(),
            "persistent": self.persistent.iter().map(entry).collect::<Vec<_>>(),
            "programs": self.programs.iter().map(|p| json!({
                "name": p.name,
                "live_peak_bytes": p.live_peak_bytes,
                "entries": p.entries.iter().map(entry).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}
