//! A real controller stack drives the switch: os-ken (Debian's
//! python3-os-ken, an OpenFlow implementation no one here wrote) runs our
//! learning-switch application, `tests/osken/simple_switch.py`, and a
//! daemon's vale0 connects to it with `ctl switch add vale0 --controller
//! tcp:127.0.0.1:PORT`. Two TCG guests on vhost-user ports of vale0 then:
//!
//! - ping each other (the first frames reach the controller through its
//!   table-miss flow; it learns both MACs and installs a flow each way);
//! - move 512 KiB over TCP, the sha256 the same on both sides;
//! - and `ctl flows vale0` shows the controller's flows: the table-miss
//!   flow to CONTROLLER with frames counted, and the learned flows
//!   (in_port, dl_src, dl_dst -> output to the other guest's port), whose
//!   counters grow with the transfer (A's flow by at least its 512 KiB).
//!
//! The scenario is `osken` in `tests/vm/run.sh` (the guest harness the VM
//! tests share; it starts osken-manager, the daemon and QEMU under
//! timeout(1) and stops them all when it ends, however it ends). It needs
//! what vm.rs needs, plus osken-manager (`scripts/setup.sh` installs
//! python3-os-ken): without it the test fails rather than skips.
//! `RINGSWITCH_SKIP_VM=1` skips it, as it does the other VM scenarios.

mod common;

use common::vm::scenario;

#[test]
fn os_ken_learning_switch_carries_ping_and_tcp_between_two_guests() {
    assert!(
        common::repo()
            .join("crates/cli/tests/osken/simple_switch.py")
            .is_file(),
        "the os-ken application is missing"
    );
    scenario("osken");
}
