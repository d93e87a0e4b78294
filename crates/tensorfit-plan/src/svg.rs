//! A picture of a plan: every arena over the run's schedule, as an SVG file.
//!
//! Each arena is a horizontal band whose height stands for its bytes (offset 0 at the
//! top); the run's programs (which never run at once and share the scratch arenas) sit
//! side by side along x, each over its own schedule. Every planned tensor is one box
//! (`<rect class="tensor">`) from its first to its last use, at its offset, as tall as
//! its bytes and coloured by its category; a persistent tensor spans the whole run. A
//! dashed line marks the schedule position where the largest program holds the most
//! bytes at once. Hovering a box shows its name, shape, bytes, category and uses (its
//! `<title>`). Written by hand: the format is simple and a dependency would add nothing.

use std::fmt::Write as _;

use crate::liveness::Category;
use crate::memory::{Entry, MemoryPlan};
use crate::size::format_bytes;

/// Width of the whole picture, and of the labels left of the bands.
const WIDTH: f64 = 1200.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
/// Space above the bands (title, program names) and between them.
const TOP: f64 = 64.0;
const GAP: f64 = 14.0;
/// Height shared out among the bands in proportion to their bytes, and the least any
/// band or program column gets, so that a small arena stays visible.
const BANDS: f64 = 520.0;
const MIN_BAND: f64 = 36.0;
const MIN_COLUMN: f64 = 70.0;
const LEGEND: f64 = 56.0;

/// A colour per category (Tableau 10), in [`Category::ALL`]'s order.
const COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948", "#e15759", "#b07aa1", "#9c755f",
];

fn colour(c: Category) -> &'static str {
    COLOURS[c as usize]
}

/// `text` with XML's five special characters escaped.
fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&apos;"),
            c => s.push(c),
        }
    }
    s
}

/// Splits `total` among `weights` in proportion, each getting at least `least` (less if
/// `total` cannot give everyone that much).
fn share(total: f64, least: f64, weights: &[f64]) -> Vec<f64> {
    let n = weights.len() as f64;
    let least = least.min(total / n.max(1.0));
    let sum: f64 = weights.iter().sum();
    let rest = total - least * n;
    weights
        .iter()
        .map(|w| least + if sum > 0.0 { rest * w / sum } else { rest / n })
        .collect()
}

/// Where things go: x of each program's column, y of each arena's band.
struct Layout {
    /// (x, width) of each program's column.
    columns: Vec<(f64, f64)>,
    /// (y, height) of each arena's band.
    bands: Vec<(f64, f64)>,
}

impl Layout {
    fn of(plan: &MemoryPlan) -> Layout {
        let steps: Vec<f64> = plan.programs.iter().map(|p| (p.steps + 1) as f64).collect();
        let widths = share(WIDTH - LEFT - RIGHT, MIN_COLUMN, &steps);
        let mut x = LEFT;
        let columns = widths
            .iter()
            .map(|&w| {
                x += w;
                (x - w, w)
            })
            .collect();
        let bytes: Vec<f64> = plan.arena_bytes.iter().map(|&b| b as f64).collect();
        let heights = share(BANDS, MIN_BAND, &bytes);
        let mut y = TOP;
        let bands = heights
            .iter()
            .map(|&h| {
                y += h + GAP;
                (y - h - GAP, h)
            })
            .collect();
        Layout { columns, bands }
    }

    fn bottom(&self) -> f64 {
        self.bands.last().map_or(TOP, |&(y, h)| y + h)
    }

    /// The box of `e` over `span` (x, width): its bytes at its offset in its band.
    fn rect(&self, plan: &MemoryPlan, e: &Entry, span: (f64, f64)) -> (f64, f64, f64, f64) {
        let (by, bh) = self.bands[e.arena];
        let scale = bh / plan.arena_bytes[e.arena].max(1) as f64;
        let y = by + e.offset_bytes as f64 * scale;
        let h = (e.bytes as f64 * scale).max(0.5);
        (span.0, y, span.1.max(0.5), h)
    }
}

impl MemoryPlan {
    /// The plan as an SVG document titled `title` (see the module documentation). Every
    /// entry of the plan, persistent or of a program, is one `<rect class="tensor">`.
    pub fn svg(&self, title: &str) -> String {
        picture(self, title)
    }
}

fn picture(plan: &MemoryPlan, title: &str) -> String {
    let layout = Layout::of(plan);
    let height = layout.bottom() + GAP + LEGEND;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="38">estimated peak {} = {} arena(s) + backend overhead {}; x: each program's schedule, y: offset in the arena</text>"#,
        format_bytes(plan.peak_bytes()),
        plan.arena_bytes.len(),
        format_bytes(plan.overhead_bytes)
    );
    bands(&mut s, plan, &layout);
    programs(&mut s, plan, &layout);
    tensors(&mut s, plan, &layout);
    peak(&mut s, plan, &layout);
    legend(&mut s, layout.bottom() + GAP + 20.0);
    s.push_str("</svg>\n");
    s
}

/// Each arena's band and its label.
fn bands(s: &mut String, plan: &MemoryPlan, layout: &Layout) {
    for (a, (&(y, h), &bytes)) in layout.bands.iter().zip(&plan.arena_bytes).enumerate() {
        let kind = if a < plan.persistent_arenas {
            "persistent"
        } else {
            "scratch"
        };
        let _ = writeln!(
            s,
            r##"<rect class="arena" x="{LEFT}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="#f4f4f4" stroke="#888"/>"##,
            WIDTH - LEFT - RIGHT
        );
        let _ = writeln!(
            s,
            r##"<text x="10" y="{:.1}">arena {a} ({kind})</text><text x="10" y="{:.1}" fill="#555">{}</text>"##,
            y + 14.0,
            y + 28.0,
            format_bytes(bytes)
        );
    }
}

/// Each program's name above its column, and a line between columns.
fn programs(s: &mut String, plan: &MemoryPlan, layout: &Layout) {
    let bottom = layout.bottom();
    for (p, &(x, w)) in plan.programs.iter().zip(&layout.columns) {
        // About 6.5 px per character at 12 px.
        let fit = ((w - 6.0) / 6.5).max(1.0) as usize;
        let label: String = if p.name.chars().count() > fit {
            p.name
                .chars()
                .take(fit.saturating_sub(1))
                .chain(['…'])
                .collect()
        } else {
            p.name.clone()
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}"><title>{} ({} steps)</title>{}</text>"#,
            x + 3.0,
            TOP - 8.0,
            escape(&p.name),
            p.steps,
            escape(&label)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#333" stroke-width="1"/>"##,
            TOP - 4.0
        );
    }
}

/// One box per tensor.
fn tensors(s: &mut String, plan: &MemoryPlan, layout: &Layout) {
    let whole = (LEFT, WIDTH - LEFT - RIGHT);
    for e in &plan.persistent {
        tensor(s, plan, layout, e, whole, "persistent: the whole run");
    }
    for (p, &(x, w)) in plan.programs.iter().zip(&layout.columns) {
        let step = w / (p.steps + 1) as f64;
        for e in &p.entries {
            let (first, last) = e.uses.unwrap_or((0, p.steps));
            let span = (x + first as f64 * step, (last - first + 1) as f64 * step);
            let uses = format!("{}: steps {first}–{last} of {}", p.name, p.steps);
            tensor(s, plan, layout, e, span, &uses);
        }
    }
}

fn tensor(
    s: &mut String,
    plan: &MemoryPlan,
    layout: &Layout,
    e: &Entry,
    span: (f64, f64),
    uses: &str,
) {
    let (x, y, w, h) = layout.rect(plan, e, span);
    let _ = writeln!(
        s,
        r##"<rect class="tensor" x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" fill="{}" stroke="#fff" stroke-width="0.3"><title>{} {} {} ({} bytes), {}; {}</title></rect>"##,
        colour(e.category),
        escape(&e.name),
        escape(&e.shape.to_string()),
        format_bytes(e.bytes),
        e.bytes,
        escape(e.category.label()),
        escape(uses)
    );
}

/// The dashed line at the largest program's moment of most live bytes.
fn peak(s: &mut String, plan: &MemoryPlan, layout: &Layout) {
    let Some((i, p)) = plan
        .programs
        .iter()
        .enumerate()
        .max_by_key(|(_, p)| p.live_peak_bytes)
    else {
        return;
    };
    let (x, w) = layout.columns[i];
    let at = x + (p.live_peak_step as f64 + 0.5) * w / (p.steps + 1) as f64;
    let _ = writeln!(
        s,
        r##"<line class="peak" x1="{at:.1}" y1="{:.1}" x2="{at:.1}" y2="{:.1}" stroke="#d00" stroke-width="2" stroke-dasharray="6 4"><title>peak: {} of {}'s tensors alive at step {}, with {} of persistent tensors</title></line>"##,
        TOP - 4.0,
        layout.bottom(),
        format_bytes(p.live_peak_bytes),
        escape(&p.name),
        p.live_peak_step,
        format_bytes(plan.persistent.iter().map(|e| e.bytes).sum()),
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" fill="#d00" font-weight="bold">peak: {} live</text>"##,
        (at + 4.0).min(WIDTH - 110.0),
        layout.bottom() + 12.0,
        format_bytes(p.live_peak_bytes)
    );
}

/// A swatch and label per category.
fn legend(s: &mut String, y: f64) {
    let mut x = 10.0;
    for c in Category::ALL {
        let _ = writeln!(
            s,
            r##"<rect x="{x:.0}" y="{:.0}" width="12" height="12" fill="{}"/><text x="{:.0}" y="{y:.0}">{}</text>"##,
            y - 10.0,
            colour(c),
            x + 16.0,
            escape(c.label())
        );
        x += 24.0 + 6.6 * c.label().len() as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_proportional_above_the_least_and_add_up() {
        let w = share(100.0, 10.0, &[1.0, 3.0]);
        assert!((w.iter().sum::<f64>() - 100.0).abs() < 1e-9);
        assert!(
            (w[0] - 30.0).abs() < 1e-9 && (w[1] - 70.0).abs() < 1e-9,
            "{w:?}"
        );
        // Too many for the least each: everyone gets an equal part of what there is.
        let w = share(10.0, 10.0, &[0.0, 0.0, 0.0, 0.0]);
        assert!(w.iter().all(|&x| (x - 2.5).abs() < 1e-9), "{w:?}");
    }

    #[test]
    fn names_are_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
