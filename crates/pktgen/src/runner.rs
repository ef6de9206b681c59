//! How a run goes: plan -> port -> threads -> report. [`run`] checks the
//! plan, opens the port and checks the plan against it, runs the mode in
//! one session per thread, and adds the threads' outcomes up into the
//! report; what it tells on the way goes to a [`Reporter`].

use std::path::Path;
use std::time::Duration;

use ringswitch_client::{Port, WaitMode};

use crate::frame::Template;
use crate::os;
use crate::plan::{CheckedPlan, Mode, Plan};
use crate::report::{Outcome, Report, Reporter, Silent, Start};
use crate::session::{Role, Session, Shared};
use crate::{meter, recv, rtt, send, PktGenError};

/// Runs `plan` on the daemon listening at `socket`: checks it, opens the
/// port, runs the mode in the plan's threads until the count, the duration
/// or a signal ends it, and returns the report. `reporter` hears of the
/// start, every report interval and the end (see [`Reporter`]).
pub fn run(plan: &Plan, socket: &Path, reporter: &mut dyn Reporter) -> Result<Report, PktGenError> {
    let checked = plan.check()?;
    let name = plan.port.clone();
    // Before the port opens: from the moment others can see the port open,
    // SIGINT/SIGTERM end the run with a report (a signal in between used
    // to kill pkt-gen outright).
    let _signals = os::SignalGuard::install().map_err(PktGenError::Signal)?;
    let (port, burst) = open(&checked, &name, socket)?;
    let g = port.geometry();
    let threads = checked.threads;
    tracing::info!(port = %name, mode = %checked.mode, burst, len = checked.len, threads, ?g, "pkt-gen starting");

    wait_before_start(plan.wait_s);

    let template = Template::new(&checked.spec);
    let (kind, canonical) = (port.kind(), port.name().to_string());
    // An on-demand port's counters go with it: keep it open until the
    // switch's drops for it have been read.
    let _hold = port.hold();
    // Senders split `-n` between them, as netmap's pkt-gen does (each
    // sends its share); receivers take frames from one budget, whatever
    // ring they come on.
    let shared = if matches!(checked.mode, Mode::Tx | Mode::Txseq) {
        Shared::split(checked.count, threads as usize)
    } else {
        Shared::new(checked.count, threads as usize)
    };
    let start = Start {
        plan,
        burst,
        tx_rings: g.tx_rings,
        rx_rings: g.rx_rings,
    };
    let (mut out, events, thread_packets, waits) = if threads == 1 {
        let role = Role {
            index: 0,
            rate_pps: checked.rate_pps,
            threaded: false,
        };
        reporter.start(&start);
        let mut s = Session::new(
            port,
            Vec::new(),
            name.clone(),
            &checked,
            burst,
            template,
            &shared,
            role,
        );
        let out = run_mode(&mut s, checked.mode, reporter)?;
        (out, s.meter.events, None, Some(s.port.stats()))
    } else {
        let pieces = port.split().map_err(|source| PktGenError::Split {
            port: name.clone(),
            source,
        })?;
        let (groups, _unused) = assign(pieces, threads as usize, checked.sends(), g.rx_rings);
        reporter.start(&start);
        let (out, events, per) =
            run_threads(groups, &checked, burst, &template, &shared, &name, reporter)?;
        (out, events, Some(per), None)
    };
    if checked.mode == Mode::Rx {
        if let Some(d) = switch_drops(socket, kind, &canonical) {
            out.drops = Some(d);
        }
    }
    let mut report = out.report(checked.mode, name, events);
    report.threads = threads;
    report.thread_packets = thread_packets;
    report.cpu_seconds = os::process_cpu_seconds();
    if let Some(w) = waits {
        report.sleeps = Some(w.sleeps);
        report.spins_won = Some(w.spins_won);
        report.spins_gave_way = Some(w.spins_gave_way);
        report.spin_cap_us = Some(w.spin_cap.as_secs_f64() * 1e6);
    }
    reporter.end(&report);
    Ok(report)
}

/// Opens port `name` in the plan's wait mode and checks the plan against
/// it: the frames fit its buffers, it has a ring for every thread. Returns
/// the port and the burst, lowered to what a ring can hold.
fn open(plan: &CheckedPlan, name: &str, socket: &Path) -> Result<(Port, u32), PktGenError> {
    let mut port = Port::open_at(socket, name).map_err(|source| PktGenError::Open {
        port: name.to_string(),
        source,
    })?;
    port.set_wait_mode(if plan.busy {
        WaitMode::Busy
    } else if plan.blocking {
        WaitMode::Blocking
    } else {
        WaitMode::Adaptive
    });
    // Through a daemon upgrade or restart: a switch port is opened again on
    // the new daemon, and the run goes on after the pause.
    port.set_reconnect_give_up(crate::os::stop_requested);
    port.set_reconnect(true)
        .map_err(|source| PktGenError::Open {
            port: name.to_string(),
            source,
        })?;
    let g = port.geometry();
    if plan.len > g.buf_size as usize {
        return Err(PktGenError::FrameTooLong {
            port: name.to_string(),
            len: plan.len,
            buf_size: g.buf_size,
        });
    }
    let threads = plan.threads;
    let (rings, dir) = if plan.sends() {
        (g.tx_rings, "TX")
    } else {
        (g.rx_rings, "RX")
    };
    if threads > rings {
        return Err(PktGenError::TooFewRings {
            example: format!(
                "{}@conf:rings={threads}",
                ringswitch_control::name::base_name(name)
            ),
            port: name.to_string(),
            threads,
            dir,
            tx_rings: g.tx_rings,
            rx_rings: g.rx_rings,
        });
    }
    // A batch never exceeds what a ring can hold.
    let burst = plan
        .burst
        .min(g.tx_slots.min(g.rx_slots).saturating_sub(1))
        .max(1);
    Ok((port, burst))
}

/// Runs the mode in this thread; a thread of a `-p` run reports nothing
/// (`out` is [`Silent`]: the calling thread reports for them all).
fn run_mode(
    s: &mut Session<'_>,
    mode: Mode,
    out: &mut dyn Reporter,
) -> Result<Outcome, PktGenError> {
    match mode {
        Mode::Tx | Mode::Txseq => send::send(s, out),
        Mode::Rx | Mode::Rxseq => recv::receive(s, mode == Mode::Rxseq, out),
        Mode::Ping => rtt::ping(s, out),
        Mode::Pong => rtt::pong(s, out),
    }
}

/// Hands the pieces of a split port to `threads` threads: each thread gets
/// piece i (ring pair i) as its port; receivers also get every further
/// piece with an RX ring, round robin (thread i reads rings i, i+N, ...).
/// Returns the threads' pieces and the pieces nobody uses (kept open to
/// the end; senders leave TX rings N.. idle, as `-p 1` leaves all but
/// ring 0).
fn assign(
    pieces: Vec<Port>,
    threads: usize,
    sends: bool,
    rx_rings: u32,
) -> (Vec<(Port, Vec<Port>)>, Vec<Port>) {
    let mut it = pieces.into_iter();
    let mut groups: Vec<(Port, Vec<Port>)> =
        it.by_ref().take(threads).map(|p| (p, Vec::new())).collect();
    let mut unused = Vec::new();
    for (i, p) in it.enumerate() {
        let ring = threads + i;
        if !sends && ring < rx_rings as usize {
            groups[ring % threads].1.push(p);
        } else {
            unused.push(p);
        }
    }
    (groups, unused)
}

/// Runs one session per thread, reports the intervals from what the
/// threads publish, and adds their outcomes up. Returns the sum, the
/// events, and each thread's packets.
fn run_threads(
    groups: Vec<(Port, Vec<Port>)>,
    plan: &CheckedPlan,
    burst: u32,
    template: &Template,
    shared: &Shared,
    name: &str,
    reporter: &mut dyn Reporter,
) -> Result<(Outcome, u64, Vec<u64>), PktGenError> {
    let sessions: Vec<Session> = groups
        .into_iter()
        .enumerate()
        .map(|(i, (port, extra))| {
            let role = Role {
                index: i,
                rate_pps: plan.rate_share(i as u32),
                threaded: true,
            };
            let t = template.clone();
            Session::new(port, extra, name.to_string(), plan, burst, t, shared, role)
        })
        .collect();
    let mode = plan.mode;
    let results: Vec<Result<(Outcome, u64), PktGenError>> = std::thread::scope(|sc| {
        let mut handles = Vec::with_capacity(sessions.len());
        let mut results = Vec::new();
        for (i, mut s) in sessions.into_iter().enumerate() {
            let spawned = std::thread::Builder::new()
                .name(format!("pkt-gen-{i}"))
                .spawn_scoped(sc, move || {
                    let r = run_mode(&mut s, mode, &mut Silent);
                    if r.is_err() {
                        shared.abort();
                    }
                    r.map(|o| (o, s.meter.events))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared.abort();
                    results.push(Err(PktGenError::Spawn(e)));
                    break;
                }
            }
        }
        report_intervals(shared, plan.interval_ms, &handles, reporter);
        for h in handles {
            results.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        results
    });
    let mut total = Outcome::default();
    let (mut events, mut per) = (0u64, Vec::with_capacity(results.len()));
    for r in results {
        let (o, e) = r?;
        per.push(o.packets);
        events += e;
        total = total.merge(o);
    }
    Ok((total, events, per))
}

/// Longest the interval reporter sleeps before looking whether the
/// threads are done.
const REPORTER_SLICE: Duration = Duration::from_millis(10);

/// The intervals of a `-p` run, from the totals the threads publish, until
/// every thread is done.
fn report_intervals<T>(
    shared: &Shared,
    interval_ms: u64,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
    reporter: &mut dyn Reporter,
) {
    let mut meter = meter::Meter::new(interval_ms, os::monotonic_ns());
    while !handles.iter().all(|h| h.is_finished()) {
        let now = os::monotonic_ns();
        if now >= meter.next_report_ns() {
            let (pkts, bytes, events, min_space) = shared.take_totals();
            meter.absorb(pkts, bytes, events, min_space);
            if let Some(iv) = meter.poll(now) {
                reporter.interval(&iv, None);
            }
        }
        let until = meter.next_report_ns().saturating_sub(os::monotonic_ns());
        std::thread::sleep(
            Duration::from_nanos(until).clamp(Duration::from_micros(100), REPORTER_SLICE),
        );
    }
}

/// For a switch port, what the switch dropped because this port's RX ring
/// was full (the one loss a receiver cannot see by itself). `None` for
/// pipes (they never drop) or when the daemon cannot be asked.
fn switch_drops(socket: &Path, kind: ringswitch_control::PortKind, name: &str) -> Option<u64> {
    if kind != ringswitch_control::PortKind::Vale {
        return None;
    }
    let switch = name.split(':').next()?.to_string();
    let mut c = ringswitch_control::Connection::connect(socket).ok()?;
    let (all, _): (Vec<ringswitch_control::PortStats>, _) = c
        .call_as(&ringswitch_control::Request::Stats {
            switch: Some(switch),
        })
        .ok()?;
    all.iter()
        .find(|st| st.name == name)
        .map(|st| st.drop_rx_full)
}

/// `-w`: sleep, in slices so a signal cuts it short.
fn wait_before_start(seconds: u32) {
    let end = os::monotonic_ns().saturating_add(u64::from(seconds) * 1_000_000_000);
    while !os::stop_requested() {
        let now = os::monotonic_ns();
        if now >= end {
            break;
        }
        std::thread::sleep(Duration::from_nanos((end - now).min(100_000_000)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Silent;

    #[test]
    fn run_without_a_daemon_says_so() {
        let e = run(
            &Plan::new("vale0:a"),
            Path::new("/nonexistent/ringswitch-test.sock"),
            &mut Silent,
        )
        .unwrap_err();
        assert!(matches!(e, PktGenError::Open { .. }), "{e:?}");
        assert_eq!(e.to_string(), "cannot open port vale0:a");
    }
}
