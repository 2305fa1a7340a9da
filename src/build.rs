//! Stamps the build with the git revision: `RMQ_GIT_REV` = `git rev-parse --short HEAD`, or
//! "unknown" when git or the repository is not there (a source tarball, a container without git).
//!
//! Cargo re-runs this script only when `.git/HEAD` or the ref it names changes, so a commit or a
//! checkout refreshes the stamp without rebuilding on every edit. Only files that exist are
//! watched: cargo treats a missing watched file as always changed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed=src/build.rs");

    let rev = match git_dir(&manifest_dir) {
        Some(git_dir) => {
            watch_head(&git_dir);
            short_head(&manifest_dir).unwrap_or_else(|| "unknown".to_string())
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=RMQ_GIT_REV={rev}");
}

/// `.git` is a directory in a plain clone and a `gitdir: <path>` file in a worktree.
fn git_dir(manifest_dir: &Path) -> Option<PathBuf> {
    let dot_git = manifest_dir.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let pointer = fs::read_to_string(&dot_git).ok()?;
    let target = pointer.trim().strip_prefix("gitdir:")?.trim();
    Some(manifest_dir.join(target))
}

fn watch_head(git_dir: &Path) {
    let head = git_dir.join("HEAD");
    watch(&head);
    let Ok(head_text) = fs::read_to_string(&head) else {
        return;
    };
    let Some(reference) = head_text.trim().strip_prefix("ref:").map(str::trim) else {
        return; // detached HEAD: the hash is in HEAD itself
    };
    // A worktree keeps HEAD in its own dir and branch refs in the common dir.
    let common_dir = fs::read_to_string(git_dir.join("commondir"))
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or_else(|_| git_dir.to_path_buf());
    watch(&git_dir.join(reference));
    watch(&common_dir.join(reference));
    // The ref may live only in packed-refs (after `git gc`).
    watch(&common_dir.join("packed-refs"));
}

fn watch(path: &Path) {
    if path.is_file() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn short_head(manifest_dir: &Path) -> Option<String> {
    let output = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(manifest_dir)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let rev = String::from_utf8(output.stdout).ok()?.trim().to_string();
    let looks_like_hash = !rev.is_empty() && rev.bytes().all(|b| b.is_ascii_hexdigit());
    looks_like_hash.then_some(rev)
}
