//! Which circe binary the bench measures: never a test build by accident.
//!
//! `cargo bench` compiles circe with the `test-break` feature (the crate's dev-dependency on
//! itself turns it on for every test and bench target) and leaves that build where `cargo
//! build --release` puts its own, `target/<triple>/release/circe`. That build is larger and
//! slower than a release build, so the bench never measures it: without `--circe PATH` it
//! builds a plain one itself (`cargo build --release`, into its own target dir,
//! `target/bench-plain`), and a binary named by `--circe` or `--against` that says
//! `(test build)` in its `--version` is refused (exit 2) with the commands that make a plain
//! one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `BIN --version` prints (`circe 0.2.0`), or why it cannot be run.
pub(crate) fn version_of(bin: &Path) -> Result<String, String> {
    let out = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").trim().to_string();
    if !out.status.success() || !text.starts_with("circe ") {
        return Err(format!(
            "{} is not a circe binary (`--version` printed {text:?}, exit {})",
            bin.display(),
            out.status.code().map_or_else(|| "by a signal".to_string(), |c| c.to_string())
        ));
    }
    Ok(text)
}

/// Where `cargo build --release` leaves circe, from the repository's root
/// (`target/<triple>/release/circe`): where `cargo bench` left its test build.
fn release_path() -> String {
    // `target/<triple>/<profile>/circe`: `release` for `cargo bench`, `debug` under
    // `--profile dev`; `cargo build --release` writes `release`.
    let bin = Path::new(env!("CARGO_BIN_EXE_circe"));
    let profiles = bin.parent().and_then(Path::parent).unwrap_or(Path::new("target"));
    let release = profiles.join("release").join("circe");
    release.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&release).display().to_string()
}

/// Refuses (exit 2) a binary given as `option` that cannot be run or is a test build.
pub(crate) fn refuse_test_build(bin: &Path, option: &str) -> String {
    let version = version_of(bin).unwrap_or_else(|e| {
        eprintln!("compare: {option}: {e}");
        std::process::exit(2);
    });
    if version.ends_with("(test build)") {
        let copy = if option == "--against" { "/tmp/circe-old" } else { "/tmp/circe-plain" };
        let build = if option == "--against" { "in a worktree of the old commit, " } else { "" };
        eprintln!(
            "compare: {option} {}: a test build (`--version` says \"{version}\"): it has the \
             test-break feature that `cargo test` and `cargo bench` compile in, and is slower \
             and larger than a release build, so its times say nothing about a release\n\
             hint: {build}`cargo build --release && cp {} {copy}`, then `{option} {copy}` \
             (the copy: the next `cargo bench` overwrites that path with a test build again)",
            bin.display(),
            release_path(),
        );
        std::process::exit(2);
    }
    version
}

/// Builds circe as `cargo build --release` does, without the `test-break` feature, into a
/// target dir of its own (`target/bench-plain`: not the one `cargo bench` is using), and
/// returns the binary's path. The first run takes a release build's time (minutes, for the
/// link-time optimisation); later runs only what changed.
pub(crate) fn build_plain() -> PathBuf {
    // The cargo that runs the bench (`CARGO`), else the one on PATH (run by hand: rustup's
    // proxy then picks this repository's toolchain, as `cargo bench` did).
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = target_dir(&cargo).join("bench-plain");
    eprintln!(
        "compare: building a plain release circe (`cargo build --release`: the build `cargo \
         bench` made has the test-break feature) into {} ...",
        target.display()
    );
    let out = Command::new(cargo)
        .args(["build", "--release", "--bin", "circe", "--message-format=json-render-diagnostics"])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| {
            eprintln!("compare: cannot run cargo: {e}\nhint: pass a release build: --circe PATH");
            std::process::exit(1);
        });
    let executable = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"]["name"] == "circe")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from));
    match executable {
        Some(bin) if out.status.success() => bin,
        _ => {
            eprintln!(
                "compare: `cargo build --release` into {} failed (its output is above)\n\
                 hint: build one yourself and pass it: `cargo build --release && cp {} \
                 /tmp/circe-plain`, then `--circe /tmp/circe-plain`",
                target.display(),
                release_path(),
            );
            std::process::exit(1);
        }
    }
}

/// The repository's target dir (`target`, or where `CARGO_TARGET_DIR` puts it), as cargo
/// says.
fn target_dir(cargo: &std::ffi::OsStr) -> PathBuf {
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    let meta: Option<serde_json::Value> =
        out.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok());
    meta.and_then(|m| m["target_directory"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// The `--version` of the binary the bench built; it must not be a test build.
pub(crate) fn plain_version(bin: &Path) -> String {
    let version = version_of(bin).unwrap_or_else(|e| {
        eprintln!("compare: the plain build: {e}");
        std::process::exit(1);
    });
    assert!(!version.ends_with("(test build)"), "{} is a test build: {version}", bin.display());
    version
}
