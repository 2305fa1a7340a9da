//! Stamps the build with `RMQ_GIT_REV` = `git rev-parse --short HEAD`, or "unknown" without
//! git or a repository. Cargo re-runs this only when `HEAD`, the branch it names or
//! `packed-refs` changes (where git says they are, in a worktree too), so a commit refreshes
//! the stamp. Only files that exist are watched: cargo treats a missing one as always changed.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/build.rs");
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in &watched {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            if Path::new(&path).is_file() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let rev = git(&["rev-parse", "--short", "HEAD"])
        .filter(|rev| rev.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=RMQ_GIT_REV={rev}");
}

/// What `git <args>` prints, trimmed, if anything.
fn git(args: &[&str]) -> Option<String> {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let output = Command::new("git")
        .args(args)
        .current_dir(manifest_dir)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !text.is_empty()).then_some(text)
}
