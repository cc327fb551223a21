//! Builds the default policy plugins from `../plugins` for `wasm32-wasip2`,
//! so that they ship inside the `eagle` binary.
//!
//! The guest crates are a workspace of their own; this script runs cargo on
//! it with a target directory shared by every build of the host (debug,
//! release, clippy), so they compile once. The tests build their plugin
//! fixtures into the same directory (`BUILT_PLUGINS_TARGET_DIR`, deliberately not an `EAGLE_` name: `cargo run` passes it to the binary, which refuses unknown `EAGLE_` variables).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugins compiled into the binary: (package, file stem).
const BUILTINS: &[(&str, &str)] = &[
    ("default-approval", "default_approval"),
    ("default-filter", "default_filter"),
];

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir
        .parent()
        .expect("bot/ has a parent")
        .to_path_buf();
    let plugins = root.join("plugins");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it"));

    for watched in [
        "wit",
        "plugins/Cargo.toml",
        "plugins/Cargo.lock",
        "plugins/sdk",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    for (package, _) in BUILTINS {
        println!("cargo:rerun-if-changed={}", plugins.join(package).display());
    }

    require_target();

    // OUT_DIR is <target>/<profile>/build/eagle-<hash>/out: share <target>.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.clone())
        .join("eagle-plugins");
    println!(
        "cargo:rustc-env=BUILT_PLUGINS_TARGET_DIR={}",
        target_dir.display()
    );

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--locked", "--target", TARGET])
        .arg("--manifest-path")
        .arg(plugins.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for (package, _) in BUILTINS {
        command.args(["--package", package]);
    }
    // The host's flags and wrappers (clippy's driver, say) are not for the guests.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
    ] {
        command.env_remove(var);
    }
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the default plugins: {e}"));
    if !status.success() {
        panic!(
            "building the default plugins in {} failed (see the cargo output above)",
            plugins.display()
        );
    }
    for (package, stem) in BUILTINS {
        let built = target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{stem}.wasm"));
        let shipped = out_dir.join(format!("{package}.wasm"));
        std::fs::copy(&built, &shipped).unwrap_or_else(|e| {
            panic!(
                "cannot copy {} to {}: {e}",
                built.display(),
                shipped.display()
            )
        });
    }
}

/// Fails with the one command that fixes it when the target is missing.
fn require_target() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot.is_some_and(|root| root.join("lib/rustlib").join(TARGET).is_dir());
    if !installed {
        panic!(
            "\n\nThe {TARGET} Rust target is missing; Eagle's default policy plugins are built for it.\n\
             Install it with:\n\n    rustup target add {TARGET}\n\nthen build again.\n\n"
        );
    }
}
