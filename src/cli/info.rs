//! `tensorfit devices` and `tensorfit model`: what the machine has, what a model holds.

use anyhow::Result;
use serde_json::json;
use tensorfit::devices::{discover, open_device, MemoryCaps};
use tensorfit::nn::ParamKind;
use tensorfit::plan::format_bytes;

use super::{CapArgs, Exit, Model};

/// Each device, its memory and throughput, or why it is unavailable.
pub fn devices(caps: &CapArgs, json_out: bool) -> Result<Exit> {
    let caps = caps.caps()?;
    let mut rows = Vec::new();
    for d in discover(&caps) {
        match d.info {
            Ok(info) => {
                let gflops = tensorfit::calibrate::throughput_gflops(&info, || {
                    open_device(d.kind, d.index, &MemoryCaps::default())
                })
                .ok();
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

/// A model's parameters: PyTorch names, shapes, counts.
pub fn model(model: Model) -> Result<Exit> {
    let cfg = model.config();
    outln!("{:<24} {:>12} {:>10}  kind", "tensor", "shape", "count");
    for spec in cfg.param_specs()? {
        let kind = match spec.kind {
            ParamKind::Trainable => "trainable",
            ParamKind::RunningStat => "running statistic",
        };
        outln!(
            "{:<24} {:>12} {:>10}  {kind}",
            spec.name,
            spec.shape.to_string(),
            spec.shape.numel()
        );
    }
    outln!("trainable parameters: {}", cfg.trainable_parameters()?);
    Ok(Exit::Success)
}
