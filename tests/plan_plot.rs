//! `tensorfit plan --plot plan.svg`: a well-formed SVG with one box per planned tensor,
//! each with its name in its hover text; an unwritable path is refused before planning.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{json, scratch, succeed, tensorfit_command};

#[test]
fn the_picture_is_well_formed_svg_with_one_box_per_planned_tensor() {
    let dir = scratch("plan_plot");
    let path = dir.join("plan.svg");
    let p = path.to_str().unwrap();
    let v = json(&succeed(
        tensorfit_command().args([
            "plan",
            "--mode",
            "train",
            "--batch",
            "16",
            "--seq-len",
            "120",
            "--tbptt",
            "40",
            "--assume",
            "t4",
            "--plot",
            p,
            "--json",
        ]),
        "plan --plot",
    ));
    let plan = &v["plan"];
    // Every planned tensor by name, counted (a name may recur in two programs).
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    let mut entries: Vec<&serde_json::Value> =
        plan["persistent"].as_array().unwrap().iter().collect();
    for prog in plan["programs"].as_array().unwrap() {
        entries.extend(prog["entries"].as_array().unwrap());
    }
    for e in &entries {
        *want
            .entry(e["name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert!(
        entries.len() > 50,
        "a training step has many tensors: {}",
        entries.len()
    );

    let text = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let boxes: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("tensor"))
        .collect();
    assert_eq!(boxes.len(), entries.len());
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    for b in &boxes {
        for a in ["x", "y", "width", "height"] {
            let n: f64 = b.attribute(a).unwrap().parse().unwrap();
            assert!(n.is_finite() && n >= 0.0, "{a}={n}");
        }
        let title = b
            .children()
            .find(|c| c.has_tag_name("title"))
            .and_then(|t| t.text())
            .expect("hover text");
        assert!(title.contains("bytes"), "{title}");
        let name = title.split(' ').next().unwrap().to_string();
        *got.entry(name).or_default() += 1;
    }
    assert_eq!(got, want);
    assert_eq!(
        doc.descendants()
            .filter(|n| n.attribute("class") == Some("peak"))
            .count(),
        1,
        "the peak is marked"
    );
}

#[test]
fn an_unwritable_plot_path_is_refused_before_planning() {
    let out = tensorfit_command()
        .args([
            "plan",
            "--assume",
            "t4",
            "--plot",
            "/nonexistent-dir/plan.svg",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--plot") && err.contains("nonexistent-dir"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing was planned");
}
