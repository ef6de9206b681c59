//! Who may do what on the control socket.
//!
//! The kernel tells the daemon who is at the other end of each connection
//! (SO_PEERCRED and SO_PEERGROUPS, recorded at connect time, so a client
//! cannot pass its connection to someone else and change the answer). The
//! policy:
//!
//! - **administrators**: root, the daemon's own uid, and members of
//!   `--admin-group`, may do everything;
//! - **users**: members of `--allow-group` may open and close ports and
//!   pipes (creating switches and pipes on demand, as `open` does) and read
//!   lists and counters: `hello`, `open`, `close`, `switch-list`,
//!   `port-list`, `stats`, `macs`;
//! - anyone else is refused when they connect.
//!
//! What needs an administrator changes what the daemon holds beyond a
//! client's own ports, or reaches outside it: `switch-add`, `switch-del`,
//! `port-add` (persistent ports, vhost-user and passthrough sockets on
//! paths of the administrator's choice), `port-del`, `attach`, `detach`,
//! and `open` of `netmap:IF` (an application on a NIC's own rings sees the
//! host's traffic).

use ringswitch_control::proto::{ErrorCode, ErrorReply, Request};
use ringswitch_control::{PortName, SocketAccess, Target};

/// What a connection may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Open and close ports and pipes, read lists and counters.
    User,
    /// Everything.
    Admin,
}

/// The access policy of a daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The daemon's effective uid.
    pub daemon_uid: u32,
    /// `--allow-group`.
    pub allow_gid: Option<u32>,
    /// `--admin-group`.
    pub admin_gid: Option<u32>,
    /// `--vm-socket-group`.
    pub vm_gid: Option<u32>,
}

impl Policy {
    /// The role of a peer with effective `uid`, primary `gid` and
    /// supplementary `groups`; `None`: refused.
    pub fn role(&self, uid: u32, gid: u32, groups: &[u32]) -> Option<Role> {
        let member = |g: Option<u32>| g.is_some_and(|g| gid == g || groups.contains(&g));
        if uid == 0 || uid == self.daemon_uid || member(self.admin_gid) {
            Some(Role::Admin)
        } else if member(self.allow_gid) {
            Some(Role::User)
        } else {
            None
        }
    }

    /// Whether the policy looks at groups at all.
    pub fn uses_groups(&self) -> bool {
        self.allow_gid.is_some() || self.admin_gid.is_some()
    }

    /// The groups the daemon serves, for a refusal ("..., root and group 1001").
    pub fn describe_groups(&self) -> String {
        match (self.allow_gid, self.admin_gid) {
            (None, None) => " and no group (see serve --allow-group)".into(),
            (Some(a), None) => format!(" and members of group {a}"),
            (None, Some(b)) => format!(" and members of group {b}"),
            (Some(a), Some(b)) => format!(" and members of groups {a} and {b}"),
        }
    }

    /// The control socket's mode: the owner alone without groups; the group
    /// too with one group (the file is given that group); with two
    /// different groups the file is open to all and the daemon's
    /// credential check is the only gate (a file has one group).
    pub fn control_socket_access(&self) -> SocketAccess {
        match (self.allow_gid, self.admin_gid) {
            (None, None) => SocketAccess::OWNER,
            (Some(g), None) | (None, Some(g)) => SocketAccess {
                mode: 0o660,
                gid: Some(g),
            },
            (Some(a), Some(b)) if a == b => SocketAccess {
                mode: 0o660,
                gid: Some(a),
            },
            (Some(_), Some(_)) => SocketAccess {
                mode: 0o666,
                gid: None,
            },
        }
    }

    /// The mode of VM-facing sockets (vhost-user, passthrough): they hand a
    /// port to whoever connects, so only the owner and the group given for
    /// them (`--vm-socket-group`: hypervisors, who get no say over the
    /// daemon), else the admin group if there is one.
    pub fn vm_socket_access(&self) -> SocketAccess {
        match self.vm_gid.or(self.admin_gid) {
            None => SocketAccess::OWNER,
            Some(g) => SocketAccess {
                mode: 0o660,
                gid: Some(g),
            },
        }
    }
}

/// Whether `role` may make `req`; the refusal names what is needed.
pub fn allowed(role: Role, req: &Request) -> Result<(), ErrorReply> {
    if role == Role::Admin {
        return Ok(());
    }
    let what = match req {
        // A page of a listing is allowed when the listing is.
        Request::Page { request, .. } => return allowed(role, request),
        Request::Hello { .. }
        | Request::SwitchList
        | Request::PortList { .. }
        | Request::Stats { .. }
        | Request::Workers
        | Request::Macs { .. }
        | Request::Flows { .. }
        | Request::Close { .. } => return Ok(()),
        Request::Open { name, .. } => match name.parse::<PortName>() {
            Ok(PortName {
                target: Target::Nic { ifname },
                ..
            }) => format!("opening the interface {ifname} itself"),
            // A bad name gets its own error from the registry.
            _ => return Ok(()),
        },
        Request::SwitchAdd { .. } => "switch-add".into(),
        Request::SwitchDel { .. } => "switch-del".into(),
        Request::SwitchSet { .. } => "switch-set".into(),
        Request::PortAdd { .. } => "port-add".into(),
        Request::PortDel { .. } => "port-del".into(),
        Request::Attach { .. } => "attach".into(),
        Request::Detach { .. } => "detach".into(),
        Request::Upgrade { .. } => "upgrade".into(),
    };
    Err(ErrorReply::new(
        ErrorCode::Denied,
        format!("{what} needs an administrator of the daemon (root, the daemon's user, or a member of serve --admin-group); this connection may open ports and pipes and read counters"),
    ))
}

/// A group given by name or number.
pub fn resolve_group(name: &str) -> Option<u32> {
    if let Ok(g) = name.parse::<u32>() {
        return Some(g);
    }
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: group is plain data; all-zero is a valid value.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: getgrnam_r with a NUL-terminated name, a group struct and a
    // buffer of the stated length we own; it sets `out` to `&grp` or null.
    let r = unsafe {
        libc::getgrnam_r(
            cname.as_ptr(),
            &mut grp,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        )
    };
    (r == 0 && !out.is_null()).then_some(grp.gr_gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_policy() {
        let p = Policy {
            daemon_uid: 1000,
            allow_gid: Some(50),
            admin_gid: Some(60),
            vm_gid: None,
        };
        assert_eq!(p.role(0, 0, &[]), Some(Role::Admin));
        assert_eq!(p.role(1000, 1000, &[]), Some(Role::Admin));
        assert_eq!(p.role(1001, 60, &[]), Some(Role::Admin));
        assert_eq!(p.role(1001, 1001, &[7, 60]), Some(Role::Admin));
        assert_eq!(p.role(1001, 1001, &[50]), Some(Role::User));
        assert_eq!(p.role(1001, 50, &[]), Some(Role::User));
        assert_eq!(p.role(1001, 1001, &[7]), None);
        let alone = Policy {
            daemon_uid: 1000,
            allow_gid: None,
            admin_gid: None,
            vm_gid: None,
        };
        assert_eq!(alone.role(1001, 1001, &[]), None);
        assert_eq!(alone.control_socket_access(), SocketAccess::OWNER);
        assert_eq!(p.control_socket_access().mode, 0o666);
        assert_eq!(p.vm_socket_access().gid, Some(60));
        // A group for hypervisors: VM sockets only, no role at all.
        let vm = Policy {
            vm_gid: Some(70),
            ..p
        };
        assert_eq!(
            vm.vm_socket_access(),
            SocketAccess {
                mode: 0o660,
                gid: Some(70)
            }
        );
        assert_eq!(vm.role(1001, 70, &[]), None);
        assert_eq!(vm.control_socket_access(), p.control_socket_access());
    }

    #[test]
    fn users_open_ports_but_do_not_administer() {
        let open = |n: &str| Request::Open {
            name: n.into(),
            pipes: 0,
            in_port_memory: false,
        };
        assert!(allowed(Role::User, &open("vale0:a")).is_ok());
        assert!(allowed(Role::User, &open("x{1")).is_ok());
        let e = allowed(Role::User, &open("netmap:lo")).unwrap_err();
        assert_eq!(e.code, ErrorCode::Denied);
        assert!(e.message.contains("interface lo"), "{}", e.message);
        let e = allowed(Role::User, &Request::SwitchAdd { name: "v".into() }).unwrap_err();
        assert_eq!(e.code, ErrorCode::Denied);
        assert!(allowed(Role::Admin, &open("netmap:lo")).is_ok());
        assert_eq!(resolve_group("root"), Some(0));
        assert_eq!(resolve_group("12345"), Some(12345));
        assert_eq!(resolve_group("no-such-group-here"), None);
    }
}
