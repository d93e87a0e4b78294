//! The curves image of a data run: the training loss and the validation loss against the
//! step, read back from the run's `metrics.jsonl` (so a resumed run draws its whole
//! history) and drawn as an SVG with plotters beside it. The SVG's text is SVG text, so
//! no font is read or bundled.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use serde_json::Value;
use tensorfit::nn::atomic_file::write_atomic;

/// The image's file name beside `metrics.jsonl`.
pub const CURVES_FILE: &str = "curves.svg";

/// The (step, loss) points of one curve.
type Curve = Vec<(f64, f64)>;

/// Reads `metrics` (a JSON object a line, with `step` and `train_loss`, and `val_loss`
/// where the run validated) into the training and validation curves.
fn read_curves(metrics: &Path) -> Result<(Curve, Curve)> {
    let text = std::fs::read_to_string(metrics)
        .with_context(|| format!("reading {}", metrics.display()))?;
    let (mut train, mut val) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a JSON line", metrics.display(), i + 1))?;
        let Some(step) = v["step"].as_f64() else {
            continue;
        };
        if let Some(l) = v["train_loss"].as_f64().filter(|l| l.is_finite()) {
            train.push((step, l));
        }
        if let Some(l) = v["val_loss"].as_f64().filter(|l| l.is_finite()) {
            val.push((step, l));
        }
    }
    Ok((train, val))
}

/// Draws the curves of `metrics` into `out` (written atomically). A run with no line yet
/// draws empty axes.
pub fn write_curves(metrics: &Path, out: &Path, title: &str) -> Result<()> {
    let (train, val) = read_curves(metrics)?;
    let points = train.iter().chain(&val);
    let x_end = points.clone().map(|p| p.0).fold(1.0, f64::max);
    let y_end = points.map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 480)).into_drawing_area();
        let drawn = |e| anyhow!("drawing {}: {e}", out.display());
        root.fill(&WHITE).map_err(drawn)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_end, 0.0..y_end)
            .map_err(drawn)?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("loss")
            .draw()
            .map_err(drawn)?;
        for (curve, colour, name) in [(train, BLUE, "training"), (val, RED, "validation")] {
            if curve.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(curve, colour.stroke_width(2)))
                .map_err(drawn)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(drawn)?;
        root.present().map_err(drawn)?;
    }
    write_atomic(out, svg.as_bytes()).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}
