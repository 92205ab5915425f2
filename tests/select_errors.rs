//! A `select!` arm given the wrong argument is told so at that argument:
//! a small crate with one wrong argument per arm kind is checked with
//! cargo, and each arm's first error must carry the line and column of
//! its argument (not of the whole macro) and say what the arm takes.
//! (`io`'s cannot: see `channel/select/arms.rs`; its error names the type.)

use std::path::Path;
use std::process::Command;

/// The crate's `main.rs`: each wrong argument's (line, column) noted.
const MAIN: &str = r#"use fibra::channel::unbounded;
fn main() {
    let (s, r) = unbounded::<u32>();
    let x = 5u32;
    let h = fibra::spawn(|| 1);
    fibra::select! {
        recv(x) -> m => { let _ = m; }
        send(r, 1) -> m => { let _ = m; }
        join(5) -> m => { let _ = m; }
        io(x, fibra::io::Interest::READABLE) -> m => { let _ = m; }
        recv(&r) -> m => { let _ = m; }
        send(&&s, 2) -> m => { let _ = m; }
        join(&h) -> m => { let _ = m; }
    }
}
"#;

#[test]
fn a_wrong_arm_argument_is_pointed_at() {
    let dir = std::env::temp_dir().join(format!("fibra-select-errors-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = env!("CARGO_MANIFEST_DIR");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"select-errors\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             [dependencies]\nfibra = {{ path = {manifest:?} }}\n[workspace]\n"
        ),
    )
    .unwrap();
    // fibra's own lock: the same versions, resolved offline.
    std::fs::copy(
        Path::new(manifest).join("Cargo.lock"),
        dir.join("Cargo.lock"),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--message-format", "short"])
        .current_dir(&dir)
        // Its own target: not the one the test runs from (its lock).
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "{stderr}");
    let expect = [
        (
            "src/main.rs:7:14",
            "a `recv` arm of `select!` cannot wait on `u32`",
        ),
        (
            "src/main.rs:8:14",
            "a `send` arm of `select!` cannot send on",
        ),
        (
            "src/main.rs:9:14",
            "a `join` arm of `select!` cannot wait for",
        ),
    ];
    for (at, says) in expect {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("{at}: error")) && l.contains(says)),
            "no error at {at} saying {says:?}:\n{stderr}"
        );
    }
    // The right arguments, by value or reference, are not blamed.
    for line in 11..=13 {
        assert!(
            !stderr.contains(&format!("src/main.rs:{line}:")),
            "line {line} is right:\n{stderr}"
        );
    }
}
