//! Release builds of the binary put the functions the gateway runs from start to idle
//! next to each other. The kernel maps code in 64 KiB windows around each page touched, so
//! when the start-up code is scattered through the binary nearly all of it ends up
//! resident; packed together it takes a few windows. `hot-functions.txt` lists their
//! sections as patterns (`scripts/hot-functions` rewrites it from a run under callgrind);
//! this script turns the list into a linker-script fragment that gathers them into one
//! output section placed before `.text` (`INSERT BEFORE .text`, which the toolchain's
//! default `rust-lld` and GNU ld both read). `SQUIDBOT_NO_HOT_ORDER` links without it:
//! only the idle memory differs.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-changed=hot-functions.txt");
    println!("cargo::rerun-if-env-changed=SQUIDBOT_NO_HOT_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if !release || !linux || std::env::var_os("SQUIDBOT_NO_HOT_ORDER").is_some() {
        return;
    }
    let (Some(manifest), Some(out)) = (std::env::var_os("CARGO_MANIFEST_DIR"), std::env::var_os("OUT_DIR")) else {
        return;
    };
    let Ok(list) = std::fs::read_to_string(Path::new(&manifest).join("hot-functions.txt")) else { return };
    let script = PathBuf::from(out).join("hot-functions.ld");
    if std::fs::write(&script, linker_script(&list)).is_err() {
        println!("cargo::warning=can't write {}: linking without the hot-function order", script.display());
        return;
    }
    println!("cargo::rustc-link-arg-bins=-Wl,-T,{}", script.display());
}

/// The fragment gathering the listed sections, in the list's order, into `.text.hot`.
/// Lines that are not a plain section pattern (callgrind's `(below main)`, addresses with
/// no symbol) are left out; a `'N` recursion suffix is dropped.
fn linker_script(list: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut script = String::from("SECTIONS\n{\n  .text.hot :\n  {\n");
    for line in list.lines() {
        let pattern = line.trim().split('\'').next().unwrap_or_default();
        let plain = pattern.strip_prefix(".text.").is_some_and(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.$*".contains(c))
        });
        let address = pattern.starts_with(".text.0x");
        if plain && !address && seen.insert(pattern) {
            script.push_str("    *(");
            script.push_str(pattern);
            script.push_str(")\n");
        }
    }
    script.push_str("  }\n}\nINSERT BEFORE .text;\n");
    script
}
