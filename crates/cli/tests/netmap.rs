//! netmap programs on ringswitch: C programs written against netmap's API
//! (crates/netmap-compat/tests/c), built against include/netmap and run
//! linked with libringswitch_netmap or, as plain binaries, under
//! LD_PRELOAD, exchanging traffic with `ringswitch pkt-gen`.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use common::*;

/// Where cargo put libringswitch_netmap.so (a dev-dependency of this crate).
fn lib_dir() -> PathBuf {
    common::lib_dir(&["libringswitch_netmap.so"])
}

fn preload() -> PathBuf {
    lib_dir().join("libringswitch_netmap.so")
}

struct Programs {
    dir: PathBuf,
}

impl Programs {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Builds the C programs once: `*_linked` against the library, `*_plain`
/// with no link to it at all.
fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rs-netmap-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = repo().join("crates/netmap-compat/tests/c");
        let inc = repo().join("include/netmap");
        let lib = lib_dir();
        let build = |out: &str, file: &str, linked: bool, defs: &[&str]| {
            let mut c = Command::new("cc");
            c.args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(dir.join(out))
                .arg("-I")
                .arg(&inc)
                .args(defs)
                .arg(src.join(file));
            if linked {
                c.arg("-L")
                    .arg(&lib)
                    .arg("-lringswitch_netmap")
                    .arg(format!("-Wl,-rpath,{}", lib.display()));
            }
            let o = c.output().expect("cc runs (install gcc)");
            assert!(
                o.status.success(),
                "building {file} failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        build("nm_raw_linked", "nm_raw.c", true, &[]);
        build("nm_raw_plain", "nm_raw.c", false, &[]);
        build("nm_port", "nm_port.c", true, &[]);
        build("nm_lb", "nm_lb.c", true, &[]);
        build("nm_legacy", "nm_legacy.c", true, &[]);
        build("nm_misuse_linked", "nm_misuse.c", true, &["-DWITH_NMPORT"]);
        build("nm_misuse_plain", "nm_misuse.c", false, &[]);
        build("nm_compat", "nm_compat.c", false, &[]);
        Programs { dir }
    })
}

impl Daemon {
    /// A C program on this daemon; `preload` runs it under LD_PRELOAD.
    fn c(&self, prog: &str, preload_lib: bool, args: &[&str]) -> Command {
        let mut c = Command::new(programs().path(prog));
        c.args(args)
            .env("RINGSWITCH_SOCKET", &self.socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if preload_lib {
            c.env("LD_PRELOAD", preload());
        }
        c
    }
}

fn run_ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Packets in pkt-gen's final JSON report.
fn pktgen_packets(child: Child) -> u64 {
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "pkt-gen: {}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(s.lines().last().unwrap_or("")).unwrap();
    v["packets"].as_u64().unwrap()
}

#[test]
fn recompiled_program_sends_through_a_pipe_to_pktgen() {
    let d = Daemon::start("pipe-tx");
    let rx = d.pktgen(&["-f", "rx", "-i", "p{1", "-n", "1000000"]);
    d.wait_open(&["p{1"]);
    let out = run_ok(d.c(
        "nm_raw_linked",
        false,
        &["tx", "p}1", "1000000", "60", "poll"],
    ));
    assert_eq!(count(&out, "sent"), 1_000_000);
    assert_eq!(pktgen_packets(rx), 1_000_000, "a pipe never drops");
}

#[test]
fn plain_binary_under_preload_receives_with_poll_select_epoll_and_ioctl() {
    let d = Daemon::start("preload-rx");
    // Without the library the binary is an ordinary netmap program.
    let o = d
        .c("nm_raw_plain", false, &["rx", "x}0", "1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("open /dev/netmap"),
        "{}",
        text(&o)
    );
    for (k, wait) in ["poll", "select", "epoll", "ioctl"].iter().enumerate() {
        let rx_name = format!("q}}{k}");
        let tx_name = format!("q{{{k}");
        let rx = d
            .c(
                "nm_raw_plain",
                true,
                &["rx", &rx_name, "300000", "60", wait],
            )
            .spawn()
            .unwrap();
        d.wait_open(&[&rx_name]);
        let tx = d.pktgen(&["-f", "tx", "-i", &tx_name, "-n", "300000"]);
        assert_eq!(pktgen_packets(tx), 300_000);
        let o = rx.wait_with_output().unwrap();
        assert!(o.status.success(), "{wait}: {}", text(&o));
        assert_eq!(
            count(&String::from_utf8_lossy(&o.stdout), "received"),
            300_000,
            "{wait}"
        );
    }
}

#[test]
fn through_the_switch_every_frame_is_delivered_or_counted() {
    let d = Daemon::start("switch");
    // netmap program (preloaded) -> switch -> pkt-gen.
    let rx = d.pktgen(&["-f", "rx", "-i", "vale0:r"]);
    d.wait_open(&["vale0:r"]);
    let out = run_ok(d.c(
        "nm_raw_plain",
        true,
        &["tx", "vale0:t", "200000", "60", "poll"],
    ));
    assert_eq!(count(&out, "sent"), 200_000);
    // Once the switch has accounted for every frame (delivered or dropped
    // at the receiver's full ring), stop the receiver: it takes what is
    // still in its ring and reports.
    let drops = d.wait_accounted("vale0:r", 200_000);
    interrupt(&rx);
    let got = pktgen_packets(rx);
    assert!(got > 0, "nothing arrived");
    assert_eq!(got + drops, 200_000, "received {got} + dropped {drops}");

    // pkt-gen -> switch -> netmap program, paced so nothing is dropped.
    let rx = d
        .c(
            "nm_raw_plain",
            true,
            &["rx", "vale0:r2@conf:slots=4096", "100000", "60", "poll"],
        )
        .spawn()
        .unwrap();
    d.wait_open(&["vale0:r2"]);
    // A 4096-slot ring and a paced sender: the receiver may stall 40 ms
    // (two cores, other tests running) without the switch dropping.
    let tx = d.pktgen(&["-f", "tx", "-i", "vale0:t2", "-n", "100000", "-R", "100000"]);
    assert_eq!(pktgen_packets(tx), 100_000);
    let o = rx.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        count(&String::from_utf8_lossy(&o.stdout), "received"),
        100_000
    );
}

#[test]
fn libnetmap_port_api_with_ring_suffixes() {
    let d = Daemon::start("nmport");
    // Ring 1 of a two-ring pipe, TX only on one end and RX only on the other.
    let rx = d
        .c("nm_port", false, &["rx", "y}1-1/R@conf:rings=2", "300000"])
        .spawn()
        .unwrap();
    d.wait_open(&["y}1"]);
    let out = run_ok(d.c("nm_port", false, &["tx", "y{1-1/T", "300000"]));
    assert_eq!(count(&out, "sent"), 300_000);
    let o = rx.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        count(&String::from_utf8_lossy(&o.stdout), "received"),
        300_000
    );
    // One descriptor per ring of a four-ring pipe on each side, as the
    // threads of pkt-gen -p use a port.
    let rx = d
        .c(
            "nm_port",
            false,
            &["rx", "w}1-0@conf:rings=4+w}1-1+w}1-2+w}1-3", "400000"],
        )
        .spawn()
        .unwrap();
    d.wait_open(&["w}1"]);
    let out = run_ok(d.c(
        "nm_port",
        false,
        &["tx", "w{1-0+w{1-1+w{1-2+w{1-3", "400000"],
    ));
    assert_eq!(count(&out, "sent"), 400_000);
    let o = rx.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        count(&String::from_utf8_lossy(&o.stdout), "received"),
        400_000
    );
    // And with pkt-gen on the other end of a switch.
    let rx = d.pktgen(&["-f", "rx", "-i", "vale3:r", "-n", "1000"]);
    d.wait_open(&["vale3:r"]);
    let out = run_ok(d.c("nm_port", false, &["tx", "vale3:t", "1000"]));
    assert_eq!(count(&out, "sent"), 1000);
    assert_eq!(pktgen_packets(rx), 1000);
}

#[test]
fn legacy_nm_open_helpers() {
    let d = Daemon::start("legacy");
    for (k, rx_mode) in ["rx", "rxnext"].iter().enumerate() {
        let rx_name = format!("l}}{k}");
        let tx_name = format!("l{{{k}");
        let rx = d
            .c("nm_legacy", false, &[rx_mode, &rx_name, "200000"])
            .spawn()
            .unwrap();
        d.wait_open(&[&rx_name]);
        let out = run_ok(d.c("nm_legacy", false, &["tx", &tx_name, "200000"]));
        assert_eq!(count(&out, "sent"), 200_000);
        let o = rx.wait_with_output().unwrap();
        assert!(o.status.success(), "{rx_mode}: {}", text(&o));
        assert_eq!(
            count(&String::from_utf8_lossy(&o.stdout), "received"),
            200_000
        );
    }
    // nm_open's sender into pkt-gen through a switch.
    let rx = d.pktgen(&["-f", "rx", "-i", "vale4:r", "-n", "1000"]);
    d.wait_open(&["vale4:r"]);
    let out = run_ok(d.c("nm_legacy", false, &["tx", "vale4:t", "1000"]));
    assert_eq!(count(&out, "sent"), 1000);
    assert_eq!(pktgen_packets(rx), 1000);
}

#[test]
fn misuse_fails_with_netmaps_errnos_and_never_crashes() {
    let d = Daemon::start("misuse");
    for (prog, preload_lib) in [("nm_misuse_linked", false), ("nm_misuse_plain", true)] {
        let o = d
            .c(prog, preload_lib, &["vale0:misuse"])
            .env("RINGSWITCH_NETMAP_QUIET", "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("0 failures"),
            "{prog}: {}",
            text(&o)
        );
        assert!(!out.contains("FAIL"), "{prog}: {out}");
    }
}

#[test]
fn without_a_daemon_open_fails_with_enoent_and_says_why() {
    let o = Command::new(programs().path("nm_raw_plain"))
        .args(["rx", "vale0:a", "1"])
        .env("LD_PRELOAD", preload())
        .env("RINGSWITCH_SOCKET", "/nonexistent/ringswitch.sock")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no ringswitch daemon is listening on /nonexistent/ringswitch.sock"),
        "{err}"
    );
    assert!(
        err.contains("open /dev/netmap: No such file or directory"),
        "{err}"
    );
}

#[test]
fn ordinary_programs_run_unchanged_under_the_preload() {
    let dir = std::env::temp_dir().join(format!("rs-nm-plain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg("echo hello > f && cat f && ls f && sleep 0.1 && head -c 4 /dev/zero | wc -c")
        .current_dir(&dir)
        .env("LD_PRELOAD", preload())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["hello", "f", "4"],
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

impl Daemon {
    /// `ringswitch ctl ARGS` on this daemon, which must succeed.
    fn ctl(&self, args: &[&str]) {
        ctl_ok_at(&self.socket, args);
    }

    /// nm_compat (a plain netmap binary) under the preload library; its
    /// output, which must report no failed check.
    fn compat(&self, args: &[&str]) -> Output {
        let o = self.c("nm_compat", true, args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("0 failures") && !out.contains("FAIL"),
            "nm_compat {args:?}: {}",
            text(&o)
        );
        o
    }

    /// `port`'s counter `field` (the port must be open).
    fn counter(&self, port: &str, field: &str) -> u64 {
        let p = self
            .port_stats(port)
            .unwrap_or_else(|| panic!("no counters for {port}"));
        p[field]
            .as_u64()
            .unwrap_or_else(|| panic!("no {field} in {p}"))
    }
}

use std::process::Output;

/// Fewer frames than a receiver's ring holds (1024 slots): none can be
/// dropped for a full ring, however slowly the receiver runs.
const FEW: u64 = 1000;

/// netmap's REGISTER carries ring and slot counts (libnetmap moves a
/// spec's `@conf:` there, pkt-gen -p relies on it): a port the open
/// creates gets them, ring by ring on two descriptors as pkt-gen's threads
/// register; an existing port keeps its own and they are reported.
#[test]
fn register_sizes_size_a_new_port_and_an_existing_one_reports_its_own() {
    let d = Daemon::start("sizes");
    d.ctl(&["port", "add", "vale6:fixed@conf:rings=3"]);
    let rx = d.pktgen(&["-f", "rx", "-i", "vale6:r", "-n", &FEW.to_string()]);
    d.wait_open(&["vale6:r"]);
    let o = d.compat(&["rings", "vale6:new", "vale6:fixed", "3", &FEW.to_string()]);
    assert_eq!(count(&String::from_utf8_lossy(&o.stdout), "sent"), FEW);
    assert_eq!(pktgen_packets(rx), FEW, "frames sent on ring 1 arrive");
}

/// PORT_HDR_SET / PORT_HDR_GET as netmap has them (0, 10 or 12 bytes on
/// a switch port), and frames carrying the header: taken off what the
/// program sends, put in front of what it receives.
#[test]
fn virtio_net_headers_are_set_got_and_carried() {
    let d = Daemon::start("vnet");
    let rx = d.pktgen(&["-f", "rx", "-i", "vale7:r"]);
    d.wait_open(&["vale7:r"]);
    let o = d.compat(&["hdrtx", "vale7:t", &FEW.to_string()]);
    assert_eq!(count(&String::from_utf8_lossy(&o.stdout), "sent"), FEW);
    // The sender waited until the switch took every frame, and the switch
    // delivers before it gives the slots back: everything is counted.
    assert_eq!(d.counter("vale7:r", "rx_packets"), FEW);
    assert_eq!(
        d.counter("vale7:r", "rx_bytes"),
        FEW * 60,
        "frames arrive without the sender's 10-byte header"
    );
    interrupt(&rx);
    assert_eq!(pktgen_packets(rx), FEW);

    // The other way: a program with a 12-byte header receives from pkt-gen.
    let mut prog = d
        .c("nm_compat", true, &["hdrrx", "vale7:h", &FEW.to_string()])
        .spawn()
        .unwrap();
    let mut out = BufReader::new(prog.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("ready") {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "nm_compat hdrrx ended before it was ready: {seen}"
        );
        seen.push_str(&line);
    }
    let tx = d.pktgen(&["-f", "tx", "-i", "vale7:s", "-n", &FEW.to_string()]);
    assert_eq!(pktgen_packets(tx), FEW);
    out.read_to_string(&mut seen).unwrap();
    let o = prog.wait_with_output().unwrap();
    assert!(
        o.status.success() && seen.contains("0 failures"),
        "{seen}\n{}",
        text(&o)
    );
    assert_eq!(count(&seen, "received"), FEW);
}

/// NS_INDIRECT slots (pkt-gen -I): the frame each points at is copied in
/// at the sync (a batch of slots per system call), through a switch and
/// through a pipe; a slot with a length larger than a buffer, or a pointer
/// that cannot be read, goes out empty (the switch drops it as short) and
/// is reported, and the good slots around it in the same sync go out.
#[test]
fn indirect_slots_are_sent_from_the_programs_memory() {
    let d = Daemon::start("indirect");
    let rx = d.pktgen(&["-f", "rx", "-i", "vale8:r"]);
    d.wait_open(&["vale8:r"]);
    let o = d.compat(&["indirect", "vale8:t", &FEW.to_string(), "1"]);
    assert_eq!(count(&String::from_utf8_lossy(&o.stdout), "sent"), FEW);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("vale8:t: 4 NS_INDIRECT slots"),
        "the bad slots are reported: {err}"
    );
    // The good ones among the bad (nm_compat.c's mix) arrive too.
    let all = FEW + 3;
    assert_eq!(d.counter("vale8:r", "rx_packets"), all);
    assert_eq!(d.counter("vale8:r", "rx_bytes"), all * 60);
    interrupt(&rx);
    assert_eq!(pktgen_packets(rx), all);

    let rx = d.pktgen(&["-f", "rx", "-i", "ip}1", "-n", &FEW.to_string()]);
    d.wait_open(&["ip}1"]);
    d.compat(&["indirect", "ip{1", &FEW.to_string(), "0"]);
    assert_eq!(pktgen_packets(rx), FEW);
}

/// As in netmap, a pipe is named by its whole port name: `vale7:q{1` and
/// `vale1:q}1` are ends of different pipes. Memory ids: distinct per
/// memory (libnetmap shares one mapping between ports with equal ids),
/// equal for the two ends of a pipe, never 0.
#[test]
fn pipes_of_different_ports_differ_and_memory_ids_tell_memories_apart() {
    let d = Daemon::start("pipes");
    d.compat(&["pipes", "vale7:q", "vale1:q"]);
}

/// A REGISTER asking for another port's memory (`nr_mem_id`, as lb asks
/// for its output pipes) cannot be met, every port and pipe having its
/// own: refused with EOPNOTSUPP rather than answered with another id. The
/// other end of a pipe shares its memory; an id no port of the process has
/// means any; PORT_INFO_GET from any descriptor of the process answers a
/// port's memory id (libnetmap's `@PORT` suffix).
#[test]
fn asking_for_another_ports_memory_is_refused() {
    let d = Daemon::start("memid");
    let o = d.compat(&["memid", "vale5:in"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("mi{1: the registration asks for memory"),
        "the refusal says why: {err}"
    );
}

/// lb's way of working (`nm_lb.c`, written for this suite after netmap's
/// lb): output pipes opened in the switch port's memory (`PORT{K/xT@ID`,
/// libnetmap giving them the port's mapping), every frame the port
/// receives handed to a pipe by swapping buffer indexes, and pkt-gen
/// receivers in other processes on the pipes' other ends. Every frame
/// arrives once. Room for more pipes than the port was opened with is
/// refused with EOPNOTSUPP, saying how to get it.
#[test]
fn lb_hands_a_switch_ports_frames_to_pipes_in_its_memory() {
    let d = Daemon::start("lb");
    let mut lb = d
        .c("nm_lb", false, &["vale9:lb", "2", &FEW.to_string()])
        .spawn()
        .unwrap();
    let mut out = BufReader::new(lb.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "nm_lb opened its pipes");
    let half = (FEW / 2).to_string();
    let rx0 = d.pktgen(&["-f", "rx", "-i", "vale9:lb}0", "-n", &half]);
    let rx1 = d.pktgen(&["-f", "rx", "-i", "vale9:lb}1", "-n", &half]);
    d.wait_open(&["vale9:lb}0", "vale9:lb}1"]);
    let tx = d.pktgen(&[
        "-f",
        "tx",
        "-i",
        "vale9:src",
        "-n",
        &FEW.to_string(),
        "-D",
        "ff:ff:ff:ff:ff:ff",
    ]);
    assert_eq!(pktgen_packets(tx), FEW);
    assert_eq!(pktgen_packets(rx0), FEW / 2);
    assert_eq!(pktgen_packets(rx1), FEW / 2);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let o = lb.wait_with_output().unwrap();
    assert!(o.status.success(), "nm_lb: {rest} {}", text(&o));
    assert_eq!(rest.trim(), format!("forwarded {FEW}"));

    // A port opened with room for one pipe: the second is refused.
    let o = d
        .c("nm_lb", false, &["vale9:one", "2", "1"])
        .env("RINGSWITCH_NETMAP_PIPES", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        err.contains("all 1 pipes it has room for are open")
            && err.contains("RINGSWITCH_NETMAP_PIPES")
            && err.contains("Operation not supported"),
        "the refusal says why and what to do: {err}"
    );
}

/// libnetmap hands the kernel `eth0` for `netmap:eth0`: a bare name is an
/// interface (here one that does not exist, so no privileges are needed).
#[test]
fn a_bare_name_is_an_interface() {
    let d = Daemon::start("ifname");
    d.compat(&["ifname", "rsnoif0"]);
}

/// A netmap program on a switch port goes on through a daemon restart: its
/// poll wakes when the daemon goes, the port opens itself again on the new
/// daemon, and the new memory appears at the program's own mapping, so
/// frames sent after the restart arrive on the same descriptor and rings.
#[test]
fn a_netmap_program_on_a_switch_port_survives_a_daemon_restart() {
    let d = Daemon::start("nm-reconnect");
    let mut prog = d
        .c(
            "nm_compat",
            true,
            &["reconnect", "vale6:r", &(2 * FEW).to_string()],
        )
        .spawn()
        .unwrap();
    let mut out = BufReader::new(prog.stdout.take().unwrap());
    let mut seen = String::new();
    let mut wait_for = |what: &str, seen: &mut String| {
        while !seen.contains(what) {
            let mut line = String::new();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "nm_compat reconnect ended before {what:?}: {seen}"
            );
            seen.push_str(&line);
        }
    };
    wait_for("ready", &mut seen);
    let send = |d: &Daemon| {
        let tx = d.pktgen(&[
            "-f",
            "tx",
            "-i",
            "vale6:s",
            "-n",
            &FEW.to_string(),
            "-R",
            "100000",
        ]);
        assert_eq!(pktgen_packets(tx), FEW);
    };
    send(&d);
    wait_for("half", &mut seen);
    // The same socket, a new daemon: the program's port comes back by
    // itself.
    drop(d);
    let d = Daemon::start("nm-reconnect");
    d.wait_open(&["vale6:r"]);
    send(&d);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    seen.push_str(&rest);
    let o = prog.wait_with_output().unwrap();
    assert!(
        o.status.success() && seen.contains("0 failures"),
        "{seen}\n{}",
        text(&o)
    );
    assert_eq!(count(&seen, "received"), 2 * FEW);
}
