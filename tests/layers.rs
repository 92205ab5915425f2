//! The house keeps its floors: every module of `src/` imports only modules
//! of the layers below it, in the order README's "Layout" lists them. A
//! layer that reaches up (the scheduler naming a fiber's `JoinHandle`, the
//! reactor a scheduler type, `time/` the net layer) fails here, naming the
//! file, the line and the two layers.
//!
//! What counts as an import: a `crate::name` path in code (doc comments and
//! comments do not count, nor does a macro's `$crate::`, which is the public
//! path a user's expansion names). A module's unit tests (`#[cfg(test)] mod
//! tests`, at the end of a file) may set themselves up through any layer.

use std::fs;
use std::path::{Path, PathBuf};

/// The layers of `src/`, from the ground up; `lib` is the crate root.
const LAYERS: &[&str] = &[
    "arch",
    "atomic",
    "report",
    "mem",
    "timer",
    "stack",
    "reactor",
    "scheduler",
    "observe",
    "fiber",
    "generator",
    "io",
    "channel",
    "sync",
    "signal",
    "blocking",
    "future",
    "runtime",
    "net",
    "hook",
    "process",
    "time",
    "fs",
    // Doc-only: the guides import nothing, and nothing imports them.
    "guide",
    "lib",
];

/// The layer a file of `src/` belongs to: its folder, or its own name.
fn layer_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    first.trim_end_matches(".rs").to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `name`s of the `crate::name` paths in one line of code.
fn crate_paths(code: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = &rest[..at];
        let after = &rest[at + "crate::".len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        // `$crate::` is a macro's public path; `xcrate::` is another name.
        let glued = before
            .chars()
            .last()
            .is_some_and(|c| c == '$' || c.is_ascii_alphanumeric() || c == '_');
        if !glued && end > 0 {
            names.push(&after[..end]);
        }
        rest = &after[end..];
    }
    names
}

/// The layer a `crate::name` path lands in: a module of the root, or the
/// root itself for what it re-exports (`crate::spawn`, `crate::Runtime`),
/// but for the macros a layer exports, which `#[macro_export]` puts at the
/// root (`crate::fiber_local!`, defined in `fiber/local.rs`; `select!`
/// and `select_biased!`, in `channel/select/macros.rs`).
fn layer_named(name: &str) -> &str {
    match name {
        "fiber_local" => "fiber",
        "select" | "select_biased" => "channel",
        name if LAYERS.contains(&name) => name,
        _ => "lib",
    }
}

/// Code lines of a file, without comments and without its unit tests.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut all = text.lines().enumerate().peekable();
    while let Some((n, line)) = all.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]"
            && all
                .peek()
                .is_some_and(|(_, next)| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = line.split("//").next().unwrap_or("");
        lines.push((n + 1, code));
    }
    lines
}

#[test]
fn no_layer_imports_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(
        files.len() > 50,
        "found only {} files under src/",
        files.len()
    );
    let rank = |layer: &str| {
        LAYERS
            .iter()
            .position(|l| *l == layer)
            .unwrap_or_else(|| panic!("src/{layer} is in no layer: add it to LAYERS"))
    };
    let mut upward = Vec::new();
    for file in &files {
        let layer = layer_of(&src, file);
        let text = fs::read_to_string(file).unwrap();
        for (line, code) in code_lines(&text) {
            for name in crate_paths(code) {
                let target = layer_named(name);
                if rank(target) > rank(&layer) {
                    upward.push(format!(
                        "{}:{line}: {layer} imports {target} (crate::{name})",
                        file.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up the layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    // The parser under the test above: an import in code counts, one in a
    // comment, a doc link or a macro's `$crate::` does not.
    assert_eq!(crate_paths("use crate::fiber::JoinHandle;"), ["fiber"]);
    assert_eq!(
        crate_paths("let a = crate::timer::clock::now_ns() + crate::spawn(f);"),
        ["timer", "spawn"]
    );
    assert_eq!(
        crate_paths("$crate::FiberLocal::__new(init)"),
        Vec::<&str>::new()
    );
    assert_eq!(layer_named("spawn"), "lib");
    assert_eq!(layer_named("fiber_local"), "fiber");
    let text = "//! see crate::runtime\nuse crate::sync::mpsc; // crate::fs\n#[cfg(test)]\nmod tests {\n    use crate::Runtime;\n}\n";
    let found: Vec<_> = code_lines(text)
        .into_iter()
        .flat_map(|(n, code)| crate_paths(code).into_iter().map(move |p| (n, p)))
        .collect();
    assert_eq!(found, [(2, "sync")]);
}
