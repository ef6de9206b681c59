//! The OpenFlow port numbers of a switch's ports.
//!
//! Every port index has one number and every number (1 to
//! [`MAX_PORTS`]) one index, attached or not: a permutation, the identity
//! until a number moves. A port made with a number asked for
//! (`ctl port add ... --ofport N`) is attached where that number is, so it
//! keeps the number across restarts. Two VM ports may ask for the same
//! number, as the source and destination of a guest migrating between two
//! ports of one switch do: the second waits with another number, and the
//! number moves to whichever runs its guest while the holder's does not
//! ([`PortNumbers::swap`], from `Switch::set_running`), so flows that name
//! the port follow the guest, as they do between two hosts that give its
//! port the same number.

use crate::lookup::{PortIndex, MAX_PORTS};

/// Numbers by index and indexes by number (see the module documentation).
#[derive(Clone, Debug)]
pub struct PortNumbers {
    /// `number[i]` is index `i`'s number minus one.
    number: [PortIndex; MAX_PORTS],
    /// `index[n - 1]` is the index of number `n`.
    index: [PortIndex; MAX_PORTS],
    /// The number index `i`'s port asked for, 0 if none.
    wanted: [u16; MAX_PORTS],
}

impl Default for PortNumbers {
    fn default() -> Self {
        PortNumbers::new()
    }
}

/// `i` as an index of the tables (they have [`MAX_PORTS`] entries, and
/// `MAX_PORTS` fits a `PortIndex`).
fn idx(i: usize) -> PortIndex {
    PortIndex::try_from(i).unwrap_or(PortIndex::MAX)
}

impl PortNumbers {
    /// Index `i` has number `i + 1`.
    pub fn new() -> PortNumbers {
        let mut number = [0; MAX_PORTS];
        for (i, n) in number.iter_mut().enumerate() {
            *n = idx(i);
        }
        PortNumbers {
            number,
            index: number,
            wanted: [0; MAX_PORTS],
        }
    }

    /// The number of index `i` (0, no port's, for an index past
    /// [`MAX_PORTS`]).
    #[inline(always)]
    pub fn number(&self, i: PortIndex) -> u32 {
        self.number
            .get(usize::from(i))
            .map_or(0, |&n| u32::from(n) + 1)
    }

    /// The index of number `n`, if `n` can be a port's (1 to
    /// [`MAX_PORTS`]).
    #[inline(always)]
    pub fn index(&self, n: u32) -> Option<PortIndex> {
        let k = usize::try_from(n.checked_sub(1)?).ok()?;
        self.index.get(k).copied()
    }

    /// Swaps the numbers of indexes `i` and `j`.
    pub fn swap(&mut self, i: PortIndex, j: PortIndex) {
        let (iu, ju) = (usize::from(i), usize::from(j));
        if iu >= MAX_PORTS || ju >= MAX_PORTS || i == j {
            return;
        }
        self.number.swap(iu, ju);
        self.index[usize::from(self.number[iu])] = i;
        self.index[usize::from(self.number[ju])] = j;
    }

    /// The number index `i`'s port asked for.
    pub fn wanted(&self, i: PortIndex) -> Option<u32> {
        self.wanted
            .get(usize::from(i))
            .filter(|&&n| n != 0)
            .map(|&n| u32::from(n))
    }

    /// Records the number index `i`'s port asked for (`None`: it asked for
    /// none, or it is gone). A number that cannot be a port's is not kept.
    pub fn set_wanted(&mut self, i: PortIndex, n: Option<u32>) {
        let n = n
            .filter(|&n| self.index(n).is_some())
            .and_then(|n| u16::try_from(n).ok())
            .unwrap_or(0);
        if let Some(w) = self.wanted.get_mut(usize::from(i)) {
            *w = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_start_as_indexes_plus_one_and_swap_both_ways() {
        let mut p = PortNumbers::new();
        assert_eq!(p.number(0), 1);
        assert_eq!(p.index(1), Some(0));
        assert_eq!(p.index(0), None);
        assert_eq!(p.index(255), None, "past MAX_PORTS");
        assert_eq!(p.index(0xffff_fffd), None, "a reserved port");
        assert_eq!(p.number(300), 0);
        p.swap(2, 7);
        assert_eq!((p.number(2), p.number(7)), (8, 3));
        assert_eq!((p.index(8), p.index(3)), (Some(2), Some(7)));
        p.swap(7, 9);
        assert_eq!((p.number(7), p.number(9)), (10, 3));
        assert_eq!((p.index(10), p.index(3)), (Some(7), Some(9)));
        for n in 1..=u32::try_from(MAX_PORTS).unwrap() {
            assert_eq!(p.number(p.index(n).unwrap()), n, "a permutation");
        }
        p.swap(1, 500);
        assert_eq!(p.number(1), 2, "an index past the table changes nothing");
    }

    #[test]
    fn only_numbers_a_port_can_have_are_wanted() {
        let mut p = PortNumbers::new();
        p.set_wanted(4, Some(9));
        assert_eq!(p.wanted(4), Some(9));
        p.set_wanted(4, Some(0));
        assert_eq!(p.wanted(4), None);
        p.set_wanted(4, Some(1000));
        assert_eq!(p.wanted(4), None);
        p.set_wanted(600, Some(3));
        assert_eq!(p.wanted(600), None);
    }
}
