//! The VALE switch: a learning bridge whose workers copy packets from a
//! source port's TX ring into destination ports' private RX rings, batched
//! per destination, dropping and counting when a receiver is full.
#![warn(missing_docs)]

pub mod engine;
pub mod learning;
pub mod port;

pub use engine::{AttachError, BatchResult, Scratch, Switch, DEFAULT_BATCH, MAX_BATCH, MAX_PORTS};
pub use learning::{Decision, Forwarding, LearningBridge, PortIndex};
pub use port::{Counters, SwitchPort};
