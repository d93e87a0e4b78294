//! The README's "Use as a library" program is `examples/embed_in_app.rs`, which `cargo
//! test` builds: the two must not drift apart.

#[test]
fn the_readme_library_program_is_the_embed_in_app_example() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/embed_in_app.rs");
    let body = &example[example
        .find("use tensorfit::")
        .expect("the example starts with its imports")..];
    assert!(
        readme.contains(&format!("```rust\n{body}```")),
        "README.md's \"Use as a library\" block differs from examples/embed_in_app.rs; copy the example's code from its first `use` into the README"
    );
}
