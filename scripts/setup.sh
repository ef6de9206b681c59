#!/usr/bin/env bash
# Installs what building ringswitch needs on a fresh Debian 12 machine, and
# what its tests need unless RINGSWITCH_SETUP=build (scripts/demo.sh: the
# demo needs only the build). Idempotent and quiet when everything is
# already there.
set -euo pipefail
setup_tests=1
[ "${RINGSWITCH_SETUP:-}" = build ] && setup_tests=0

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# NIC ports (crates/netdev): AF_XDP through libxdp and libbpf, linked at
# build time; the NIC and host-port tests use ip (iproute2), setpriv
# (util-linux), ethtool and busybox's ping, nc and sha256sum.
dpkg -s libxdp-dev >/dev/null 2>&1 || need_apt+=(libxdp-dev)
dpkg -s libbpf-dev >/dev/null 2>&1 || need_apt+=(libbpf-dev)
if [ "$setup_tests" = 1 ]; then
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
# The systemd unit's test (crates/cli/tests/systemd.rs): systemd-analyze verify.
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
# The VM tests (crates/cli/tests/vm.rs, tests/vm/): QEMU under TCG, a guest
# kernel with its virtio modules, busybox for the guest's userland, cpio to
# pack the initramfs, jq to read `ctl --json`, pgrep to find the daemon.
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
compgen -G '/boot/vmlinuz-*-cloud-amd64' >/dev/null || need_apt+=(linux-image-cloud-amd64)
dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)
command -v cpio >/dev/null 2>&1 || need_apt+=(cpio)
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
command -v pgrep >/dev/null 2>&1 || need_apt+=(procps)
# The libvirt VM tests (tests/vm/libvirt.sh, docs/libvirt.md): libvirtd and
# virtlogd (libvirt-daemon, with its QEMU driver, and the system setup:
# /etc/libvirt, the libvirt-qemu user QEMU runs as), virsh to drive them.
dpkg -s libvirt-daemon-system >/dev/null 2>&1 || need_apt+=(libvirt-daemon-system)
command -v virsh >/dev/null 2>&1 || need_apt+=(libvirt-clients)
# The testpmd tests (crates/cli/tests/testpmd.rs): DPDK's testpmd with a
# virtio_user port as a VM's driver; Debian 12 ships dpdk-testpmd in dpdk-dev.
command -v dpdk-testpmd >/dev/null 2>&1 || need_apt+=(dpdk-dev)
# The passthrough tests (tests/pt/): python3 for the test ivshmem server;
# the guest driver is built against the cloud kernel's own headers (added
# below, once the kernel's version is known).
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# The OpenFlow tests (crates/cli/tests/openflow.rs, osken.rs): ovs-ofctl
# programs the switch; os-ken (an OpenFlow controller library) drives it.
command -v ovs-ofctl >/dev/null 2>&1 || need_apt+=(openvswitch-common)
dpkg -s python3-os-ken >/dev/null 2>&1 || need_apt+=(python3-os-ken)
# The metrics tests (crates/cli/tests/metrics.rs) and bench/webview.sh:
# Prometheus's server scrapes `serve --metrics`, promtool checks its text,
# headless Chromium loads the web view.
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# `ringswitch top`'s test (crates/cli/tests/top.rs) runs it in a tmux pane.
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

kernel=$(find /boot -maxdepth 1 -name 'vmlinuz-*-cloud-amd64' 2>/dev/null | sort -V | tail -n 1)
if [ "$setup_tests" = 1 ] && [ -n "$kernel" ] && ! dpkg -s "linux-headers-${kernel#/boot/vmlinuz-}" >/dev/null 2>&1; then
    echo "setup: installing linux-headers-${kernel#/boot/vmlinuz-}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "linux-headers-${kernel#/boot/vmlinuz-}" >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "linux-headers-${kernel#/boot/vmlinuz-}" >/dev/null; }
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: no Rust toolchain found: install a stable Rust (1.87 or newer) with rustup, then run this again" >&2
        exit 1
    fi
fi
for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$c" >/dev/null 2>&1 || true
    fi
done
