//! Why pkt-gen could not run.

use ringswitch_client::ClientError;

use crate::plan::Mode;

/// Why pkt-gen could not run.
#[derive(Debug, thiserror::Error)]
pub enum PktGenError {
    /// `-p 0`.
    #[error("-p needs at least one thread")]
    NoThreads,
    /// `-p` > 1 for ping or pong.
    #[error("{mode} runs in one thread; -p {threads} is only for tx, rx, txseq and rxseq")]
    ThreadsForMode {
        /// Mode.
        mode: Mode,
        /// Threads asked for.
        threads: u32,
    },
    /// `-p` beyond the rings of the port.
    #[error(
        "-p {threads} needs {threads} {dir} rings, but port {port} has {tx_rings} TX and {rx_rings} RX rings; \
         create it with enough rings, e.g. {example}"
    )]
    TooFewRings {
        /// Port.
        port: String,
        /// Threads asked for.
        threads: u32,
        /// "TX" for senders, "RX" for receivers.
        dir: &'static str,
        /// The port's TX rings.
        tx_rings: u32,
        /// The port's RX rings.
        rx_rings: u32,
        /// The port name with `@conf:rings=N`.
        example: String,
    },
    /// `-R` lower than `-p`: some thread would get no rate at all.
    #[error(
        "-R {rate} is split over the {threads} threads of -p, so it must be at least {threads}"
    )]
    RateBelowThreads {
        /// Rate asked for.
        rate: u64,
        /// Threads asked for.
        threads: u32,
    },
    /// `-z`/`-Z` with a port range.
    #[error("{flag} picks a random {side} port for every packet; it cannot be combined with the {side} port range {range}")]
    RandomWithRange {
        /// `-z` or `-Z`.
        flag: &'static str,
        /// "source" or "destination".
        side: &'static str,
        /// The range given.
        range: String,
    },
    /// `-b 0`.
    #[error("the burst must be at least one packet")]
    Burst,
    /// `--duration` not a positive number of seconds.
    #[error("the duration must be a positive number of seconds, at most a year")]
    Duration,
    /// `-l` below what the mode needs.
    #[error("{mode} needs frames of at least {min} bytes{why}, but -l {len} was given")]
    FrameTooShort {
        /// Mode.
        mode: Mode,
        /// Given length.
        len: usize,
        /// Least length for the mode.
        min: usize,
        /// What asks for more than the mode alone ("" or " with ...").
        why: &'static str,
    },
    /// `-l` beyond the port's buffers.
    #[error("frames of {len} bytes do not fit the {buf_size}-byte buffers of port {port}")]
    FrameTooLong {
        /// Port.
        port: String,
        /// Given length.
        len: usize,
        /// The port's buffer size.
        buf_size: u32,
    },
    /// The port could not be opened.
    #[error("cannot open port {port}")]
    Open {
        /// Port.
        port: String,
        /// Cause.
        #[source]
        source: ClientError,
    },
    /// Waiting on the port failed.
    #[error("waiting on port {port} failed")]
    Wait {
        /// Port.
        port: String,
        /// Cause.
        #[source]
        source: ClientError,
    },
    /// The port could not be split into one piece per ring.
    #[error("cannot split port {port} into one piece per ring")]
    Split {
        /// Port.
        port: String,
        /// Cause.
        #[source]
        source: ClientError,
    },
    /// A thread could not be started.
    #[error("cannot start a pkt-gen thread")]
    Spawn(#[source] std::io::Error),
    /// The signal handlers could not be installed.
    #[error("cannot install the SIGINT and SIGTERM handlers")]
    Signal(#[source] std::io::Error),
}
