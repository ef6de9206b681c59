//! Links ringswitchd with `link/ringswitchd-hot.ld`, which puts the code a
//! daemon with ring ports runs first (scripts/hot-text.sh writes it), and
//! `link/ringswitchd.ld`, which puts the code of
//! features an idle daemon does not run (OpenFlow, VM ports, interfaces,
//! passthrough, panic backtraces) after the rest of its code, so that the
//! 64 KiB windows the kernel maps around the code it does run hold little
//! else: its resident memory stays within the daemon's budget (the file
//! says what was measured). Only ringswitchd: `ringswitch` and the tests
//! link as before.

fn main() {
    println!("cargo:rerun-if-changed=link/ringswitchd.ld");
    println!("cargo:rerun-if-changed=link/ringswitchd-hot.ld");
    // ELF targets only: the script is for the GNU linker or LLD.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    // `-T` reaches the linker through the C compiler driver as it is
    // (no `-Wl,`, which would split a path at its commas).
    println!("cargo:rustc-link-arg-bin=ringswitchd=-T{dir}/link/ringswitchd.ld");
    println!("cargo:rustc-link-arg-bin=ringswitchd=-T{dir}/link/ringswitchd-hot.ld");
}
