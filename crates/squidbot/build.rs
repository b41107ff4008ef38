//! Release builds of the binary put the functions the gateway runs from start to idle
//! next to each other (`ld.gold --section-ordering-file hot-functions.txt`). The kernel
//! maps code in 64 KiB windows around each page touched, so when the start-up code is
//! scattered through the binary nearly all of it ends up resident; packed together it
//! takes a few windows. `scripts/hot-functions` rewrites the list from a run under
//! callgrind. Where `ld.gold` is missing (or `SQUIDBOT_NO_HOT_ORDER` is set) the binary is
//! linked as usual, with a warning: only its idle memory differs.

use std::path::Path;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo::rerun-if-changed=hot-functions.txt");
    println!("cargo::rerun-if-env-changed=SQUIDBOT_NO_HOT_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if !release || !linux || std::env::var_os("SQUIDBOT_NO_HOT_ORDER").is_some() {
        return;
    }
    let gold = Command::new("ld.gold")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !gold {
        println!("cargo::warning=ld.gold not found: linking without hot-function ordering (idle memory is higher)");
        return;
    }
    let Some(directory) = std::env::var_os("CARGO_MANIFEST_DIR") else { return };
    let list = Path::new(&directory).join("hot-functions.txt");
    if !list.is_file() {
        return;
    }
    println!("cargo::rustc-link-arg-bins=-fuse-ld=gold");
    println!("cargo::rustc-link-arg-bins=-Wl,--section-ordering-file={}", list.display());
}
