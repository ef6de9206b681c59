//! Adaptive waiting: spin for a while before sleeping, as long as spinning
//! pays, the userspace analogue of the kernel's halt polling.
//!
//! A thread that sleeps on an eventfd between batches pays a wake-up for
//! every hand-off: 43-58 µs for a round trip where the kernel halts idle
//! vCPUs. Spinning a little first catches the work that arrives soon
//! after, for the price of the CPU time spent spinning. [`AdaptiveWait`]
//! decides how long:
//!
//! - **The window adapts to what it sees.** After each sleep, it works
//!   out when the work came (the sleep's length less the wake-up's own
//!   cost, plus the window already spun). Work that came within the cap
//!   grows the window toward it; work that came later, or never, halves
//!   it, down to zero: an idle port or a peer that sends rarely costs no
//!   spinning.
//! - **The cap starts from the thread's own wake-up cost** ([`AdaptiveWait::cost`]),
//!   a running estimate low among the sleeps that ended with work
//!   (falling by an eighth of the gap, rising by 1/64). Spinning up to
//!   what a sleep costs and then sleeping never costs more than twice the
//!   best choice made knowing the future (the ski-rental bound). Where
//!   wake-ups are cheap, it hardly spins.
//! - **A sleep also costs whoever wakes it.** Where waking a thread on
//!   another, halted vCPU costs the waker a round trip through the
//!   hypervisor (15 µs of the waker's own CPU here, against 2 µs on its
//!   CPU), a receiver that sleeps between a switch's batches takes that
//!   from the switch on every batch. The waker's cost, as the other side
//!   publishes it ([`AdaptiveWait::set_peer_cost`]), is added to the cap:
//!   spinning up to both costs still never costs more than twice the best
//!   choice.
//! - **It never spins while another thread needs the CPU.** The spin
//!   offers the CPU every [`YIELD_EVERY`] turns; when the thread's
//!   involuntary context switches moved meanwhile (a yield that ran
//!   another thread counts as one, as does a preemption), another runnable
//!   thread was waiting for this CPU (a co-located worker or peer, three
//!   threads on two CPUs). If the work waited for is there when the CPU
//!   comes back, that thread was the one waited for, and the spin won by
//!   giving way; if the CPU came back sooner than a wake-up would have,
//!   the other thread ran a short turn and slept, and the spin goes on;
//!   otherwise it needs the CPU, and spinning stops for a while that
//!   doubles each time it happens again. Work found after the other
//!   thread had a whole scheduler slice ([`LONG_TURN`]) counts as a win
//!   but stops spinning all the same: that thread is busy on its own (a
//!   sender whose frames the switch drops rather than waits for), the
//!   work came long before, and a thread that yields to it gets the CPU
//!   back only once a slice, where one that sleeps is woken by its work
//!   and preempts it. A receiver sharing a CPU with such a sender got
//!   2.5 % of the CPU by yielding, 9-12 % by sleeping.
//!
//! Nothing here blocks or allocates; the clock is read every
//! [`CHECK_EVERY`] turns.

use std::time::{Duration, Instant};

/// Lowest wake-up cost assumed (ns).
const COST_MIN: u32 = 1_000;
/// Highest wake-up cost assumed, and so the longest window (ns).
const COST_MAX: u32 = 100_000;
/// Wake-up cost assumed before any was measured (ns): this machine's
/// halted-vCPU figure.
const COST_START: u32 = 50_000;
/// The first window after none (ns).
const GROW_START: u32 = 2_000;
/// Spin turns between two reads of the clock.
pub const CHECK_EVERY: u32 = 16;
/// Spin turns between two yields of the CPU.
pub const YIELD_EVERY: u32 = 64;
/// A turn of another thread on this CPU longer than any peer's batch
/// (filling a ring of 4,096 slots takes well under 100 µs): a scheduler's
/// time slice (1.5 ms on two CPUs, up to a 4 ms tick), taken by a thread
/// busy on its own.
const LONG_TURN: Duration = Duration::from_millis(1);
/// Waits without spinning after the CPU was needed, at first; doubled at
/// each repeat up to `CALM_MAX`.
const CALM_START: u32 = 8;
const CALM_MAX: u32 = 4096;

/// What an [`AdaptiveWait`] did, for counters and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WaitStats {
    /// Spins that found work.
    pub spins_won: u64,
    /// Spins that ran out their window.
    pub spins_lost: u64,
    /// Spins cut short because another thread needed the CPU.
    pub gave_way: u64,
}

/// One thread's adaptive spin-then-sleep state (see the module docs). Keep
/// one per waiting thread (or per port a thread waits on); it is not
/// shared.
#[derive(Debug, Clone)]
pub struct AdaptiveWait {
    /// Current spin window (ns).
    window: u32,
    /// This thread's measured wake-up cost (ns).
    cost: u32,
    /// What waking this thread costs the thread that wakes it (ns), as
    /// that side publishes it: with `cost`, the window's cap.
    peer: u32,
    /// Waits left without spinning.
    calm: u32,
    /// The calm given at the last contention (0: none since a clean spin).
    last_calm: u32,
    stats: WaitStats,
}

impl Default for AdaptiveWait {
    fn default() -> Self {
        AdaptiveWait {
            window: 0,
            cost: COST_START,
            peer: 0,
            calm: 0,
            last_calm: 0,
            stats: WaitStats::default(),
        }
    }
}

impl AdaptiveWait {
    /// A fresh state: no window until a sleep shows spinning would pay.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current spin window.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(u64::from(self.window))
    }

    /// The measured wake-up cost.
    pub fn cost(&self) -> Duration {
        Duration::from_nanos(u64::from(self.cost))
    }

    /// Notes what waking this thread costs the thread that wakes it (a
    /// hint from the other side of a ring, zero when unknown): the window
    /// may grow up to that and this thread's own wake-up cost together
    /// ([`AdaptiveWait::cap`]).
    pub fn set_peer_cost(&mut self, d: Duration) {
        self.peer = u32::try_from(d.as_nanos())
            .unwrap_or(u32::MAX)
            .min(COST_MAX);
    }

    /// The longest the window grows to: the thread's wake-up cost plus its
    /// waker's (see [`AdaptiveWait::set_peer_cost`]), at most 100 µs.
    pub fn cap(&self) -> Duration {
        Duration::from_nanos(u64::from(self.cap_ns()))
    }

    fn cap_ns(&self) -> u32 {
        self.cost.saturating_add(self.peer).min(COST_MAX)
    }

    /// What it did so far.
    pub fn stats(&self) -> WaitStats {
        self.stats
    }

    /// Spins until `ready` returns true or the window passes; returns
    /// whether `ready` did. With no window (or while giving way), returns
    /// false at once without calling `ready`: the caller sleeps.
    pub fn spin(&mut self, mut ready: impl FnMut() -> bool) -> bool {
        if self.calm > 0 {
            self.calm -= 1;
            return false;
        }
        if self.window == 0 {
            return false;
        }
        let t0 = Instant::now();
        let limit = Duration::from_nanos(u64::from(self.window));
        let mut switched = involuntary_switches();
        // The last time the thread was seen to have the CPU to itself.
        let mut alone = t0;
        let mut turns = 0u32;
        loop {
            if ready() {
                self.stats.spins_won += 1;
                self.last_calm = 0;
                return true;
            }
            turns = turns.wrapping_add(1);
            if turns.is_multiple_of(YIELD_EVERY) {
                std::thread::yield_now();
                // A yield that gave the CPU away, or a preemption, counts
                // as an involuntary switch (the thread stayed runnable):
                // another thread needed this CPU.
                let now = involuntary_switches();
                if now != switched {
                    let back = Instant::now();
                    match after_switch(ready(), back - alone, self.cost) {
                        AfterSwitch::Won => {
                            self.stats.spins_won += 1;
                            self.last_calm = 0;
                            return true;
                        }
                        AfterSwitch::WonLate => {
                            self.stats.spins_won += 1;
                            self.give_way();
                            return true;
                        }
                        AfterSwitch::GiveWay => {
                            self.give_way();
                            return false;
                        }
                        AfterSwitch::SpinOn => {
                            switched = now;
                            alone = back;
                        }
                    }
                } else {
                    alone = Instant::now();
                }
            } else {
                std::hint::spin_loop();
            }
            if turns.is_multiple_of(CHECK_EVERY) && t0.elapsed() >= limit {
                self.stats.spins_lost += 1;
                self.last_calm = 0;
                return ready();
            }
        }
    }

    /// Stops spinning for a while, longer each time it repeats.
    fn give_way(&mut self) {
        self.stats.gave_way += 1;
        self.window = 0;
        self.last_calm = if self.last_calm == 0 {
            CALM_START
        } else {
            (self.last_calm * 2).min(CALM_MAX)
        };
        self.calm = self.last_calm;
    }

    /// Learns from a sleep that lasted `slept` and ended with work
    /// (`woken`) or without (a timeout, a signal).
    pub fn slept(&mut self, slept: Duration, woken: bool) {
        let d = u32::try_from(slept.as_nanos()).unwrap_or(u32::MAX);
        if !woken {
            self.shrink();
            return;
        }
        // A woken sleep lasts at least the wake-up itself: the low ones
        // measure it. Follow a drop by an eighth of it, a rise by 1/64:
        // not the lowest sleep, which may have caught a thread that had
        // not halted yet (a cheap wake-up), but low among them.
        self.cost = if d < self.cost {
            (self.cost - (self.cost - d) / 8).max(COST_MIN)
        } else {
            (self.cost + (d - self.cost) / 64).min(COST_MAX)
        };
        // When the work came, counted from the start of the wait: the
        // window already spun, then the sleep less its wake-up.
        let came = self.window.saturating_add(d.saturating_sub(self.cost));
        let cap = self.cap_ns();
        if came <= cap {
            // A window this long would have caught it.
            let grown = self.window.saturating_mul(2).max(GROW_START);
            self.window = grown.max(came).min(cap);
        } else {
            self.shrink();
        }
    }

    fn shrink(&mut self) {
        self.window /= 2;
        if self.window < GROW_START / 2 {
            self.window = 0;
        }
    }
}

/// What a spin does once another thread ran on its CPU.
#[derive(Debug, PartialEq, Eq)]
enum AfterSwitch {
    /// The work is there: the thread that ran brought it (a worker or peer
    /// sharing this CPU), and the spin paid by handing it the CPU.
    Won,
    /// The work is there, but the CPU was away for a scheduler's time
    /// slice, longer than any peer takes to fill a ring: the thread that
    /// ran is busy on its own (a sender whose frames the switch drops
    /// rather than waits for), and the work came from elsewhere long
    /// before. Yielding to it again would hand it every slice; sleeping
    /// instead lets the wake-up preempt it, so the wait gives way.
    WonLate,
    /// The CPU came back sooner than a sleep's wake-up would have: the
    /// other thread ran a short turn and slept (a worker's batch), and
    /// spinning on costs it nothing.
    SpinOn,
    /// The other thread kept the CPU longer: it needs it, and a spin would
    /// take turns with it.
    GiveWay,
}

/// The decision after a switch: with the work `ready` or not, the CPU
/// away for at most `away`, and a wake-up costing `cost` ns.
fn after_switch(ready: bool, away: Duration, cost: u32) -> AfterSwitch {
    if ready && away >= LONG_TURN {
        AfterSwitch::WonLate
    } else if ready {
        AfterSwitch::Won
    } else if away < Duration::from_nanos(u64::from(cost)) {
        AfterSwitch::SpinOn
    } else {
        AfterSwitch::GiveWay
    }
}

/// The calling thread's involuntary context switches so far (a yield that
/// ran another thread counts as one, the thread having stayed runnable);
/// 0 if the kernel does not say.
fn involuntary_switches() -> i64 {
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `u`, which lives across the
    // call.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } != 0 {
        return 0;
    }
    u.ru_nivcsw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn no_window_means_no_spin_and_no_look() {
        let mut w = AdaptiveWait::new();
        let mut looked = 0;
        assert!(!w.spin(|| {
            looked += 1;
            true
        }));
        assert_eq!(looked, 0, "a wait with no window goes straight to sleep");
    }

    #[test]
    fn work_soon_after_sleeping_grows_the_window_up_to_the_wake_up_cost() {
        let mut w = AdaptiveWait::new();
        // Sleeps ending 50 µs in: the wake-up itself (the cost measured).
        for _ in 0..20 {
            w.slept(us(50), true);
        }
        assert_eq!(w.cost(), us(50));
        assert_eq!(w.window(), us(50), "grown to the cap");
        // Work that comes right away is found by the spin.
        let mut n = 0;
        assert!(w.spin(|| {
            n += 1;
            n > 3
        }));
        assert_eq!(w.stats().spins_won, 1);
    }

    #[test]
    fn late_work_and_timeouts_shrink_the_window_to_nothing() {
        let mut w = AdaptiveWait::new();
        for _ in 0..20 {
            w.slept(us(50), true);
        }
        assert!(w.window() > Duration::ZERO);
        // A peer sending once a millisecond: spinning never pays.
        for _ in 0..10 {
            w.slept(us(1000), true);
        }
        assert_eq!(w.window(), Duration::ZERO);
        for _ in 0..20 {
            w.slept(us(50), true);
        }
        assert!(w.window() > Duration::ZERO);
        for _ in 0..10 {
            w.slept(us(100), false);
        }
        assert_eq!(w.window(), Duration::ZERO, "timeouts: nothing came");
    }

    #[test]
    fn what_the_waker_pays_raises_the_cap_up_to_its_bound() {
        let mut w = AdaptiveWait::new();
        w.set_peer_cost(us(30));
        for _ in 0..40 {
            w.slept(us(50), true);
        }
        assert_eq!(w.cost(), us(50));
        assert_eq!(w.cap(), us(80), "the sleeper's cost and its waker's");
        assert_eq!(w.window(), us(80), "grown to the cap");
        // A waker's hint is bounded: the cap never passes 100 µs.
        w.set_peer_cost(Duration::from_secs(5));
        assert_eq!(w.cap(), us(100));
        // Without it, the cap is the sleeper's own cost again, and the
        // window is held to it at the next sleep.
        w.set_peer_cost(Duration::ZERO);
        assert_eq!(w.cap(), us(50));
        w.slept(us(50), true);
        assert!(w.window() <= us(50), "{:?}", w.window());
    }

    #[test]
    fn cheap_wake_ups_mean_short_windows() {
        let mut w = AdaptiveWait::new();
        for _ in 0..100 {
            w.slept(us(3), true);
        }
        assert!(w.cost() < us(4), "{:?}", w.cost());
        assert!(w.window() <= w.cost(), "{:?}", w.window());
    }

    #[test]
    fn after_a_switch_the_spin_wins_goes_on_or_gives_way() {
        assert_eq!(after_switch(true, us(500), 50_000), AfterSwitch::Won);
        // A scheduler's slice away: the thread that ran is busy on its own.
        assert_eq!(after_switch(true, us(3000), 50_000), AfterSwitch::WonLate);
        assert_eq!(after_switch(false, us(8), 50_000), AfterSwitch::SpinOn);
        assert_eq!(after_switch(false, us(50), 50_000), AfterSwitch::GiveWay);
        assert_eq!(after_switch(false, us(3000), 50_000), AfterSwitch::GiveWay);
    }

    #[test]
    fn the_cost_follows_a_drop_faster_than_a_rise() {
        let mut w = AdaptiveWait::new();
        // One short sleep (a thread not yet halted) moves it an eighth.
        w.slept(us(10), true);
        assert_eq!(w.cost(), us(45));
        for _ in 0..100 {
            w.slept(us(10), true);
        }
        assert!(
            w.cost() < us(11),
            "many of them take it there: {:?}",
            w.cost()
        );
        w.slept(us(10_000), true);
        assert!(w.cost() < us(200), "{:?}", w.cost());
        for _ in 0..2000 {
            w.slept(us(10_000), true);
        }
        assert_eq!(w.cost(), Duration::from_nanos(u64::from(COST_MAX)));
    }

    #[test]
    fn a_spin_that_finds_nothing_ends_and_says_so() {
        let mut w = AdaptiveWait::new();
        for _ in 0..20 {
            w.slept(us(20), true);
        }
        assert!(!w.spin(|| false));
        let s = w.stats();
        assert_eq!(s.spins_won, 0);
        assert_eq!(s.spins_lost + s.gave_way, 1);
    }

    /// Two threads on one CPU: the spinner's yield runs the thread that
    /// brings the work, which is a spin won, not a reason to stop spinning.
    #[test]
    fn a_yield_that_runs_the_thread_bringing_the_work_is_a_spin_won() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        fn pin_to_first_cpu() -> bool {
            // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: sets bit 0 of a set we own.
            unsafe { libc::CPU_SET(0, &mut set) };
            // SAFETY: sched_setaffinity on the calling thread with a valid set.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0 }
        }
        if !pin_to_first_cpu() {
            return; // no CPU 0 to share: nothing to show
        }
        let came = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let spinning = Arc::new(AtomicBool::new(false));
        let bringer = {
            let (came, started, spinning) = (came.clone(), started.clone(), spinning.clone());
            std::thread::spawn(move || {
                if pin_to_first_cpu() {
                    // Relaxed: flags with nothing attached.
                    started.store(true, Ordering::Relaxed);
                    // It runs when the spinner gives it the CPU.
                    while !spinning.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                    }
                    came.store(true, Ordering::Relaxed);
                }
            })
        };
        let mut w = AdaptiveWait::new();
        // A window far longer than the bringer can take to run.
        w.cost = COST_MAX;
        w.window = COST_MAX;
        let won = w.spin(|| {
            spinning.store(true, Ordering::Relaxed);
            came.load(Ordering::Relaxed)
        });
        spinning.store(true, Ordering::Relaxed);
        bringer.join().unwrap();
        if !started.load(Ordering::Relaxed) {
            return; // the bringer could not share CPU 0
        }
        if won {
            assert_eq!(w.stats().gave_way, 0, "{:?}", w.stats());
            assert_eq!(w.calm, 0, "it keeps spinning");
        }
    }

    #[test]
    fn giving_way_stops_spinning_for_longer_each_time() {
        let mut w = AdaptiveWait::new();
        w.window = 10_000;
        w.give_way();
        assert_eq!(w.window(), Duration::ZERO);
        let mut calm = 0;
        while !w.spin(|| true) && calm < 1000 {
            calm += 1;
            // Meanwhile sleeps keep showing spinning would pay.
            w.slept(us(20), true);
        }
        assert_eq!(calm, CALM_START);
        w.window = 10_000;
        w.last_calm = CALM_START;
        w.give_way();
        assert_eq!(w.calm, CALM_START * 2, "a repeat waits twice as long");
    }
}
