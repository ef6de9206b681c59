//! Ring index arithmetic. Slot counts need not be powers of two, so every
//! operation takes the ring size and wraps explicitly.

/// `i + 1`, wrapping at `n`.
#[inline(always)]
pub fn next(i: u32, n: u32) -> u32 {
    let j = i + 1;
    if j == n {
        0
    } else {
        j
    }
}

/// `i + k`, wrapping at `n`; requires `i < n` and `k <= n`.
#[inline(always)]
pub fn add(i: u32, k: u32, n: u32) -> u32 {
    let j = i + k;
    if j >= n {
        j - n
    } else {
        j
    }
}

/// `i - 1`, wrapping at `n`.
#[inline(always)]
pub fn prev(i: u32, n: u32) -> u32 {
    if i == 0 {
        n - 1
    } else {
        i - 1
    }
}

/// Number of steps from `from` forward to `to` (`to - from` modulo `n`).
#[inline(always)]
pub fn dist(from: u32, to: u32, n: u32) -> u32 {
    if to >= from {
        to - from
    } else {
        to + n - from
    }
}

/// Slots the application may use: `tail - head` modulo `n`.
#[inline(always)]
pub fn space(head: u32, tail: u32, n: u32) -> u32 {
    dist(head, tail, n)
}

/// Whether `x` lies in the window that starts at `from` and spans `len`
/// slots forward (inclusive of both ends).
#[inline(always)]
pub fn within(from: u32, len: u32, x: u32, n: u32) -> bool {
    x < n && dist(from, x, n) <= len
}

/// Whether the port side may move the application's `tail` to `hw`:
/// forward from `tail`, never onto the slot before `head` (one slot always
/// stays empty between what the port fills and what the application owns).
#[inline(always)]
pub fn tail_may_move(tail: u32, head: u32, hw: u32, n: u32) -> bool {
    within(tail, dist(tail, prev(head, n), n), hw, n)
}

/// Rounds `x` up to a multiple of `a` (a power of two).
pub const fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_non_power_of_two() {
        let n = 100;
        assert_eq!(next(98, n), 99);
        assert_eq!(next(99, n), 0);
        assert_eq!(prev(0, n), 99);
        assert_eq!(add(95, 10, n), 5);
        assert_eq!(add(0, 100, n), 0);
        assert_eq!(dist(95, 5, n), 10);
        assert_eq!(dist(5, 95, n), 90);
        assert_eq!(dist(7, 7, n), 0);
        assert_eq!(space(99, 0, n), 1);
    }

    #[test]
    fn within_window_across_wrap() {
        let n = 64;
        assert!(within(60, 8, 60, n));
        assert!(within(60, 8, 63, n));
        assert!(within(60, 8, 4, n));
        assert!(!within(60, 8, 5, n));
        assert!(!within(60, 8, 59, n));
        assert!(!within(60, 8, 64, n), "out of range index");
        assert!(!within(60, 8, u32::MAX, n));
    }

    #[test]
    fn tail_moves_forward_up_to_before_head() {
        // The application owns [head 10, tail 20) of 100 slots: tail may
        // stay, or go forward to 99 and round to 9, never onto head.
        let n = 100;
        let allowed: Vec<u32> = (0..=n).filter(|&hw| tail_may_move(20, 10, hw, n)).collect();
        assert_eq!(allowed, (0..10).chain(20..100).collect::<Vec<u32>>());
        assert!(!tail_may_move(20, 10, u32::MAX, n), "out of range index");
    }

    #[test]
    fn add_then_dist_roundtrip() {
        for n in [64u32, 100, 1000, 4096] {
            for i in [0, 1, n / 2, n - 1] {
                for k in [0, 1, n / 3, n - 1] {
                    let j = add(i, k, n);
                    assert!(j < n);
                    assert_eq!(dist(i, j, n), k);
                }
            }
        }
    }

    #[test]
    fn align() {
        assert_eq!(align_up(0, 64), 0);
        assert_eq!(align_up(1, 64), 64);
        assert_eq!(align_up(4096, 4096), 4096);
    }
}
