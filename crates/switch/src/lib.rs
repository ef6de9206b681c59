//! The VALE switch: a learning bridge whose workers copy packets from a
//! source port's TX ring into destination ports' private RX rings, batched
//! per destination, dropping and counting when a receiver is full. Ports are
//! netmap ring ports, VM ports (vhost-user virtio-net queue pairs) or
//! interface ports (NIC or TAP queues); the same worker copies between any
//! two kinds.
#![warn(missing_docs)]
// No narrowing cast on a length or an index (issue 15): every conversion
// that can lose bits is checked or goes through a type that cannot.
#![deny(clippy::cast_possible_truncation)]

mod batch;
pub mod engine;
pub mod flows;
pub mod learning;
pub mod lookup;
pub mod numbers;
pub mod port;
mod sink;
mod source;
mod vlan;

pub use batch::{BatchResult, DEFAULT_BATCH, MAX_BATCH};
pub use engine::{AttachError, NumberMoved, PacketOutError, Scratch, Switch};
pub use flows::{FailMode, Flows, PacketIn};
pub use learning::{Hub, LearningBridge};
pub use lookup::{Decision, Forwarding, MacEntry, PortIndex, MAX_PORTS};
pub use port::{
    count_as_worker, counter_sets_for, Backend, CounterSet, Counters, Link, QueuePort, RingPort,
    SwitchPort, COUNTER_SETS,
};
