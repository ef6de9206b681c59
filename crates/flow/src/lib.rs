//! OpenFlow 1.3 flow tables as a library: no I/O, no threads, no clock.
//!
//! - [`key`]: a [`FlowKey`], the header fields of a frame (eth, one VLAN
//!   tag, IPv4/IPv6, TCP/UDP/SCTP ports, ICMP, ARP) plus its input port
//!   and the pipeline's metadata, as fixed `u64` words; a [`KeyMask`] of
//!   the same shape from an OpenFlow `Match`.
//! - [`classifier`]: a tuple-space classifier per table (one hash table
//!   per distinct mask, visited by highest priority with an early stop).
//! - [`table`]: [`FlowTables`], the control side: FLOW_MOD (add, modify,
//!   delete, strict and not, cookie, out_port and out_group filters,
//!   overlap check, bounded tables), GROUP_MOD (ALL, SELECT, INDIRECT),
//!   idle and hard timeouts ([`FlowTables::expire`]), statistics for the
//!   multipart replies, and a version that changes on every modification.
//! - [`pipeline`]: the data side, [`FlowTables::classify`]: a key through
//!   the tables (goto_table, metadata, apply/write/clear actions, the
//!   action set, groups) into a [`Verdict`].
//! - [`verdict`]: a [`Verdict`], what to do with a frame as a fixed-size
//!   structure: outputs ([`Target`]: a port, IN_PORT, FLOOD, ALL,
//!   CONTROLLER, NORMAL, LOCAL) each with the header [`Edit`]s in force,
//!   and the counters to add the frame to; [`apply_edits`] writes an
//!   edited frame into a caller's buffer.
//! - [`cache`]: [`FlowCache`], a per-worker exact-match cache in front of
//!   the pipeline, invalidated by the tables' version, that keeps the
//!   counters exact by adding once per run of frames.
//! - [`error`]: [`FlowError`], every refusal with its `OFPT_ERROR` code.
//!
//! # How the switch uses it
//!
//! A worker keeps one [`FlowCache`]. For each frame of a batch it
//! extracts the key ([`FlowKey::extract`] from the frame's first bytes and
//! its OpenFlow input port) and looks it up ([`FlowCache::lookup`], or
//! [`FlowCache::lookup_with`] to reach the tables only on a miss); the
//! verdict's outputs say where the frame goes (`Normal`: the learning
//! bridge) and [`Verdict::apply`] writes the edited copy when an output
//! is not [`Output::unchanged`]. Every few batches, and before it
//! sleeps, it calls [`FlowCache::flush`], which adds what the entries
//! counted to the flows' counters. Nothing of that allocates or locks; the
//! counters are atomics. The tables themselves are plain data: `classify` takes
//! `&self`, the modifications `&mut self`, and how workers see a
//! modification (a lock taken on a miss, or a new copy published) is the
//! switch's choice; the version tells the caches.
//!
//! # How the daemon uses it
//!
//! The OpenFlow connection decodes messages with `ringswitch-openflow` and
//! hands FLOW_MOD and GROUP_MOD to [`FlowTables::flow_mod`] and
//! [`FlowTables::group_mod`] (a refusal's [`FlowError::code`] is the
//! `OFPT_ERROR` to send), sends FLOW_REMOVED for the [`Removed`] flows
//! those and [`FlowTables::expire`] (called every second or so) return
//! when they ask for it, and answers FLOW, AGGREGATE, TABLE, GROUP and
//! GROUP_DESC requests from [`FlowTables::flow_stats`],
//! [`FlowTables::aggregate_stats`], [`FlowTables::table_stats`],
//! [`FlowTables::group_stats`] and [`FlowTables::group_desc`]. A verdict's
//! `Controller` outputs carry what a PACKET_IN needs (reason, table,
//! cookie, max_len).
//!
//! ```
//! use std::time::Duration;
//! use ringswitch_flow::{FlowCache, FlowKey, FlowTables, Target};
//! use ringswitch_openflow::message::FlowMod;
//! use ringswitch_openflow::{Action, Field, Instruction, Match, Oxm};
//!
//! let mut tables = FlowTables::new(Default::default());
//! let udp = Match::new(vec![
//!     Oxm::exact(Field::EthType, 0x0800),
//!     Oxm::exact(Field::IpProto, 17),
//! ])
//! .unwrap();
//! let out = Action::Output { port: 2, max_len: 0 };
//! let fm = FlowMod::add(0, 10, udp, vec![Instruction::ApplyActions(vec![out])]);
//! tables.flow_mod(&fm, Duration::ZERO).unwrap();
//!
//! let mut frame = [0u8; 60];
//! frame[12..14].copy_from_slice(&[0x08, 0x00]);
//! frame[14] = 0x45;
//! frame[23] = 17;
//! let key = FlowKey::extract(&frame, 1);
//! let mut cache = FlowCache::new(1024);
//! let v = cache.lookup(&tables, &key, frame.len());
//! assert_eq!(v.outputs()[0].target, Target::Port(2));
//! cache.flush();
//! assert_eq!(tables.flows().next().unwrap().counts(), (1, 60));
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cache;
pub mod classifier;
pub mod error;
pub mod key;
pub mod pipeline;
pub mod table;
pub mod verdict;

/// Most tables a [`FlowTables`] can have.
pub const MAX_TABLES: usize = 16;

pub use cache::{FlowCache, Hit, Probe, NO_CLASS};
pub use error::FlowError;
pub use key::{CompactKey, FlowKey, KeyMask};
pub use table::{Config, Flow, FlowTables, Removed};
pub use verdict::{apply_edits, Counter, Edit, EditError, Output, Tally, Target, Verdict};
