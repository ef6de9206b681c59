//! `ringswitch ctl`: vale-ctl for a running daemon.

use std::path::Path;

use clap::{Args, Subcommand};
use ringswitch_control::proto::{
    AttachReply, FailMode, FlowEntry, HostSpec, NicMode, NicSpec, OpenFlowSpec,
};
use ringswitch_control::{
    Connection, MacEntry, PortInfo, PortKind, PortStats, PortVlan, Request, SwitchInfo,
    VhostUserSpec, VlanError, VlanSet, WorkerStats,
};

#[derive(Args)]
pub struct CtlArgs {
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: CtlCmd,
}

#[derive(Subcommand)]
enum CtlCmd {
    /// Switches: add, del, list.
    Switch {
        #[command(subcommand)]
        op: SwitchOp,
    },
    /// Persistent ports: add, del, list.
    Port {
        #[command(subcommand)]
        op: PortOp,
    },
    /// Per-port counters.
    Stats {
        /// Only this switch.
        switch: Option<String>,
    },
    /// The workers: their share of time busy and asleep, CPU, wake-ups,
    /// batches, frames, the average batch and cycles per frame, since each
    /// started.
    Workers,
    /// A switch's learned MAC addresses.
    Macs {
        /// Switch name.
        switch: String,
    },
    /// A switch's flow tables, as `ovs-ofctl dump-flows` prints them.
    Flows {
        /// Switch name.
        switch: String,
    },
    /// Attach a NIC (AF_XDP, or AF_PACKET where XDP cannot attach) and/or
    /// a host-stack port (a TAP interface) to a switch, like vale-ctl -a/-h:
    /// `attach vale0 eth0`, `attach vale0 --host tap0`, `attach vale0 eth0
    /// --host` (the TAP is then named eth0^); `attach vale0 --host tap0
    /// --trunk 10,20` (a trunk to the host).
    Attach(AttachArgs),
    /// Detach an interface port (vale0:eth0): the XDP program is removed,
    /// a TAP deleted, and the interface is the kernel's again.
    Detach {
        /// Port name (vale0:eth0), or a switch followed by the interface.
        name: String,
        /// The interface, when the first argument is only the switch.
        ifname: Option<String>,
    },
    /// Restart the daemon in place, with the same command line, from a
    /// new binary (by default the one at the path it was started from,
    /// so: install the new version, then run this). Switches, persistent
    /// ports (with --config) and VM ports come back; ports and pipes
    /// opened on demand do not. Waits until the new daemon answers.
    Upgrade {
        /// The daemon binary to run (it must take the running daemon's
        /// options; default: the running daemon's own path).
        #[arg(long, value_name = "PATH")]
        binary: Option<String>,
        /// Seconds to wait for the new daemon to answer.
        #[arg(long, default_value_t = 60, value_name = "SECONDS")]
        wait: u64,
    },
}

#[derive(Args)]
struct AttachArgs {
    /// Switch (created if needed).
    switch: String,
    /// NIC to attach (same as --nic).
    #[arg(value_name = "IFNAME")]
    ifname: Option<String>,
    /// NIC to attach.
    #[arg(long, value_name = "IFNAME", conflicts_with = "ifname")]
    nic: Option<String>,
    /// Also (or only) a host-stack port: a TAP interface named NAME, or
    /// `<nic>^` when a NIC is given and NAME is left out.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    host: Option<String>,
    /// How to attach the NIC: auto (a device: native XDP, then generic XDP,
    /// then AF_PACKET; a veth or other software interface: AF_PACKET, which
    /// carries its stack's GSO frames and partial checksums), native,
    /// generic or packet.
    #[arg(long, value_enum, default_value = "auto")]
    mode: ModeArg,
    /// NIC queues to attach (default: all its receive queues).
    #[arg(long)]
    queues: Option<u32>,
    /// Queues of the host port's TAP.
    #[arg(long, default_value_t = 1)]
    host_queues: u32,
    #[command(flatten)]
    vlan: VlanArgs,
}

/// A switch port's VLANs, as Open vSwitch's `tag=` and `trunks=`; neither:
/// a trunk of every VLAN, where every frame passes as it is. (Boxed: a
/// setting is 512 bytes, and clap keeps every command's arguments inline.)
#[derive(Args)]
struct VlanArgs {
    /// Make it an access port of VLAN VID (1 to 4094), like Open vSwitch's
    /// tag=: its frames are untagged on the port and in VLAN VID inside the
    /// switch.
    #[arg(long, value_name = "VID", value_parser = access_vlan, conflicts_with = "trunk")]
    vlan: Option<Box<PortVlan>>,
    /// Make it a trunk of these VLANs (10,20,30-39, or all; 0 stands for
    /// untagged frames), like Open vSwitch's trunks=: tagged frames of them
    /// pass as they are, frames of other VLANs are dropped.
    #[arg(long, value_name = "LIST|all", value_parser = trunk_vlans)]
    trunk: Option<Box<PortVlan>>,
}

impl VlanArgs {
    fn get(&self) -> Option<PortVlan> {
        self.vlan.as_deref().or(self.trunk.as_deref()).cloned()
    }
}

fn access_vlan(s: &str) -> Result<Box<PortVlan>, VlanError> {
    let vid = s
        .trim()
        .parse::<u16>()
        .map_err(|_| VlanError::BadVid(s.trim().to_string()))?;
    PortVlan::access(vid).map(Box::new)
}

fn trunk_vlans(s: &str) -> Result<Box<PortVlan>, VlanError> {
    s.parse::<VlanSet>().map(|v| Box::new(PortVlan::Trunk(v)))
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Auto,
    Native,
    Generic,
    Packet,
}

impl From<ModeArg> for NicMode {
    fn from(m: ModeArg) -> NicMode {
        match m {
            ModeArg::Auto => NicMode::Auto,
            ModeArg::Native => NicMode::Native,
            ModeArg::Generic => NicMode::Generic,
            ModeArg::Packet => NicMode::Packet,
        }
    }
}

fn attach_request(a: &AttachArgs) -> Result<Request, Box<dyn std::error::Error>> {
    let nic = a.ifname.clone().or_else(|| a.nic.clone());
    if nic.is_none() && a.host.is_none() {
        return Err("attach needs an interface (attach vale0 eth0), --host NAME, or both".into());
    }
    Ok(Request::Attach {
        switch: a.switch.clone(),
        nic: nic.map(|ifname| NicSpec {
            ifname,
            mode: a.mode.into(),
            queues: a.queues,
        }),
        host: a.host.as_ref().map(|n| HostSpec {
            name: (!n.is_empty()).then(|| n.clone()),
            queues: a.host_queues,
        }),
        vlan: a.vlan.get(),
    })
}

#[derive(Subcommand)]
enum SwitchOp {
    /// Create a switch (e.g. vale0); with OpenFlow options, a switch run
    /// by OpenFlow 1.3 flow tables.
    Add {
        name: String,
        #[command(flatten)]
        openflow: OpenFlowArgs,
    },
    /// Change a switch's OpenFlow settings (the ones given).
    Set {
        name: String,
        #[command(flatten)]
        openflow: OpenFlowArgs,
    },
    /// Delete a switch with no ports.
    Del { name: String },
    /// List switches.
    List,
}

/// A switch's OpenFlow settings.
#[derive(Args)]
struct OpenFlowArgs {
    /// Listen for OpenFlow management connections (ovs-ofctl): unix:PATH,
    /// ptcp:PORT (loopback) or ptcp:PORT:ADDRESS.
    #[arg(long, value_name = "ADDRESS")]
    openflow_listen: Option<String>,
    /// Connect to an OpenFlow controller: tcp:HOST:PORT (reconnecting with
    /// backoff).
    #[arg(long, value_name = "tcp:HOST:PORT")]
    controller: Option<String>,
    /// With no controller connected, keep the flows (secure) or fall back
    /// to the learning bridge (standalone).
    #[arg(long, value_name = "secure|standalone", value_parser = parse_fail_mode)]
    fail_mode: Option<FailMode>,
}

fn parse_fail_mode(s: &str) -> Result<FailMode, String> {
    match s {
        "secure" => Ok(FailMode::Secure),
        "standalone" => Ok(FailMode::Standalone),
        _ => Err(format!(
            "{s:?} is not a fail mode: use secure or standalone"
        )),
    }
}

impl OpenFlowArgs {
    fn spec(&self) -> OpenFlowSpec {
        OpenFlowSpec {
            listen: self.openflow_listen.clone(),
            controller: self.controller.clone(),
            fail_mode: self.fail_mode,
        }
    }
}

#[derive(Subcommand)]
enum PortOp {
    /// Create a persistent port: vale0:a, vale0:a@conf:rings=2,slots=512, or
    /// pipe{1; with --vhost-user, a VM port (a vhost-user virtio-net device);
    /// with --passthrough, a port (or pipe end) whose rings a VM gets; with
    /// --vlan or --trunk, a switch port in VLANs.
    Add {
        name: String,
        /// Pass the port's rings through to a VM: ringswitch serves QEMU's
        /// ivshmem-doorbell device on this socket (QEMU: -chardev
        /// socket,id=X,path=PATH -device ivshmem-doorbell,chardev=X,vectors=N,
        /// N = the port's ring pairs).
        #[arg(long, value_name = "PATH", conflicts_with = "vhost_user")]
        passthrough: Option<String>,
        /// With --passthrough on a switch port: every frame in the rings
        /// carries a 12-byte virtio-net header, for a ptnet guest with
        /// checksum and TSO offloads (guest/ringswitch_pt with ptnet=1).
        #[arg(long, requires = "passthrough")]
        vnet_hdr: bool,
        /// With --passthrough on a switch port (without --vnet-hdr): its
        /// guest may be live-migrated. The guest is the ivshmem peer 0, so
        /// start QEMU's device with master=on (or auto): QEMU then copies
        /// the region to the destination, whose port (also --migratable)
        /// checks and adopts it once the guest runs there.
        #[arg(long, requires = "passthrough", conflicts_with = "vnet_hdr")]
        migratable: bool,
        /// Make it a VM port on this vhost-user socket. By default ringswitch
        /// listens there and the frontend connects (QEMU: -chardev
        /// socket,path=PATH,reconnect=1).
        #[arg(long, value_name = "PATH")]
        vhost_user: Option<String>,
        /// Connect to a socket the frontend listens on (QEMU: server=on),
        /// and keep reconnecting when it goes.
        #[arg(long, requires = "vhost_user")]
        client: bool,
        /// Queue pairs (multiqueue), 1 to 16.
        #[arg(long, default_value_t = 1, requires = "vhost_user")]
        queues: u16,
        /// Offer no checksum or TSO offloads to the guest.
        #[arg(long, requires = "vhost_user")]
        no_offloads: bool,
        /// The port's OpenFlow number, 1 to 254 (as Open vSwitch's
        /// ofport_request): give a VM's port the same number on every host
        /// it may move to, and flows naming it keep working there.
        #[arg(long, value_name = "N")]
        ofport: Option<u32>,
        #[command(flatten)]
        vlan: VlanArgs,
    },
    /// Delete a persistent port that no client has open.
    Del { name: String },
    /// List ports (of one switch, or all ports and pipes).
    List { switch: Option<String> },
}

/// The daemon may run in another directory: socket paths go as absolute.
fn absolute(path: &str) -> String {
    std::path::absolute(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

fn call(c: &mut Connection, r: Request) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    Ok(c.call(&r)?.0)
}

fn table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut w: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = w[i])
                } else {
                    format!("{c:>w$}", w = w[i])
                }
            })
            .collect();
        println!("{}", s.join("  ").trim_end());
    };
    line(headers.iter().map(|s| s.to_string()).collect());
    for r in rows {
        line(r);
    }
}

/// The request a command sends.
fn request(cmd: &CtlCmd) -> Result<Request, Box<dyn std::error::Error>> {
    Ok(match cmd {
        CtlCmd::Switch {
            op: SwitchOp::Add { name, .. },
        } => Request::SwitchAdd { name: name.clone() },
        CtlCmd::Switch {
            op: SwitchOp::Set { name, openflow },
        } => Request::SwitchSet {
            name: name.clone(),
            openflow: openflow.spec(),
        },
        CtlCmd::Flows { switch } => Request::Flows {
            switch: switch.clone(),
        },
        CtlCmd::Switch {
            op: SwitchOp::Del { name },
        } => Request::SwitchDel { name: name.clone() },
        CtlCmd::Switch { op: SwitchOp::List } => Request::SwitchList,
        CtlCmd::Port {
            op:
                PortOp::Add {
                    name,
                    passthrough,
                    vnet_hdr,
                    migratable,
                    vhost_user,
                    client,
                    queues,
                    no_offloads,
                    ofport,
                    vlan,
                },
        } => Request::PortAdd {
            name: name.clone(),
            vhost_user: vhost_user.as_ref().map(|path| VhostUserSpec {
                path: absolute(path),
                client: *client,
                queues: *queues,
                offloads: !*no_offloads,
            }),
            passthrough: passthrough.as_deref().map(absolute),
            vnet_hdr: *vnet_hdr,
            migratable: *migratable,
            vlan: vlan.get(),
            ofport: *ofport,
        },
        CtlCmd::Port {
            op: PortOp::Del { name },
        } => Request::PortDel { name: name.clone() },
        CtlCmd::Port {
            op: PortOp::List { switch },
        } => Request::PortList {
            switch: switch.clone(),
        },
        CtlCmd::Stats { switch } => Request::Stats {
            switch: switch.clone(),
        },
        CtlCmd::Workers => Request::Workers,
        CtlCmd::Macs { switch } => Request::Macs {
            switch: switch.clone(),
        },
        CtlCmd::Attach(a) => attach_request(a)?,
        CtlCmd::Upgrade { binary, .. } => Request::Upgrade {
            binary: binary.as_deref().map(absolute),
        },
        CtlCmd::Detach { name, ifname } => {
            let name = match ifname {
                Some(i) => format!("{name}:{i}"),
                None => name.clone(),
            };
            Request::Detach { name }
        }
    })
}

pub fn run(socket: &Path, a: CtlArgs) -> Result<(), Box<dyn std::error::Error>> {
    if let CtlCmd::Upgrade { wait, .. } = &a.cmd {
        return upgrade(socket, request(&a.cmd)?, *wait, a.json);
    }
    let req = request(&a.cmd)?;
    let mut c = Connection::connect(socket)?;
    let v = call(&mut c, req)?;
    // A switch made with OpenFlow settings gets them in a second request.
    if let CtlCmd::Switch {
        op: SwitchOp::Add { name, openflow },
    } = &a.cmd
    {
        let spec = openflow.spec();
        if !spec.is_empty() {
            call(
                &mut c,
                Request::SwitchSet {
                    name: name.clone(),
                    openflow: spec,
                },
            )?;
        }
    }
    if let (CtlCmd::Flows { .. }, true) = (&a.cmd, a.json) {
        let v: Vec<FlowEntry> = serde_json::from_value(v)?;
        let mut out = Vec::new();
        for e in &v {
            let f = crate::flow_text::decode(e)?;
            out.push(serde_json::json!({
                "table": e.table_id,
                "priority": e.priority,
                "cookie": format!("{:#x}", e.cookie),
                "duration_ms": e.duration_ms,
                "n_packets": e.n_packets,
                "n_bytes": e.n_bytes,
                "idle_timeout": e.idle_timeout,
                "hard_timeout": e.hard_timeout,
                "match": crate::flow_text::match_text(&f),
                "actions": crate::flow_text::instructions(&f.instructions),
            }));
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    match &a.cmd {
        CtlCmd::Switch { op: SwitchOp::List } => {
            let v: Vec<SwitchInfo> = serde_json::from_value(v)?;
            table(
                &["SWITCH", "PORTS", "MACS", "OPENFLOW"],
                v.into_iter()
                    .map(|s| {
                        let of = match &s.openflow {
                            None => "-".to_string(),
                            Some(o) => {
                                let mut w = Vec::new();
                                if let Some(l) = &o.listen {
                                    w.push(format!("listen={l}"));
                                }
                                if let Some(c) = &o.controller {
                                    w.push(format!("controller={c}"));
                                }
                                w.push(format!(
                                    "fail-mode={}",
                                    match o.fail_mode.unwrap_or_default() {
                                        FailMode::Secure => "secure",
                                        FailMode::Standalone => "standalone",
                                    }
                                ));
                                if let Some(n) = s.openflow_connections {
                                    w.push(format!("connections={n}"));
                                }
                                // Drops only when there are some.
                                if let Some(n) = s.packet_in_dropped.filter(|&n| n > 0) {
                                    w.push(format!("packet-in-dropped={n}"));
                                }
                                if let Some(n) = s.flows_truncated.filter(|&n| n > 0) {
                                    w.push(format!("truncated={n}"));
                                }
                                w.join(" ")
                            }
                        };
                        vec![s.name, s.ports.to_string(), s.macs.to_string(), of]
                    })
                    .collect(),
            );
        }
        CtlCmd::Flows { .. } => {
            let v: Vec<FlowEntry> = serde_json::from_value(v)?;
            for e in &v {
                let f = crate::flow_text::decode(e)?;
                println!("{}", crate::flow_text::line(e, &f));
            }
        }
        CtlCmd::Port {
            op: PortOp::List { .. },
        } => {
            let v: Vec<PortInfo> = serde_json::from_value(v)?;
            table(
                &[
                    "PORT",
                    "KIND",
                    "OPEN",
                    "PERSISTENT",
                    "RINGS",
                    "SLOTS",
                    "BUF/SOCKET/IF",
                    "WORKER",
                    "VLAN",
                ],
                v.into_iter()
                    .map(|p| {
                        let (rings, slots, buf) = match (&p.geometry, &p.vhost_user) {
                            (Some(g), _) if p.passthrough.is_some() => {
                                let t = p.passthrough.as_ref().expect("checked");
                                (
                                    format!("{}/{}", g.tx_rings, g.rx_rings),
                                    format!("{}/{}", g.tx_slots, g.rx_slots),
                                    format!(
                                        "passthrough{}{} {}",
                                        if t.vnet_hdr { " vnet-hdr" } else { "" },
                                        if t.migratable { " migratable" } else { "" },
                                        t.path
                                    ),
                                )
                            }
                            _ if p.iface.is_some() => {
                                let i = p.iface.as_ref().expect("checked");
                                (
                                    format!("{}/{}", i.queues, i.queues),
                                    "-".into(),
                                    format!("{} {}", i.ifname, i.driver),
                                )
                            }
                            (Some(g), _) => (
                                format!("{}/{}", g.tx_rings, g.rx_rings),
                                format!("{}/{}", g.tx_slots, g.rx_slots),
                                g.buf_size.to_string(),
                            ),
                            (None, Some(v)) => (
                                format!("{}/{}", v.spec.queues, v.spec.queues),
                                "-".into(),
                                format!(
                                    "{} {}",
                                    if v.spec.client { "client" } else { "server" },
                                    v.spec.path
                                ),
                            ),
                            (None, None) => ("-".into(), "-".into(), "-".into()),
                        };
                        vec![
                            p.name,
                            match p.kind {
                                PortKind::Vale => "vale",
                                PortKind::Pipe => "pipe",
                                PortKind::VhostUser => "vhost-user",
                                PortKind::Nic => "nic",
                                PortKind::Host => "host",
                            }
                            .into(),
                            if p.open { "yes" } else { "no" }.into(),
                            if p.persistent { "yes" } else { "no" }.into(),
                            rings,
                            slots,
                            buf,
                            p.worker
                                .map(|w| w.to_string())
                                .unwrap_or_else(|| "-".into()),
                            p.vlan.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
                        ]
                    })
                    .collect(),
            );
        }
        CtlCmd::Stats { .. } => {
            let v: Vec<PortStats> = serde_json::from_value(v)?;
            table(
                &[
                    "PORT",
                    "TX_PKTS",
                    "TX_BYTES",
                    "RX_PKTS",
                    "RX_BYTES",
                    "DROP_FULL",
                    "DROP_BAD",
                    "DROP_SHORT",
                    "DROP_LONG",
                    "NO_DEST",
                    "DROP_VLAN",
                    "DROP_DOWN",
                    "DROP_KERNEL",
                    "REINITS",
                ],
                v.into_iter()
                    .map(|s| {
                        vec![
                            s.name,
                            s.tx_packets.to_string(),
                            s.tx_bytes.to_string(),
                            s.rx_packets.to_string(),
                            s.rx_bytes.to_string(),
                            s.drop_rx_full.to_string(),
                            s.drop_malformed.to_string(),
                            s.drop_short.to_string(),
                            s.drop_long.to_string(),
                            s.drop_no_dest.to_string(),
                            s.drop_vlan.to_string(),
                            s.drop_link_down.to_string(),
                            s.drop_kernel.to_string(),
                            s.ring_reinits.to_string(),
                        ]
                    })
                    .collect(),
            );
        }
        CtlCmd::Workers => {
            let v: Vec<WorkerStats> = serde_json::from_value(v)?;
            let pct = |part: u64, whole: u64| {
                if whole == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}", part as f64 * 100.0 / whole as f64)
                }
            };
            let per = |a: u64, b: u64| {
                if b == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}", a as f64 / b as f64)
                }
            };
            table(
                &[
                    "WORKER",
                    "SOURCES",
                    "BUSY%",
                    "ASLEEP%",
                    "CPU%",
                    "WAKEUPS",
                    "BATCHES",
                    "FRAMES",
                    "PER_BATCH",
                    "CYC/FRAME",
                ],
                v.into_iter()
                    .map(|w| {
                        vec![
                            w.worker.to_string(),
                            w.sources.to_string(),
                            pct(w.busy_ns, w.uptime_ns),
                            pct(w.sleep_ns, w.uptime_ns),
                            if w.cpu_ns == 0 {
                                "-".into()
                            } else {
                                pct(w.cpu_ns, w.uptime_ns)
                            },
                            w.wakeups.to_string(),
                            w.batches.to_string(),
                            w.packets.to_string(),
                            per(w.packets, w.batches),
                            per(w.busy_cycles, w.packets),
                        ]
                    })
                    .collect(),
            );
        }
        CtlCmd::Macs { .. } => {
            let v: Vec<MacEntry> = serde_json::from_value(v)?;
            table(
                &["MAC", "VLAN", "PORT", "AGE_S"],
                v.into_iter()
                    .map(|m| vec![m.mac, m.vlan.to_string(), m.port, m.age_s.to_string()])
                    .collect(),
            );
        }
        CtlCmd::Attach(_) => {
            let v: AttachReply = serde_json::from_value(v)?;
            for p in v.ports {
                let why = if p.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", p.reason)
                };
                println!(
                    "attached {} as {} ({}, {} queue{}){why}",
                    p.ifname,
                    p.port,
                    p.driver,
                    p.queues,
                    if p.queues == 1 { "" } else { "s" }
                );
            }
        }
        _ => {}
    }
    Ok(())
}

/// Which daemon instance answers on `socket` (see the daemon's `Hello`),
/// if one does.
fn instance(socket: &Path) -> Option<u64> {
    let mut c = Connection::connect(socket).ok()?;
    let v = c
        .call(&Request::Hello {
            version: ringswitch_control::proto::PROTOCOL_VERSION,
        })
        .ok()?
        .0;
    v.get("instance").and_then(|i| i.as_u64())
}

/// `ctl upgrade`: asks for it, then waits (at most `wait` seconds) until a
/// new daemon instance answers on the socket.
fn upgrade(
    socket: &Path,
    req: Request,
    wait: u64,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    use std::time::{Duration, Instant};
    let mut c = Connection::connect(socket)?;
    let before = instance(socket);
    let v = call(&mut c, req)?;
    drop(c);
    let asked = Instant::now();
    let binary = v
        .get("binary")
        .and_then(|b| b.as_str())
        .unwrap_or("?")
        .to_string();
    let version = v
        .get("version")
        .and_then(|b| b.as_str())
        .unwrap_or("?")
        .to_string();
    let pid = v.get("pid").and_then(|p| p.as_u64()).unwrap_or(0);
    let deadline = asked + Duration::from_secs(wait);
    let mut next_note = asked + Duration::from_secs(5);
    loop {
        if let Some(now) = instance(socket) {
            if Some(now) != before {
                break;
            }
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the daemon (pid {pid}) stopped to run {binary} but no new daemon answered on {} \
                 within {wait} s: see its log",
                socket.display()
            )
            .into());
        }
        if Instant::now() >= next_note {
            eprintln!(
                "waiting for the new daemon to answer ({} s)...",
                asked.elapsed().as_secs()
            );
            next_note += Duration::from_secs(5);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ms = asked.elapsed().as_millis();
    if json {
        let out = serde_json::json!({
            "pid": pid,
            "binary": binary,
            "version": version,
            "answering_after_ms": ms,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("upgraded: the daemon (pid {pid}) runs {binary} ({version}), answering again after {ms} ms");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ctl: CtlArgs,
    }

    fn parse(argv: &[&str]) -> Result<Request, String> {
        let c = Cli::try_parse_from(std::iter::once("ctl").chain(argv.iter().copied()))
            .map_err(|e| e.to_string())?;
        request(&c.ctl.cmd).map_err(|e| e.to_string())
    }

    fn vlan_of(r: &Request) -> Option<String> {
        match r {
            Request::PortAdd { vlan, .. } | Request::Attach { vlan, .. } => {
                vlan.as_ref().map(ToString::to_string)
            }
            _ => panic!("not a port-add or attach: {r:?}"),
        }
    }

    #[test]
    fn vlan_options_make_access_ports_and_trunks() {
        let access = Some("access:10".to_string());
        for argv in [
            &["port", "add", "vale0:a", "--vlan", "10"][..],
            &[
                "port",
                "add",
                "vale0:vm",
                "--vhost-user",
                "/tmp/vm.sock",
                "--vlan",
                "10",
            ],
            &["attach", "vale0", "--host", "tap0", "--vlan", "10"],
            &["attach", "vale0", "eth0", "--vlan", "10"],
        ] {
            assert_eq!(vlan_of(&parse(argv).unwrap()), access, "{argv:?}");
        }
        let r = parse(&["port", "add", "vale0:a", "--trunk", "20, 10,30-32"]).unwrap();
        assert_eq!(vlan_of(&r).as_deref(), Some("trunk:10,20,30-32"));
        let r = parse(&["attach", "vale0", "--host", "tap0", "--trunk", "all"]).unwrap();
        assert_eq!(vlan_of(&r).as_deref(), Some("trunk:all"));
        let r = parse(&["port", "add", "vale0:a", "--trunk", "0,10"]).unwrap();
        assert_eq!(vlan_of(&r).as_deref(), Some("trunk:0,10"));
        // Neither: the daemon's default (a trunk of every VLAN), not sent.
        let r = parse(&["port", "add", "vale0:a"]).unwrap();
        assert_eq!(vlan_of(&r), None);
        let r = parse(&["attach", "vale0", "eth0"]).unwrap();
        assert_eq!(vlan_of(&r), None);
    }

    #[test]
    fn bad_vlan_options_are_refused_in_plain_words() {
        let e = parse(&["port", "add", "vale0:a", "--vlan", "10", "--trunk", "20"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        let e = parse(&["attach", "vale0", "eth0", "--vlan", "1", "--trunk", "all"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        let e = parse(&["port", "add", "vale0:a", "--vlan", "0"]).unwrap_err();
        assert!(
            e.contains("an access port needs a VLAN from 1 to 4094, not 0"),
            "{e}"
        );
        let e = parse(&["port", "add", "vale0:a", "--vlan", "4095"]).unwrap_err();
        assert!(e.contains("'4095' is not a VLAN ID"), "{e}");
        let e = parse(&["port", "add", "vale0:a", "--vlan", "ten"]).unwrap_err();
        assert!(e.contains("'ten' is not a VLAN ID"), "{e}");
        let e = parse(&["port", "add", "vale0:a", "--trunk", "30-20"]).unwrap_err();
        assert!(e.contains("VLAN range '30-20' is backwards"), "{e}");
        let e = parse(&["port", "add", "vale0:a", "--trunk", ","]).unwrap_err();
        assert!(e.contains("a trunk needs at least one VLAN"), "{e}");
    }
}
