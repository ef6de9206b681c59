//! netmap port names: `vale0:a`, `pipe{1`, `pipe}1`, `netmap:eth0`, with
//! optional `@conf:rings=N,slots=M` sizes.

use ringswitch_ring::layout::{Geometry, GeometryError};

/// Longest switch, port or pipe name.
pub const MAX_NAME_LEN: usize = 32;

/// Which end of a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PipeEnd {
    /// `{`: the first end.
    Master,
    /// `}`: the second end.
    Slave,
}

impl PipeEnd {
    /// 0 for `{`, 1 for `}`.
    pub fn index(self) -> usize {
        match self {
            PipeEnd::Master => 0,
            PipeEnd::Slave => 1,
        }
    }
    /// The character that names it.
    pub fn symbol(self) -> char {
        match self {
            PipeEnd::Master => '{',
            PipeEnd::Slave => '}',
        }
    }
}

/// What a name designates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Port `port` of switch `switch`.
    Vale {
        /// Switch name, including its `vale` prefix.
        switch: String,
        /// Port name.
        port: String,
    },
    /// One end of pipe `base{id`/`base}id`.
    Pipe {
        /// Pipe family name.
        base: String,
        /// Pipe id.
        id: String,
        /// Which end.
        end: PipeEnd,
    },
    /// A NIC (`netmap:eth0`).
    Nic {
        /// Interface name.
        ifname: String,
    },
}

impl Target {
    /// The key the daemon files a pipe under.
    pub fn pipe_key(base: &str, id: &str) -> String {
        format!("{base}{{}}{id}")
    }
}

/// A parsed port name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortName {
    /// What it names.
    pub target: Target,
    /// Sizes for a port created by this open, if given.
    pub conf: Option<Geometry>,
}

/// A name that could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    /// Empty string.
    #[error("the port name is empty")]
    Empty,
    /// Doesn't match any known form.
    #[error("'{0}' is not a port name: use vale<N>:<port>, <name>{{<id> / <name>}}<id> for pipes, or netmap:<ifname>")]
    Form(String),
    /// A component has bad characters or length.
    #[error("'{0}' is not a valid name part: use 1 to 32 letters, digits, '_', '-' or '.'")]
    Part(String),
    /// An unknown `@conf` key or value.
    #[error("'{0}' is not a valid @conf option: use rings, tx-rings, rx-rings, slots, tx-slots, rx-slots or buf-size with a number")]
    Conf(String),
    /// Sizes out of range.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
}

fn valid_part(s: &str) -> bool {
    // A trailing `^` names a host-stack port (`vale0:eth0^`), as in netmap.
    let body = s.strip_suffix('^').unwrap_or(s);
    !body.is_empty()
        && s.len() <= MAX_NAME_LEN
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn part(s: &str) -> Result<String, NameError> {
    if valid_part(s) {
        Ok(s.to_string())
    } else {
        Err(NameError::Part(s.to_string()))
    }
}

/// Parses the `@conf:` option list into a geometry.
fn parse_conf(opts: &str, base: Geometry) -> Result<Geometry, NameError> {
    let mut g = base;
    for kv in opts.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| NameError::Conf(kv.to_string()))?;
        let v: u32 = v.parse().map_err(|_| NameError::Conf(kv.to_string()))?;
        match k {
            "rings" => {
                g.tx_rings = v;
                g.rx_rings = v;
            }
            "tx-rings" => g.tx_rings = v,
            "rx-rings" => g.rx_rings = v,
            "slots" => {
                g.tx_slots = v;
                g.rx_slots = v;
            }
            "tx-slots" => g.tx_slots = v,
            "rx-slots" => g.rx_slots = v,
            "buf-size" => g.buf_size = v,
            _ => return Err(NameError::Conf(kv.to_string())),
        }
    }
    g.validate()?;
    Ok(g)
}

/// The port a pipe belongs to, which names the pipe with its id, as in
/// netmap: `vale7:q` of `vale7:q{1` (a different pipe from `vale1:q{1`),
/// `x` of `x{1`. `netmap:` is dropped, as libnetmap drops it before the
/// kernel sees the name: `netmap:x{1` is `x{1`.
fn pipe_base(s: &str) -> Result<String, NameError> {
    let s = s.strip_prefix("netmap:").unwrap_or(s);
    match s.split_once(':') {
        None => part(s),
        Some((sub, port)) => Ok(format!("{}:{}", part(sub)?, part(port)?)),
    }
}

/// A port name without its options: `vale0:a` of `vale0:a@conf:slots=64`
/// (the name as the switch and netmap's `ni_name` know it).
pub fn base_name(name: &str) -> &str {
    name.split_once('@').map_or(name, |(base, _)| base)
}

impl std::str::FromStr for PortName {
    type Err = NameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        // The options of `base_name`.
        let (base, conf_str) = match s.split_once('@') {
            None => (s, None),
            Some((b, opt)) => {
                let rest = opt
                    .strip_prefix("conf:")
                    .ok_or_else(|| NameError::Conf(opt.to_string()))?;
                (b, Some(rest))
            }
        };
        let is_pipe = base.contains(['{', '}']);
        let defaults = if is_pipe {
            Geometry::pipe_default()
        } else {
            Geometry::default()
        };
        let conf = conf_str.map(|c| parse_conf(c, defaults)).transpose()?;
        if let Some(pos) = base.find(['{', '}']) {
            let end = if base.as_bytes()[pos] == b'{' {
                PipeEnd::Master
            } else {
                PipeEnd::Slave
            };
            let id = &base[pos + 1..];
            return Ok(PortName {
                target: Target::Pipe {
                    base: pipe_base(&base[..pos])?,
                    id: part(id)?,
                    end,
                },
                conf,
            });
        }
        let (sub, port) = base
            .split_once(':')
            .ok_or_else(|| NameError::Form(s.to_string()))?;
        if sub == "netmap" {
            let ifname = port.trim_end_matches(['^', '*']);
            return Ok(PortName {
                target: Target::Nic {
                    ifname: part(ifname)?,
                },
                conf,
            });
        }
        if sub.starts_with("vale") {
            return Ok(PortName {
                target: Target::Vale {
                    switch: part(sub)?,
                    port: part(port)?,
                },
                conf,
            });
        }
        Err(NameError::Form(s.to_string()))
    }
}

impl std::fmt::Display for PortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.target {
            Target::Vale { switch, port } => write!(f, "{switch}:{port}"),
            Target::Pipe { base, id, end } => write!(f, "{base}{}{id}", end.symbol()),
            Target::Nic { ifname } => write!(f, "netmap:{ifname}"),
        }
    }
}

/// Checks a switch name (`vale` followed by anything valid).
pub fn check_switch_name(s: &str) -> Result<(), NameError> {
    if !s.starts_with("vale") {
        return Err(NameError::Form(s.to_string()));
    }
    part(s).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<PortName, NameError> {
        s.parse()
    }

    #[test]
    fn vale_names() {
        assert_eq!(
            p("vale0:a").unwrap().target,
            Target::Vale {
                switch: "vale0".into(),
                port: "a".into()
            }
        );
        assert_eq!(base_name("vale1:vm-2@conf:rings=4"), "vale1:vm-2");
        assert_eq!(base_name("pipe{1"), "pipe{1");
        let n = p("vale1:vm-2@conf:rings=4,slots=2048").unwrap();
        let g = n.conf.unwrap();
        assert_eq!(
            (g.tx_rings, g.rx_rings, g.tx_slots, g.rx_slots),
            (4, 4, 2048, 2048)
        );
        assert_eq!(n.to_string(), "vale1:vm-2");
    }

    #[test]
    fn pipe_names() {
        assert_eq!(
            p("pipe{1").unwrap().target,
            Target::Pipe {
                base: "pipe".into(),
                id: "1".into(),
                end: PipeEnd::Master
            }
        );
        assert_eq!(
            p("p}7").unwrap().target,
            Target::Pipe {
                base: "p".into(),
                id: "7".into(),
                end: PipeEnd::Slave
            }
        );
        assert_eq!(p("netmap:x{3").unwrap().to_string(), "x{3");
    }

    /// In netmap a pipe is named by its whole port name and id: the pipes
    /// of `vale7:q` and of `vale1:q` are different pipes.
    #[test]
    fn pipe_names_keep_their_port() {
        let a = p("vale7:q{1").unwrap();
        let b = p("vale1:q}1").unwrap();
        assert_eq!(
            a.target,
            Target::Pipe {
                base: "vale7:q".into(),
                id: "1".into(),
                end: PipeEnd::Master
            }
        );
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("vale7:q{1".into(), "vale1:q}1".into())
        );
        let key = |n: &PortName| match &n.target {
            Target::Pipe { base, id, .. } => Target::pipe_key(base, id),
            t => panic!("{t:?}"),
        };
        assert_ne!(key(&a), key(&b));
        assert_eq!(key(&a), key(&p("vale7:q}1").unwrap()));
        assert_eq!(key(&p("q{1").unwrap()), key(&p("netmap:q}1").unwrap()));
        assert!(matches!(p("a:b:c{1"), Err(NameError::Part(_))));
        assert!(matches!(p(":q{1"), Err(NameError::Part(_))));
        assert!(matches!(p("vale0:{1"), Err(NameError::Part(_))));
    }

    #[test]
    fn nic_names() {
        assert_eq!(
            p("netmap:eth0^").unwrap().target,
            Target::Nic {
                ifname: "eth0".into()
            }
        );
    }

    #[test]
    fn malformed_names() {
        assert_eq!(p(""), Err(NameError::Empty));
        assert!(matches!(p("foo"), Err(NameError::Form(_))));
        assert!(matches!(p("eth0:a"), Err(NameError::Form(_))));
        assert!(matches!(p("vale0:"), Err(NameError::Part(_))));
        assert!(matches!(p("vale0:a b"), Err(NameError::Part(_))));
        assert!(matches!(p("pipe{"), Err(NameError::Part(_))));
        assert!(matches!(
            p(&format!("vale0:{}", "x".repeat(40))),
            Err(NameError::Part(_))
        ));
        assert!(matches!(p("vale0:a@conf:rings=x"), Err(NameError::Conf(_))));
        assert!(matches!(
            p("vale0:a@conf:colour=3"),
            Err(NameError::Conf(_))
        ));
        assert!(matches!(p("vale0:a@foo"), Err(NameError::Conf(_))));
        assert!(matches!(
            p("vale0:a@conf:rings=17"),
            Err(NameError::Geometry(_))
        ));
        assert!(matches!(
            p("vale0:a@conf:slots=32"),
            Err(NameError::Geometry(_))
        ));
        assert!(p("vale0:a@conf:slots=1000").is_ok());
    }

    /// A slot's length is 16 bits: a buffer it cannot describe in full is
    /// refused with a sentence that says why and what is allowed.
    #[test]
    fn buffer_sizes_a_slot_cannot_express_are_refused() {
        for name in ["vale0:a@conf:buf-size=65536", "pipe{1@conf:buf-size=65536"] {
            let e = p(name).unwrap_err();
            assert!(matches!(e, NameError::Geometry(_)), "{name}: {e:?}");
            let msg = e.to_string();
            assert!(
                msg.contains("65536") && msg.contains("65472") && msg.contains("16-bit"),
                "{msg}"
            );
        }
        let g = p("vale0:a@conf:buf-size=65472").unwrap().conf.unwrap();
        assert_eq!(g.buf_size, 65472);
    }
}
