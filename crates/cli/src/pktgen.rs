//! `ringswitch pkt-gen`: netmap pkt-gen's options parsed into a
//! [`Plan`], run with netmap's output ([`Printer`]).

use std::path::Path;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use ringswitch_pktgen::print::Printer;
use ringswitch_pktgen::{Endpoint, MacAddr, Mode, PktGenError, Plan};

/// netmap pkt-gen's options.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PktGenArgs {
    /// Port to open: vale0:a, pipe{1, pipe}1, ...
    #[arg(short = 'i', long = "interface", value_name = "PORT")]
    pub(crate) interface: String,
    /// Mode.
    #[arg(
        short = 'f',
        long = "mode",
        value_parser = mode_parser(),
        default_value_t = Plan::DEFAULT_MODE
    )]
    pub(crate) mode: Mode,
    /// Packets to send or receive, over all threads (senders split it
    /// evenly, each sending its share); 0 runs until --duration or a
    /// signal.
    #[arg(short = 'n', long = "count", default_value_t = 0)]
    pub(crate) count: u64,
    /// Frame length in bytes, without the Ethernet CRC (14 up to the port's
    /// buffer size; 42 with ranges or random ports, 46 for txseq, 48 for
    /// txseq with -p > 1, 54 for ping).
    #[arg(short = 'l', long = "length", default_value_t = Plan::DEFAULT_FRAME_LEN)]
    pub(crate) length: u16,
    /// Slots handled per sync [default: 512; 1 for ping and pong].
    #[arg(short = 'b', long = "burst")]
    pub(crate) burst: Option<u32>,
    /// Send rate limit in packets per second, over all threads; 0 is
    /// unlimited.
    #[arg(short = 'R', long = "rate", default_value_t = 0)]
    pub(crate) rate: u64,
    /// Report interval in milliseconds; 0 prints no interval lines.
    #[arg(
        short = 'T',
        long = "interval",
        value_name = "MS",
        default_value_t = Plan::DEFAULT_INTERVAL_MS
    )]
    pub(crate) interval_ms: u64,
    /// Seconds to wait after opening the port, before starting.
    #[arg(
        short = 'w',
        long = "wait",
        value_name = "SECONDS",
        default_value_t = 0
    )]
    pub(crate) wait_s: u32,
    /// Source MAC.
    #[arg(short = 'S', long = "src-mac", default_value_t = Plan::DEFAULT_SRC_MAC)]
    pub(crate) src_mac: MacAddr,
    /// Destination MAC.
    #[arg(short = 'D', long = "dst-mac", default_value_t = Plan::DEFAULT_DST_MAC)]
    pub(crate) dst_mac: MacAddr,
    /// Source IPv4 address or range, optionally with a port or port range:
    /// IP[-IP][:PORT[-PORT]], e.g. 10.0.0.1-10.0.0.9:1000-1099.
    ///
    /// With a range every packet takes the next point: the port moves
    /// fastest, then the address, and after the last point it starts over
    /// (as netmap's pkt-gen). The IPv4 and UDP checksums are rewritten to
    /// match. Source and destination walk their ranges side by side, one
    /// step each per packet; each thread of -p walks them on its own.
    #[arg(
        short = 's',
        long = "src-ip",
        value_name = "IP[-IP][:PORT[-PORT]]",
        default_value_t = Plan::DEFAULT_SRC
    )]
    pub(crate) src: Endpoint,
    /// Destination IPv4 address or range, optionally with a port or port
    /// range: IP[-IP][:PORT[-PORT]] (walked as -s is).
    #[arg(
        short = 'd',
        long = "dst-ip",
        value_name = "IP[-IP][:PORT[-PORT]]",
        default_value_t = Plan::DEFAULT_DST
    )]
    pub(crate) dst: Endpoint,
    /// Random source port for every packet (not with a source port range).
    #[arg(short = 'z', long = "random-src-port")]
    pub(crate) random_src_port: bool,
    /// Random destination port for every packet (not with a destination
    /// port range).
    #[arg(short = 'Z', long = "random-dst-port")]
    pub(crate) random_dst_port: bool,
    /// Threads: -p N runs N threads, thread i on ring pair i of the port
    /// (at most the port's TX rings for senders, RX rings for receivers;
    /// create the port with @conf:rings=N). Not for ping and pong.
    ///
    /// With -p 1 the port stays whole: senders use TX ring 0, receivers
    /// read every RX ring. With -p N > 1 senders use TX rings 0..N-1 (any
    /// others stay unused); receivers spread every RX ring over the
    /// threads (thread i reads rings i, i+N, ...). -n and -R are totals
    /// over the threads, and the interval lines and the summary add the
    /// threads up. Each txseq thread numbers its frames on its own and
    /// writes its index (0..N-1) after the number; rxseq tracks each
    /// sender thread's numbers apart.
    #[arg(short = 'p', long = "threads", default_value_t = Plan::DEFAULT_THREADS)]
    pub(crate) threads: u32,
    /// Spin instead of sleeping when the ring is full or empty (the
    /// default spins for a window that adapts to what pays, then sleeps).
    #[arg(long, conflicts_with = "blocking")]
    pub(crate) busy: bool,
    /// Sleep at once when the ring is full or empty: never spin.
    #[arg(long)]
    pub(crate) blocking: bool,
    /// Print the report as one JSON object on the last line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) duration: Option<f64>,
}

impl PktGenArgs {
    /// The plan these options ask for (`--json` is how it is printed, not
    /// what it does).
    pub(crate) fn plan(&self) -> Plan {
        Plan {
            port: self.interface.clone(),
            mode: self.mode,
            count: self.count,
            frame_len: self.length,
            burst: self.burst,
            rate_pps: self.rate,
            interval_ms: self.interval_ms,
            wait_s: self.wait_s,
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            src: self.src,
            dst: self.dst,
            random_src_port: self.random_src_port,
            random_dst_port: self.random_dst_port,
            threads: self.threads,
            busy: self.busy,
            blocking: self.blocking,
            duration_s: self.duration,
        }
    }
}

/// `-f`'s values: each mode's name, with what it does as its help.
fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(Mode::ALL.map(|m| PossibleValue::new(m.name()).help(m.about())))
        .try_map(|name| name.parse::<Mode>())
}

/// Runs pkt-gen on the daemon at `socket`, printing as netmap's pkt-gen.
pub(crate) fn run(socket: &Path, args: &PktGenArgs) -> Result<(), PktGenError> {
    let mut printer = Printer::new(args.json);
    ringswitch_pktgen::run(&args.plan(), socket, &mut printer).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: PktGenArgs,
    }

    fn parse(argv: &[&str]) -> Result<PktGenArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("pkt-gen").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_are_the_librarys() {
        let a = parse(&["-i", "vale0:a"]).unwrap();
        assert_eq!(a.plan(), Plan::new("vale0:a"));
        assert!(!a.json);
        assert!(parse(&[]).is_err(), "-i is required");
    }

    #[test]
    fn short_flags() {
        let a = parse(&[
            "-i",
            "pipe{1",
            "-f",
            "txseq",
            "-n",
            "1000",
            "-l",
            "128",
            "-b",
            "64",
            "-R",
            "10000",
            "-T",
            "500",
            "-w",
            "2",
            "-S",
            "02:00:00:00:00:02",
            "-D",
            "02:00:00:00:00:03",
            "-s",
            "192.168.1.1",
            "-d",
            "192.168.1.2:9",
            "-z",
            "-Z",
            "-p",
            "1",
            "--busy",
            "--json",
            "--duration",
            "1.5",
        ])
        .unwrap();
        assert!(a.json);
        assert_eq!(a.plan(), ringswitch_pktgen::plan::examples::every_option());
        let long = parse(&[
            "--interface=x",
            "--mode=ping",
            "--count=3",
            "--length=64",
            "--burst=2",
            "--rate=5",
            "--interval=7",
            "--wait=1",
            "--src-mac=00:00:00:00:00:09",
            "--dst-mac=00:00:00:00:00:0a",
            "--src-ip=10.0.0.1-10.0.0.2",
            "--dst-ip=10.0.0.3:1-2",
            "--random-src-port",
            "--random-dst-port",
            "--threads=1",
            "--duration=2",
        ])
        .unwrap()
        .plan();
        assert_eq!(
            (
                long.mode,
                long.count,
                long.frame_len,
                long.burst,
                long.rate_pps
            ),
            (Mode::Ping, 3, 64, Some(2), 5)
        );
        assert_eq!(
            (long.interval_ms, long.wait_s, long.duration_s),
            (7, 1, Some(2.0))
        );
        assert_eq!(long.src.to_string(), "10.0.0.1-10.0.0.2");
        assert_eq!(long.dst.to_string(), "10.0.0.3:1-2");
        assert!(long.random_src_port && long.random_dst_port);
        for m in Mode::ALL {
            assert_eq!(parse(&["-i", "x", "-f", m.name()]).unwrap().mode, m);
        }
        assert!(parse(&["-i", "x", "-f", "bogus"]).is_err());
        assert!(parse(&["-i", "x", "-S", "zz"]).is_err());
        assert!(parse(&["-i", "x", "-s", "10.0.0.2-10.0.0.1"]).is_err());
        assert!(parse(&["-i", "x", "-s", "10.0.0.1:2-1"]).is_err());
        // --duration=-1 parses; the plan's check refuses it.
        let p = parse(&["-i", "x", "--duration=-1"]).unwrap().plan();
        assert_eq!(p.duration_s, Some(-1.0));
        assert!(matches!(p.check(), Err(PktGenError::Duration)));
    }

    #[test]
    fn backwards_ranges_stop_at_parsing_with_the_option_named() {
        let e = parse(&["-i", "x", "-d", "10.0.0.9-10.0.0.1"]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("'--dst-ip <IP[-IP][:PORT[-PORT]]>'")
                && text.contains(
                    "the address range 10.0.0.9-10.0.0.1 runs backwards: the first address must not be above the last"
                ),
            "{text}"
        );
    }
}
