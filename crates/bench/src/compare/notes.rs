//! How each section was measured, for `notes.tsv`: the text is kept here,
//! every number in it (durations, counts, CPUs, runs) comes from the
//! parameters file and the run's set-up, so a note cannot disagree with
//! what was measured.

use crate::error::Error;
use crate::params::Params;
use crate::run::Section;

/// What the notes' numbers come from.
pub struct NoteFacts<'a> {
    /// The parameters of the run's mode.
    pub params: &'a Params,
    /// Runs per path.
    pub runs: u32,
    /// The receivers' CPU.
    pub rx_cpu: u32,
    /// The senders' CPU.
    pub tx_cpu: u32,
    /// Whether the run also measured the variants of the targets profile.
    pub variants: bool,
}

/// The notes written after `section`, as `(note section, markdown)`; the
/// nic, flows and defaults sections write their own (nic names the
/// generator it picked, defaults the guest halt polling it found).
pub fn notes(section: Section, f: &NoteFacts<'_>) -> Result<Vec<(&'static str, String)>, Error> {
    let p = f.params;
    let (rx, tx, runs) = (f.rx_cpu, f.tx_cpu, f.runs);
    let mut notes = Vec::new();
    match section {
        Section::Throughput => {
            let (secs, burst, memif_s) = (p.one("secs")?, p.one("burst")?, p.one("memif_secs")?);
            notes.push(("throughput", format!(
                "ringswitch: `pkt-gen -f tx -l LEN -b {burst}` on CPU {tx} into `bp{{N`, `pkt-gen -f rx -b {burst}` on CPU {rx} on `bp}}N`, the default wait (adaptive spin, then sleep), {secs} s per run; the receiver's rate. DPDK memif: `bench/peers/memif.sh --runs {runs} --seconds {memif_s} --size SIZE` (testpmd txonly, memif client, on CPU {tx} → testpmd rxonly, memif server, on CPU {rx}, both busy-polling, copy mode); its 60 B case sends 64-byte frames (testpmd's `--txpkts=64`; netmap's 60 B leaves out the CRC)."
            )));
            if f.variants {
                notes.push(("throughput", format!(
                    "Also the pipe at 60 B busy-waiting (`--busy` on both pkt-gens, `-b {burst}`) and with 4096 slots and batch 2048 (`bp}}N@conf:slots=4096`, `-b 2048` on both, the default wait), {secs} s per run, the same placement."
                )));
            }
            notes.push(("efficiency", "CPU, all processes: user + system time of every process on the path (ringswitch: both pkt-gens, from their `cpu_seconds`; DPDK memif: both testpmd, from /proc/PID/stat over the measured window) divided by the packets received, in CPU seconds per million packets. CPU, switch process: the same for the ringswitch daemon (/proc/PID/stat over the whole run) or ovs-vswitchd (bench/peers/ovs-dpdk.sh: CPU ns per delivered packet).".to_owned()));
        }
        Section::Switch => {
            let (secs, ovs_s) = (p.one("secs")?, p.one("ovs_secs")?);
            notes.push(("switch", format!(
                "ringswitch: two on-demand ring ports of one switch (`valecmpLEN:a` → `:b`), `serve --workers 1 --worker-cpus {tx}`, both pkt-gens (tx and rx, `-b {burst}`, the default wait) on CPU {rx}, {secs} s per run; the receiver's rate. OVS-DPDK: `bench/peers/ovs-dpdk.sh --ports memif`: Open vSwitch's userspace datapath, one PMD thread on CPU {tx}, two memif ports, port-to-port flows, testpmd txonly and rxonly (memif clients) both on CPU {rx}, {ovs_s} s per run. The Linux bridge figure is the nic section's: testpmd txonly on a veth, the bridge, a second veth, testpmd rxonly with net_af_packet (64-byte frames). Same placement for both switches, and on two CPUs no fairer one exists for OVS: its PMD and both testpmd busy-poll, so the two testpmd on CPU {rx} take turns in scheduler slices (milliseconds) and memif's rings overflow in between (`ovs-dpdk.sh --ports memif` with the PMD sharing the sender's CPU instead does no better, see bench/peers/README.md); ringswitch's pkt-gens sleep when they wait (after an adaptive spin that gives way to another runnable thread), so they share a CPU without that cost.",
                burst = p.one("burst")?
            )));
            if f.variants {
                notes.push(("switch", "Sent is the sender pkt-gen's rate; dropped is `drop_rx_full` of the receiving port from `ctl stats --json`, read after the sender stopped while the receiver still holds its port, also as a share of the packets the sender reports sent.".to_owned()));
            }
        }
        Section::Vm => {
            let (vm_s, idle_s) = (p.one("vm_secs")?, p.one("idle_secs")?);
            notes.push(("vm", format!(
                "Two DPDK testpmd processes with a virtio_user port each stand in for fast VMs (testpmd owns each socket, `server=1`; `--no-huge`, one queue pair): txonly (64-byte frames) → the switch → rxonly, {vm_s} s windows. ringswitch: `ctl port add valevm:vmN --vhost-user PATH --client`, `serve --workers 1 --worker-cpus W`; OVS-DPDK: `bench/peers/ovs-dpdk.sh` (dpdkvhostuserclient ports, one PMD on the same CPU W, port-to-port flows), with and without `other_config:pmd-maxsleep=500`. Receiver on CPU {rx}, sender on CPU {tx}."
            )));
            notes.push(("idle", format!(
                "Idle: ringswitch's daemon with 8 pkt-gen rx (the default wait) on `vale0:i1..i8`, no traffic; and with two testpmd virtio_user clients connected but not forwarding, beside ovs-vswitchd with the same two clients (ovs-dpdk.sh's idle windows: default, pmd-maxsleep=50 and =500). CPU from /proc/PID/stat (all threads) over {idle_s} s, as % of one core."
            )));
        }
        Section::Passthrough => {
            let pt_s = p.one("pt_secs")?;
            notes.push(("passthrough", format!(
                "`bench/passthrough.sh --secs {pt_s} --reps {runs}`: one QEMU TCG guest runs `ringswitch pkt-gen -f tx` (60 B) for {pt_s} s over a passthrough port (its rings mapped through ivshmem, guest/ringswitch_pt) and then over its virtio-net NIC (a vhost-user port of the host's switch, reached through a ringswitch inside the guest with eth0 attached by AF_PACKET), alternately, {runs} times; the host counts the frames reaching `pkt-gen -f rx` on vale0:h. TCG emulates the guest's CPU: only the ratio carries over to KVM."
            )));
        }
        Section::Nic | Section::Flows | Section::Defaults => {}
        Section::Latency => {
            let n = p.one("ping_n")?;
            notes.push(("latency", format!(
                "ringswitch: `pkt-gen -f ping -n {n}` (CPU {tx}) ↔ `pkt-gen -f pong` (CPU {rx}), burst 1, through a pipe and through vale0; busy-waiting is `--busy` on both (through the switch the worker still sleeps between batches: three spinning threads do not fit two cores); blocking through the switch runs the daemon with `--idle-poll-us 50`. The Linux bridge: the kernel's ICMP echo, `ping -f -c {n}` (iputils, one echo in flight) between two network namespaces over veth → bridge → veth; its min and avg (ping prints no percentiles)."
            )));
        }
        Section::Idle => {
            notes.push(("memory", "`VmRSS − RssShmem` of the daemon (rings and buffers live in memfds, which count as shmem) with the idle section's 8 ports open, then with 56 persistent ports `vale0:p9..p64@conf:slots=64` added (64 in all); per port = the difference / 56.".to_owned()));
        }
        Section::Batch => {
            let s = p.one("batch_secs")?;
            notes.push(("batch", format!(
                "Batch size: pkt-gen `-b N` on both ends (the pipe: sender on CPU {tx}, receiver on CPU {rx}); the switch also runs `serve --batch N` (worker on CPU {tx}, both pkt-gens on CPU {rx}); DPDK memif: testpmd `--burst=N` on both ends (its maximum is 512). One {s} s run per point."
            )));
        }
        Section::Load => {
            let s = p.one("load_secs")?;
            let loads = p.list("loads")?;
            let (lo, hi) = (
                loads.first().copied().unwrap_or(1),
                loads.last().copied().unwrap_or(100),
            );
            let burst = p.one("burst")?;
            notes.push(("load", format!(
                "Offered load: `pkt-gen -f tx -R RATE` at {lo}..{hi} % of the path's median received rate from the throughput runs (100 %: no limit), 60 B, {s} s per point, receivers in the default wait. CPU is user + system time (/proc/PID/stat) over a {s} s window that starts 1 s into the traffic, as % of one core: the daemon's, the daemon's plus the receiver's (switch), the receiver's and both pkt-gens' (pipe: the zero-copy swap runs in the sender's sync). pkt-gen `-R` sends whole bursts ({burst}) at paced times, or a millisecond's worth of packets at slower rates, as netmap's pkt-gen does. Peers, from this run's other sections: ovs-vswitchd idle (the vm section's idle window) and saturated (the switch section's memif runs); DPDK memif's two testpmd saturated (the throughput runs). A busy-polling peer costs the same at every load in between."
            )));
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Mode;
    use std::path::Path;

    fn facts(params: &Params, variants: bool) -> NoteFacts<'_> {
        NoteFacts {
            params,
            runs: 7,
            rx_cpu: 0,
            tx_cpu: 1,
            variants,
        }
    }

    const PARAMS: &str = "runs\t1\t3\nsecs\t11\t3\nburst\t256\t512\nmemif_secs\t12\t3\novs_secs\t13\t3\nvm_secs\t14\t3\nidle_secs\t15\t10\npt_secs\t16\t3\nping_n\t1717\t20000\nbatch_secs\t18\t2\nload_secs\t19\t3\nloads\t2,10,90\t1,100\n";

    fn all(p: &Params, variants: bool) -> Vec<(&'static str, String)> {
        let sections = crate::run::sections::NAMES.map(|n| n.parse::<Section>().unwrap());
        let f = facts(p, variants);
        sections
            .iter()
            .flat_map(|&s| notes(s, &f).unwrap())
            .collect()
    }

    #[test]
    fn numbers_come_from_the_parameters() {
        let p = Params::parse(Path::new("p.tsv"), PARAMS, Mode::Quick).unwrap();
        let n = all(&p, false);
        let text = |s: &str| {
            n.iter()
                .filter(|(k, _)| *k == s)
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(
            text("throughput").contains("-b 256` on CPU 1"),
            "{}",
            text("throughput")
        );
        assert!(text("throughput").contains(", 11 s per run"));
        assert!(text("throughput").contains("--runs 7 --seconds 12"));
        assert!(text("switch").contains("13 s per run"));
        assert!(text("switch").contains("--worker-cpus 1"));
        assert!(text("vm").contains("14 s windows"));
        assert!(text("idle").contains("over 15 s"));
        assert!(text("passthrough").contains("--secs 16 --reps 7"));
        assert!(text("latency").contains("-n 1717") && text("latency").contains("-c 1717"));
        assert!(text("batch").contains("One 18 s run per point"));
        assert!(text("load").contains("at 2..90 %") && text("load").contains("19 s per point"));
        assert!(text("load").contains("whole bursts (256)"));
        assert!(!text("memory").is_empty() && !text("efficiency").is_empty());
        // The nic section writes its own note.
        assert!(text("nic").is_empty());
        // Without the variants, no word of them.
        assert!(!text("throughput").contains("4096 slots"));
        assert!(!text("switch").contains("drop_rx_full"));
        let v = all(&p, true);
        assert!(v
            .iter()
            .any(|(k, t)| *k == "throughput" && t.contains("4096 slots")));
        assert!(v
            .iter()
            .any(|(k, t)| *k == "switch" && t.contains("drop_rx_full")));
    }

    #[test]
    fn a_missing_parameter_is_an_error() {
        let p = Params::parse(Path::new("p.tsv"), "runs\t1\t3\n", Mode::Quick).unwrap();
        let e = notes(Section::Batch, &facts(&p, false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no parameter `batch_secs`"), "{e}");
        assert!(notes(Section::Nic, &facts(&p, false)).unwrap().is_empty());
    }
}
