//! `nr_mem_id`: which memory a registration's rings and buffers live in.
//!
//! libnetmap maps a port once per memory id and hands that mapping to every
//! other port of the process with the same id, so equal ids must mean one
//! memory (the two ends of a pipe share one region, as netmap's pipes share
//! their parent's allocator) and different memories must have different
//! ids. Ids are handed out per process, from 1 (0 means "any" in a request),
//! and an id stays taken while any port of its memory is open in the
//! process; a memory is known by its memfd's device and inode.

use std::sync::{Arc, Mutex, Weak};

use ringswitch_ring::Region;

use crate::Errno;

/// One memory with an id: every mapping of it this process registered.
struct Entry {
    file: (u64, u64),
    maps: Vec<Weak<Region>>,
    id: u16,
    /// The switch port whose memory it is (pipes in its memory share it).
    port: Option<String>,
}

impl Entry {
    fn live(&mut self) -> bool {
        self.maps.retain(|w| w.strong_count() > 0);
        !self.maps.is_empty()
    }
}

struct Table {
    entries: Vec<Entry>,
    /// The id handed out last: the next search starts after it, so an id
    /// just given back is not reused at once.
    last: u16,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    entries: Vec::new(),
    last: 0,
});

/// The memory id of `region` in this process; `port`: the switch port
/// whose memory it is, when a switch port is what was registered.
pub fn of(region: &Arc<Region>, port: Option<&str>) -> Result<u16, Errno> {
    let file = region
        .file_id()
        .ok_or_else(|| Errno::last("identifying the port's memory"))?;
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    t.entries.retain_mut(Entry::live);
    if let Some(e) = t.entries.iter_mut().find(|e| e.file == file) {
        if !e
            .maps
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(region)))
        {
            e.maps.push(Arc::downgrade(region));
        }
        if e.port.is_none() {
            e.port = port.map(str::to_string);
        }
        return Ok(e.id);
    }
    // At most every id once: the table holds fewer than 65535 entries
    // unless every id is taken.
    let mut id = t.last;
    for _ in 0..u16::MAX {
        id = if id == u16::MAX { 1 } else { id + 1 };
        if t.entries.iter().all(|e| e.id != id) {
            t.last = id;
            t.entries.push(Entry {
                file,
                maps: vec![Arc::downgrade(region)],
                id,
                port: port.map(str::to_string),
            });
            return Ok(id);
        }
    }
    Err(Errno::with(
        libc::ENOMEM,
        "every netmap memory id (1 to 65535) is in use by this process".into(),
    ))
}

/// Whether `id` is the id of a memory a port of this process has open.
pub fn in_use(id: u16) -> bool {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    t.entries.retain_mut(Entry::live);
    t.entries.iter().any(|e| e.id == id)
}

/// The switch port whose memory `id` is, if a port of this process has it
/// open.
pub fn port_of(id: u16) -> Option<String> {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    t.entries.retain_mut(Entry::live);
    t.entries
        .iter()
        .find(|e| e.id == id)
        .and_then(|e| e.port.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringswitch_ring::{Geometry, RegionLayout};

    fn region() -> Arc<Region> {
        let l = RegionLayout::new(Geometry::default(), 1).unwrap();
        Arc::new(Region::create(l, ["vale0:m", ""]).unwrap())
    }

    #[test]
    fn one_id_per_memory_never_zero() {
        let (a, b) = (region(), region());
        let (ia, ib) = (of(&a, None).unwrap(), of(&b, None).unwrap());
        assert!(ia != 0 && ib != 0 && ia != ib, "{ia} {ib}");
        assert_eq!(of(&a, None).unwrap(), ia, "asked again");
        // A second mapping of the same memory (as each end of a pipe has).
        let a2 = Arc::new(Region::open(a.dup_fd().unwrap()).unwrap());
        assert_eq!(of(&a2, None).unwrap(), ia);
        // The id stays while any mapping of the memory lives...
        drop(a);
        let c = region();
        let ic = of(&c, None).unwrap();
        assert!(ic != ia && ic != ib && ic != 0);
        assert_eq!(of(&a2, None).unwrap(), ia);
        assert!(in_use(ia) && in_use(ib) && in_use(ic));
        // ... and is not handed out again at once after the last one goes.
        drop(a2);
        assert!(!in_use(ia));
        let d = region();
        let id = of(&d, None).unwrap();
        assert!(id != ia && id != ib && id != ic && id != 0);
    }
}
