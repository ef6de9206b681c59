//! netmap's pkt-gen over ringswitch ports: a traffic generator and sink
//! for switch ports and pipes, with netmap's options and output.
//!
//! A run is plan -> threads -> report: a [`Plan`] says what to do (netmap
//! pkt-gen's options as plain values, [`Plan::new`] has its defaults);
//! [`run`] checks it, opens the plan's port on the daemon at `socket`, runs
//! one mode until the count, the duration or SIGINT/SIGTERM, and returns a
//! [`Report`]. On the way it tells a [`Reporter`] of the start, each report
//! interval and the end; [`print::Printer`] prints those as netmap's
//! pkt-gen does (per-interval lines, closing summary, and with `--json` the
//! report as one JSON object on the last line). Argument parsing is the
//! `ringswitch pkt-gen` command's (crates/cli).
//!
//! Modes: `tx` sends a template frame as fast as the ring (or the rate)
//! allows, `rx` counts, `txseq`/`rxseq` carry a 32-bit sequence number and
//! count gaps and reordering, `ping` measures round trips against `pong`,
//! which bounces every frame back with its addresses swapped.
//!
//! The source and destination ([`Endpoint`]) take netmap's ranges,
//! `a.b.c.d[-e.f.g.h][:port[-port]]`: each packet then takes the next
//! point of each range (port fastest, then address, starting over after
//! the last), with the IPv4 and UDP checksums recomputed from precomputed
//! partial sums. Only the fields that vary are stamped, so a run without
//! ranges does exactly what it did before.
//!
//! With N threads (`-p N`) the port is split ([`Port::split`]) and the
//! mode runs in N threads (`std::thread::scope`), thread i on ring pair i.
//! Senders use TX rings 0..N; receivers spread all RX rings over the
//! threads (thread i reads rings i, i+N, ...). Senders split the count
//! evenly (as netmap's pkt-gen does: each sends its share); receivers
//! claim from one budget batch by batch; the rate is split evenly. The calling
//! thread reports the intervals from the totals each worker publishes
//! after every batch, and the report adds the threads' results up. Each
//! txseq thread numbers its own frames and writes its index next to the
//! number; rxseq tracks every (sender thread) stream apart
//! ([`seq::SeqStreams`]). One thread (the default) keeps the port whole:
//! TX ring 0, every RX ring.
//!
//! Data path rules: the template is written into a buffer only when the
//! slot's buffer changed (pipes swap buffers), then only the length and the
//! stamped fields are written per packet; nothing allocates after start-up;
//! every wait has a timeout so the stop conditions are checked at least
//! every 100 ms; every batch is at most the burst.
//!
//! [`Port::split`]: ringswitch_client::Port::split
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod frame;
pub mod latency;
pub mod meter;
mod os;
pub mod plan;
pub mod print;
pub mod rate;
mod recv;
pub mod report;
mod rtt;
mod runner;
mod send;
pub mod seq;
mod session;

pub use error::PktGenError;
pub use frame::{Endpoint, MacAddr};
pub use latency::RttSummary;
pub use os::monotonic_ns;
pub use plan::{
    CheckedPlan, Mode, Plan, UnknownMode, DEFAULT_BURST, DEFAULT_DST_PORT, DEFAULT_SRC_PORT,
};
pub use report::{End, Report, Reporter, Silent, Start};
pub use runner::run;
