//! `tensorfit devices` and `tensorfit model`: what the machine has, what a model holds.

use anyhow::Result;
use serde_json::{json, Value};
use tensorfit::nn::{description_json, ParamKind, TrainingValue};
use tensorfit::plan::format_bytes;
use tensorfit::{DevicePolicy, Devices};

use super::train::TrainArgs;
use super::training_file::{self, Typed};
use super::{CapArgs, Exit, ModelArg};

/// Each device, its memory and throughput, or why it is unavailable.
pub fn devices(caps: &CapArgs, json_out: bool) -> Result<Exit> {
    let devices = Devices::discover(&caps.capping(DevicePolicy::auto())?);
    let mut rows = Vec::new();
    for d in devices.list() {
        match &d.info {
            Ok(info) => {
                let gflops = devices.throughput_gflops(d);
                if json_out {
                    rows.push(json!({
                        "device": d.id, "kind": d.kind.name(), "available": true, "name": info.name,
                        "total_bytes": info.total_bytes, "free_bytes": info.free_bytes,
                        "capacity_source": info.capacity_source, "software": info.software,
                        "max_buffer_bytes": info.max_buffer_bytes, "throughput_gflops": gflops,
                    }));
                } else {
                    outln!(
                        "{:<7} {}{}\n        total {}, free {} ({}), largest buffer {}, GEMM {}",
                        d.id,
                        info.name,
                        if info.software { " [software]" } else { "" },
                        format_bytes(info.total_bytes),
                        info.free_bytes.map_or("unknown".into(), format_bytes),
                        info.capacity_source,
                        if info.max_buffer_bytes >= 1 << 60 {
                            "unlimited".into()
                        } else {
                            format_bytes(info.max_buffer_bytes)
                        },
                        gflops.map_or("not measured".into(), |g| format!("{g:.1} GFLOP/s")),
                    );
                }
            }
            Err(why) => {
                if json_out {
                    rows.push(json!({"device": d.id, "kind": d.kind.name(), "available": false, "reason": why}));
                } else {
                    outln!("{:<7} unavailable — {why}", d.id);
                }
            }
        }
    }
    if json_out {
        outln!("{}", json!({ "devices": rows }));
    }
    Ok(Exit::Success)
}

/// A model: its description (TOML, with the file's `[training]` table), then its
/// tensors (PyTorch names, shapes, counts, kinds) and the trainable total; or all of it
/// as one JSON object.
pub fn model(model: &ModelArg, json_out: bool) -> Result<Exit> {
    let file = model.load()?;
    // The `[training]` table is shown as `train` would take it: each value checked by its
    // flag's parser (an lr of -1 was shown as a setting).
    if let ModelArg::File(path) = model {
        training_file::apply_to::<TrainArgs>("train", &Typed::default(), path, &file.training)?;
    }
    let cfg = &file.model;
    let specs = cfg.param_specs()?;
    let kind = |k: ParamKind| match k {
        ParamKind::Trainable => "trainable",
        ParamKind::RunningStat => "running statistic",
    };
    let trainable = cfg.trainable_parameters()?;
    if json_out {
        let training: serde_json::Map<String, Value> = file
            .training
            .iter()
            .map(|e| (e.key.clone(), training_json(&e.value)))
            .collect();
        let parameters: Vec<Value> = specs
            .iter()
            .map(|p| {
                json!({
                    "name": p.name, "shape": p.shape.dims(), "count": p.shape.numel(),
                    "kind": kind(p.kind),
                })
            })
            .collect();
        let description: Value = serde_json::from_str(&description_json::to_json(cfg))?;
        outln!(
            "{}",
            json!({
                "model": model.to_string(), "description": description, "toml": file.model_toml(),
                "training": training, "parameters": parameters,
                "trainable_parameters": trainable,
            })
        );
        return Ok(Exit::Success);
    }
    outln!("# --model {model}\n{}", file.model_toml());
    if !file.training.is_empty() {
        outln!("[training]");
        for e in &file.training {
            outln!("{} = {}", e.key, e.value);
        }
        outln!();
    }
    outln!("{:<24} {:>12} {:>10}  kind", "tensor", "shape", "count");
    for spec in &specs {
        outln!(
            "{:<24} {:>12} {:>10}  {}",
            spec.name,
            spec.shape.to_string(),
            spec.shape.numel(),
            kind(spec.kind)
        );
    }
    outln!("trainable parameters: {trainable}");
    Ok(Exit::Success)
}

/// A `[training]` value in JSON: a switch, a number, or a string.
fn training_json(v: &TrainingValue) -> Value {
    match v {
        TrainingValue::Bool(b) => json!(b),
        TrainingValue::Text(t) => match serde_json::from_str::<Value>(t) {
            Ok(n @ Value::Number(_)) => n,
            _ => json!(t),
        },
    }
}
