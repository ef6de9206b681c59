//! Links libxdp and libbpf (Debian's `libxdp-dev` and `libbpf-dev`) for the
//! AF_XDP plumbing in `src/xdp`. The few functions used are declared there by
//! hand (`src/xdp/ffi.rs`), so no headers are read at build time.
//!
//! `LIBXDP_LIB_DIR` adds a library search directory, for a libxdp that is
//! not in the linker's default path.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBXDP_LIB_DIR");
    if let Ok(dir) = std::env::var("LIBXDP_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
    }
    println!("cargo:rustc-link-lib=dylib=xdp");
    println!("cargo:rustc-link-lib=dylib=bpf");
}
