//! The decision for people and tools: the candidates as a table and as JSON, the host
//! section of the plan, and seconds as people read them.

use std::fmt::Write as _;

use serde_json::{json, Value};
use tensorfit_plan::{format_bytes, format_seconds, Candidate};

use tensorfit_nn::bound::describe;

use super::{Choice, Decision};
use crate::host_budget::memory_is_host;

impl Decision {
    /// The host section of the plan, as JSON.
    pub fn host_json(&self) -> Value {
        json!({
            "inputs": self.host.inputs,
            "state_copies": self.host.state,
            "read_ahead": self.host.read_ahead,
            "communication": self.host.communication,
            "allocator": self.host.allocator,
            "driver": self.chosen().map(|c| self.host.driver_bytes(c.device)),
            "process": self.process_bytes,
            "process_peak": self.process_peak_bytes,
            "planned_resident": self.planned_resident(),
        })
    }

    /// The host section of the plan, for people.
    pub fn host_table(&self) -> String {
        let h = &self.host;
        let read_ahead = match h.read_ahead {
            0 => String::new(),
            bytes => format!(", batches read ahead from files {}", format_bytes(bytes)),
        };
        let communication = match h.communication {
            0 => String::new(),
            bytes => format!(", gradients averaged over ranks {}", format_bytes(bytes)),
        };
        let allocator = match h.allocator {
            0 => String::new(),
            bytes => format!(
                ", a batch freed and kept by the allocator {}",
                format_bytes(bytes)
            ),
        };
        let mut s = format!(
            "host memory: input data {}, the training state's host copy {}{read_ahead}{communication}{allocator}, this process {} before the job\n",
            format_bytes(h.inputs),
            format_bytes(h.state),
            format_bytes(self.process_bytes)
        );
        if let (Some(c), Some(resident)) = (self.chosen(), self.planned_resident()) {
            let with = match (memory_is_host(c.device), self.host.driver_bytes(c.device)) {
                (false, _) => String::new(),
                (true, 0) => " (the device plan included: its memory is host memory)".into(),
                (true, driver) => format!(
                    " (the device plan and {} of its {} included: its memory is host memory)",
                    format_bytes(driver),
                    match crate::registry::hardware(c.device.kind).packed_operands {
                        true => "kernels' packed operands",
                        false => "driver",
                    }
                ),
            };
            let _ = writeln!(
                s,
                "process resident memory{with}: {}",
                format_bytes(resident)
            );
        }
        s
    }

    /// The decision as JSON (`tensorfit plan --json`): every candidate and the choice.
    pub fn to_json(&self) -> Value {
        json!({
            "bound": describe(self.bound),
            "host": self.host_json(),
            "candidates": self.candidates.iter().map(Candidate::to_json).collect::<Vec<_>>(),
            "chosen": self.chosen.map(|i| self.candidates[i].to_json()),
            "unavailable": self.unavailable.iter().map(|(d, w)| json!({"device": d, "reason": w})).collect::<Vec<_>>(),
        })
    }

    /// The candidates as a table a person reads, one line each, then the choice.
    pub fn table(&self) -> String {
        let mut s = String::new();
        // Assumed devices have long ids (`a100-80gb (assumed)`).
        let w = (self.candidates.iter().map(|c| c.device.len()))
            .chain(self.unavailable.iter().map(|(d, _)| d.len()))
            .max()
            .unwrap_or(0)
            .max(8);
        let _ = writeln!(
            s,
            "{:<w$} {:>10} {:>10}  {:<4} {:<40} {:>10}  why",
            "device", "usable", "needs", "fits", "strategy", "est. time"
        );
        for c in &self.candidates {
            let _ = writeln!(
                s,
                "{:<w$} {:>10} {:>10}  {:<4} {:<40} {:>10}  {}",
                c.device,
                format_bytes(c.capacity_bytes),
                format_bytes(c.estimated_peak_bytes),
                if c.fits { "yes" } else { "no" },
                c.strategy,
                format_seconds(c.estimated_seconds),
                c.reason
            );
        }
        for (d, why) in &self.unavailable {
            let _ = writeln!(s, "{d:<w$} unavailable: {why}");
        }
        match self.chosen() {
            Some(Choice {
                candidate: c,
                device: info,
                ..
            }) => {
                let _ = writeln!(
                    s,
                    "chosen: {} ({}), {}, estimated {} per {}",
                    c.device,
                    info.name,
                    c.strategy,
                    format_seconds(c.estimated_seconds),
                    self.unit
                );
                let _ = writeln!(
                    s,
                    "planned for the bound {}: every shape within it runs on this plan",
                    describe(self.bound)
                );
            }
            None => {
                let _ = writeln!(s, "chosen: nothing fits");
            }
        }
        s
    }
}
