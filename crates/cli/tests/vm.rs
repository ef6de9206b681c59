//! VM tests: real Linux guests (QEMU under TCG, a busybox initramfs, the
//! Debian cloud kernel's virtio-net driver) on vhost-user ports of a real
//! `ringswitch serve`. Each test runs one scenario of `tests/vm/run.sh`
//! (common/vm.rs says how). They need qemu-system-x86,
//! linux-image-cloud-amd64, busybox-static, cpio, jq and procps, and
//! libvirt-daemon-system and libvirt-clients for the libvirt ones
//! (`scripts/setup.sh` installs them). `RINGSWITCH_SKIP_VM=1` skips them
//! (saying so), for machines without QEMU.

mod common;

use common::vm::scenario;

/// Two guests ping each other through vale0.
#[test]
fn vm_ping() {
    scenario("ping");
}

/// 4 MiB over TCP between two guests, sha256 compared; checksum and TSO
/// offloads on, so the guests send partial-checksum and TSO frames.
#[test]
fn vm_tcp() {
    scenario("tcp");
}

/// The same transfer on ports created with --no-offloads.
#[test]
fn vm_tcp_nooffload() {
    scenario("tcp-nooffload");
}

/// A's port with offloads, B's without: TCP both ways at once; the switch
/// segments and checksums A's TSO frames for B.
#[test]
fn vm_tcp_mixed() {
    scenario("tcp-mixed");
}

/// A guest and `pkt-gen` on a ring port exchange frames both ways, exact
/// counts and no drops.
#[test]
fn vm_pktgen() {
    scenario("pktgen");
}

/// Ports in --client mode: QEMU listens, ringswitch connects.
#[test]
fn vm_client_mode() {
    scenario("client-mode");
}

/// The daemon killed (SIGTERM, then SIGKILL) and restarted under running
/// guests; QEMU reconnects (reconnect=1) and the guests ping again.
#[test]
fn vm_daemon_restart_server() {
    scenario("daemon-restart-server");
}

/// The same with --client ports: the new daemon connects to the waiting
/// QEMUs.
#[test]
fn vm_daemon_restart_client() {
    scenario("daemon-restart-client");
}

/// `ctl upgrade` under two running guests (B pinging A every 10 ms) and a
/// pkt-gen pair on a pipe: the daemon keeps its pid and restores its
/// --config, QEMU reconnects to the server-mode ports, the guests are never
/// restarted, every pipe frame arrives; pings lost reported.
#[test]
fn vm_daemon_upgrade_server() {
    scenario("daemon-upgrade-server");
}

/// The same with --client ports: the new daemon connects to the waiting
/// QEMUs at once.
#[test]
fn vm_daemon_upgrade_client() {
    scenario("daemon-upgrade-client");
}

/// Three guests; B's QEMU killed and started again while A and C keep
/// pinging; then A and B ping again.
#[test]
fn vm_guest_restart() {
    scenario("guest-restart");
}

/// B reboots inside its running QEMU: the device is reset and set up again
/// over the same vhost-user connection; A and B ping again afterwards.
#[test]
fn vm_guest_reboot() {
    scenario("guest-reboot");
}

/// Two queue pairs, two vCPUs per guest: ping and two TCP streams at once,
/// one from each vCPU.
#[test]
fn vm_multiqueue() {
    scenario("multiqueue");
}

/// Guest A and the world outside the switch: a namespace behind a veth
/// pair attached over AF_XDP, and the host stack through a TAP host port
/// (checksum and TSO offloads passing between the host stack and the
/// guest); ping and TCP with matching sha256 both ways with each. Needs
/// root for the namespaces.
#[test]
fn vm_outside_world_over_af_xdp_and_a_host_port() {
    scenario("outside");
}

/// Guest A moves to a second QEMU (`-incoming`) on its own port while B
/// pings it every 10 ms and sends it 16 MiB over TCP: the source's rings
/// stop cleanly, the destination resumes where they stopped, the guest
/// announces itself (VIRTIO_NET_F_GUEST_ANNOUNCE) and the switch finds it
/// on the new port; the transfer ends with matching sha256; pings lost and
/// downtime are printed (RESULT line).
#[test]
fn vm_migrate() {
    scenario("migrate");
}

/// The same with a guest that does not announce itself: QEMU asks the
/// switch (VHOST_USER_SEND_RARP) and the new port sends a RARP for it.
#[test]
fn vm_migrate_without_guest_announce() {
    scenario("migrate-noannounce");
}

/// libvirt (docs/libvirt.md): a TCG domain started by libvirtd and `virsh`
/// on an `<interface type='vhostuser'>` with mode='client' (ringswitch
/// listens, QEMU reconnects) pings `pkt-gen -f pong` on a switch port;
/// again after `virsh destroy` and `virsh start`, after a restart of the
/// daemon on the same --config and after `ctl upgrade` (the guest
/// reconnects, never restarted). libvirtd is started if it is not running.
#[test]
fn vm_libvirt() {
    scenario("libvirt");
}

/// The same with mode='server': QEMU listens, ringswitch connects.
#[test]
fn vm_libvirt_server() {
    scenario("libvirt-server");
}
