//! The state file that lets a restarted daemon take a crashed one's XDP
//! programs off its interfaces: one interface name per line, rewritten
//! whole (to a temporary file, then renamed) on every change, so a crash
//! leaves either list.

use std::path::Path;

use ringswitch_netdev as netdev;
use tracing::{info, warn};

/// Removes XDP programs a crashed daemon left on the interfaces recorded in
/// `path`, then empties it. Called once at start, after the socket is bound
/// (so no other daemon owns the same state).
pub fn clean_stale_attachments(path: &Path) {
    for ifname in read_names(path) {
        match netdev::xdp::detach_stale(&ifname) {
            Ok(true) => info!(
                ifname,
                "removed the XDP program a previous daemon left attached"
            ),
            Ok(false) => {}
            Err(e) => warn!(ifname, error = %e, "cannot clean up after a previous daemon"),
        }
    }
    if let Err(e) = std::fs::write(path, "") {
        warn!(path = %path.display(), error = %e, "cannot reset the state file");
    }
}

/// Records that `ifname` has our XDP program attached.
pub(super) fn record(path: &Path, ifname: &str) {
    let mut names = read_names(path);
    if !names.iter().any(|n| n == ifname) {
        names.push(ifname.to_string());
        write_names(path, &names);
    }
}

/// Records that `ifname` no longer has our XDP program attached.
pub(super) fn forget(path: &Path, ifname: &str) {
    let mut names = read_names(path);
    let before = names.len();
    names.retain(|n| n != ifname);
    if names.len() != before {
        write_names(path, &names);
    }
}

fn read_names(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn write_names(path: &Path, names: &[String]) {
    let mut text = names.join("\n");
    text.push('\n');
    if let Err(e) = super::config::replace_file(path, &text) {
        warn!(path = %path.display(), error = %e, "cannot record attached interfaces; a crash would leave their XDP programs behind");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_recorded_once_and_forgotten() {
        let dir = std::env::temp_dir().join(format!("rs-xdp-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("attached");
        record(&path, "eth0");
        record(&path, "eth1");
        record(&path, "eth0");
        assert_eq!(read_names(&path), ["eth0", "eth1"]);
        forget(&path, "eth0");
        forget(&path, "eth9");
        assert_eq!(read_names(&path), ["eth1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
