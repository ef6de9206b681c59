//! The daemon's persistent configuration (`serve --config FILE`): what
//! `switch-add`, `port-add` and `attach` created, kept as the requests that
//! recreate it, saved after every change and replayed at start. Ports opened
//! on demand by clients are not configuration and are not saved. A port's
//! VLANs go with the request that makes it, when it has any (files written
//! before VLANs, without them, load as ports without VLANs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ringswitch_control::proto::*;
use ringswitch_ring::Geometry;
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::{Kind, Registry, DIRECT_APP};

/// Format version of the file.
const VERSION: u32 = 1;

/// The file: the requests, in an order that replays (switches first), and
/// the OpenFlow port number of each port they make, for the port to come
/// back at it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    version: u32,
    requests: Vec<Request>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    port_numbers: BTreeMap<String, u32>,
}

/// A saved configuration: the requests, and the OpenFlow port number of
/// each port they make.
pub type SavedConfig = (Vec<Request>, BTreeMap<String, u32>);

/// What an interface port was attached with, to attach it again.
#[derive(Clone, Debug)]
pub(super) enum IfaceRequest {
    Nic(NicSpec),
    Host(HostSpec),
}

/// `@conf:` spelling all of a geometry.
fn conf(g: &Geometry) -> String {
    format!(
        "@conf:tx-rings={},rx-rings={},tx-slots={},rx-slots={},buf-size={}",
        g.tx_rings, g.rx_rings, g.tx_slots, g.rx_slots, g.buf_size
    )
}

/// Reads the configuration saved in `path`; none if it does not exist yet.
pub fn load_config(path: &Path) -> Result<SavedConfig, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    parse_saved(&text, path)
}

/// Parses the text of a configuration file read from `path` (named in
/// errors only): its requests. The file is untrusted input: any text gives
/// the requests or an error, never a panic (fuzzed by
/// `fuzz/fuzz_targets/config_file.rs`).
pub fn parse_config(text: &str, path: &Path) -> Result<Vec<Request>, String> {
    parse_saved(text, path).map(|(r, _)| r)
}

/// As [`parse_config`], with the ports' OpenFlow numbers.
pub fn parse_saved(text: &str, path: &Path) -> Result<SavedConfig, String> {
    let saved: Saved = serde_json::from_str(text)
        .map_err(|e| format!("{} is not a ringswitch configuration: {e}", path.display()))?;
    if saved.version != VERSION {
        return Err(format!(
            "{} has configuration version {}, this daemon reads version {VERSION}",
            path.display(),
            saved.version
        ));
    }
    Ok((saved.requests, saved.port_numbers))
}

impl Registry {
    /// Saves the configuration to `path` after every change.
    pub fn set_config_file(&mut self, path: PathBuf) {
        self.config = Some(path);
    }

    /// The requests that recreate the current configuration.
    pub fn saved_requests(&self) -> Vec<Request> {
        let mut out = Vec::new();
        for (name, s) in &self.switches {
            if s.persistent && !s.direct {
                out.push(Request::SwitchAdd { name: name.clone() });
                if let Some(o) = &s.openflow {
                    out.push(Request::SwitchSet {
                        name: name.clone(),
                        openflow: o.spec.clone(),
                    });
                }
            }
        }
        for (sname, s) in &self.switches {
            if s.direct {
                continue;
            }
            for (pname, p) in &s.ports {
                if pname == DIRECT_APP {
                    continue;
                }
                let vlan = (!p.port.vlan.is_default()).then(|| p.port.vlan.clone());
                match &p.kind {
                    // The number it asked for, if any: it comes back at the
                    // one it has (`port_numbers`) and still takes the one
                    // it asked for when its guest runs there.
                    Kind::Vm(vm) => out.push(Request::PortAdd {
                        name: format!("{sname}:{pname}"),
                        vhost_user: Some(vm.spec.clone()),
                        passthrough: None,
                        vnet_hdr: false,
                        migratable: false,
                        vlan,
                        ofport: s.switch.wanted_number(p.port.index),
                    }),
                    Kind::Iface(i) => {
                        let (nic, host) = match &i.request {
                            IfaceRequest::Nic(n) => (Some(n.clone()), None),
                            IfaceRequest::Host(h) => (None, Some(h.clone())),
                        };
                        out.push(Request::Attach {
                            switch: sname.clone(),
                            nic,
                            host,
                            vlan,
                        });
                    }
                    Kind::Ring(r) if r.persistent => out.push(Request::PortAdd {
                        name: format!("{sname}:{pname}{}", conf(&r.geometry)),
                        vhost_user: None,
                        passthrough: r.open_by.guest().map(|t| t.path().display().to_string()),
                        vnet_hdr: r.vnet.is_some(),
                        migratable: r.open_by.guest().is_some_and(|t| t.migratable()),
                        vlan,
                        ofport: None,
                    }),
                    Kind::Ring(_) => {}
                }
            }
        }
        for p in self.pipes.values() {
            if p.persistent {
                out.push(Request::PortAdd {
                    name: format!(
                        "{}{{{}{}",
                        p.base,
                        p.id,
                        conf(&p.region.layout().end_geometry(0))
                    ),
                    vhost_user: None,
                    passthrough: None,
                    vnet_hdr: false,
                    migratable: false,
                    vlan: None,
                    ofport: None,
                });
                // Passthrough ends after the pipe exists, with its sizes.
                for (end, o) in p.open_by.iter().enumerate() {
                    if let Some(t) = o.guest() {
                        out.push(Request::PortAdd {
                            name: format!("{}{}{}", p.base, if end == 0 { '{' } else { '}' }, p.id),
                            vhost_user: None,
                            passthrough: Some(t.path().display().to_string()),
                            vnet_hdr: false,
                            migratable: false,
                            vlan: None,
                            ofport: None,
                        });
                    }
                }
            }
        }
        out
    }

    /// The OpenFlow port number of every port the saved requests make.
    fn port_numbers(&self) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for s in self.switches.values().filter(|s| !s.direct) {
            for (pname, p) in &s.ports {
                let saved = match &p.kind {
                    Kind::Vm(_) | Kind::Iface(_) => true,
                    Kind::Ring(r) => r.persistent && pname != DIRECT_APP,
                };
                if saved {
                    out.insert(p.port.name.clone(), s.switch.number_of(p.port.index));
                }
            }
        }
        out
    }

    /// Ports made from now on by these names come back at these OpenFlow
    /// port numbers (read from the saved configuration before it is
    /// replayed); numbers that cannot be a port's are left out.
    pub fn set_port_numbers(&mut self, numbers: BTreeMap<String, u32>) {
        for (name, n) in numbers {
            if (1..=ringswitch_switch::MAX_PORTS).contains(&usize::try_from(n).unwrap_or(0)) {
                self.numbers.insert(name, n);
            }
        }
    }

    /// Writes the configuration file, if there is one (whole, to a
    /// temporary file then renamed, so a crash leaves the old or the new).
    pub fn save_config(&self) {
        let Some(path) = &self.config else { return };
        let saved = Saved {
            version: VERSION,
            requests: self.saved_requests(),
            port_numbers: self.port_numbers(),
        };
        let text = match serde_json::to_string_pretty(&saved) {
            Ok(t) => t + "\n",
            Err(e) => {
                warn!(error = %e, "cannot serialize the configuration");
                return;
            }
        };
        if let Err(e) = replace_file(path, &text) {
            warn!(path = %path.display(), error = %e, "cannot save the configuration");
        }
    }
}

/// Writes `text` as the whole of `path`: to a temporary file beside it,
/// then renamed over it, so a crash leaves the old text or the new.
pub(super) fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_config_reads_requests_and_refuses_the_rest_with_a_sentence() {
        let p = Path::new("/etc/rs.json");
        let ok = r#"{"version":1,"requests":[{"cmd":"switch-add","name":"vale0"}]}"#;
        assert_eq!(
            parse_config(ok, p).unwrap(),
            vec![Request::SwitchAdd {
                name: "vale0".into()
            }]
        );
        let e = parse_config("{\"version\":1", p).unwrap_err();
        assert!(
            e.starts_with("/etc/rs.json is not a ringswitch configuration"),
            "{e}"
        );
        let e = parse_config(r#"{"version":7,"requests":[]}"#, p).unwrap_err();
        assert!(e.contains("version 7"), "{e}");
        let e = parse_config(r#"{"version":1,"requests":[],"x":1}"#, p).unwrap_err();
        assert!(e.contains("not a ringswitch configuration"), "{e}");
    }

    #[test]
    fn vlans_are_kept_and_files_from_before_them_load() {
        let p = Path::new("/etc/rs.json");
        let before = r#"{"version":1,"requests":[{"cmd":"port-add","name":"vale0:a"},
            {"cmd":"attach","switch":"vale0","host":{"name":"tap0","queues":1}}]}"#;
        let r = parse_config(before, p).unwrap();
        assert!(
            matches!(
                &r[..],
                [
                    Request::PortAdd { vlan: None, .. },
                    Request::Attach { vlan: None, .. }
                ]
            ),
            "{r:?}"
        );
        let with = r#"{"version":1,"requests":[{"cmd":"port-add","name":"vale0:a","vlan":"access:10"},
            {"cmd":"attach","switch":"vale0","host":{"name":"tap0","queues":1},"vlan":"trunk:10,20"}]}"#;
        let r = parse_config(with, p).unwrap();
        let vlans: Vec<String> = r
            .iter()
            .filter_map(|q| match q {
                Request::PortAdd { vlan, .. } | Request::Attach { vlan, .. } => vlan.as_ref(),
                _ => None,
            })
            .map(ToString::to_string)
            .collect();
        assert_eq!(vlans, ["access:10", "trunk:10,20"]);
        let e = parse_config(
            r#"{"version":1,"requests":[{"cmd":"port-add","name":"vale0:a","vlan":"access:0"}]}"#,
            p,
        )
        .unwrap_err();
        assert!(
            e.contains("an access port needs a VLAN from 1 to 4094"),
            "{e}"
        );
    }
}
