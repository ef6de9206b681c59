//! include/ringswitch.h is generated from the Rust source by cbindgen and
//! checked in: this test regenerates it and fails if it changed, so CI
//! catches a C API change without its header. `RINGSWITCH_BLESS_HEADER=1
//! cargo test -p ringswitch-capi --test header` rewrites it.

use std::path::Path;

#[test]
fn header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = crate_dir.join("../../include/ringswitch.h");
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    let fresh = String::from_utf8(out).unwrap();
    if std::env::var_os("RINGSWITCH_BLESS_HEADER").is_some() {
        std::fs::write(&header, &fresh).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&header).unwrap_or_default();
    assert!(
        current == fresh,
        "include/ringswitch.h is out of date with crates/capi/src/lib.rs: run `RINGSWITCH_BLESS_HEADER=1 cargo test -p ringswitch-capi --test header` and commit the header"
    );
}
