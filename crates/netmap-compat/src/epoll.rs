//! poll, select and epoll over emulated descriptors.
//!
//! netmap's poll syncs the rings it reports on; so do these. Before the
//! real call sleeps, each emulated descriptor is armed (interrupt requested,
//! then a second look), so a packet that arrives in between is never slept
//! through; after it, the rings are synced and the events recomputed, and a
//! wake-up that brought nothing for the caller goes back to sleep until the
//! timeout.
//!
//! poll and select over emulated descriptors only spin first, for the
//! calling thread's adaptive window ([`ringswitch_ring::AdaptiveWait`]),
//! before they arm and sleep; `RINGSWITCH_WAIT=blocking` turns that off.
//! epoll_wait spins too, looking every few turns whether the set has events
//! of its own (a zero-timeout poll of the epoll set, which takes none).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libc::{c_int, epoll_event, nfds_t, pollfd};

use ringswitch_ring::AdaptiveWait;

use crate::file::NmFile;
use crate::{real, table};

/// Most emulated descriptors one poll, select or epoll_wait call syncs;
/// beyond that, the rest are polled as the plain epoll sets they are
/// (readable on an interrupt, but not synced by the call).
const MAX_NM_PER_CALL: usize = 64;

/// Milliseconds left before `deadline`, for a poll-style timeout.
fn left_ms(deadline: Option<Instant>) -> c_int {
    match deadline {
        None => -1,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            left.as_millis().min(c_int::MAX as u128) as c_int
                + (left.subsec_nanos() % 1_000_000 != 0) as c_int
        }
    }
}

/// The two looks before a sleep, as netmap's poll takes them: sync and see
/// what is ready; when nothing is, ask for an interrupt and look once more
/// (the double check), so what arrives in between is never slept through.
/// Under load the first look finds something and no system call is made.
const LOOKS: [fn(&NmFile, i16) -> i16; 2] = [NmFile::poll_events, NmFile::arm];

thread_local! {
    /// The calling thread's adaptive spin before its poll or epoll_wait
    /// sleeps (see [`ringswitch_ring::AdaptiveWait`]).
    static ADAPT: std::cell::RefCell<AdaptiveWait> = std::cell::RefCell::new(AdaptiveWait::new());
}

/// Whether waits spin adaptively before sleeping: yes unless
/// `RINGSWITCH_WAIT=blocking` (read once).
fn adaptive() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("RINGSWITCH_WAIT").map_or(true, |v| v != "blocking"))
}

/// Spins for the thread's current window while `ready` finds nothing, for
/// a wait that may sleep (`timeout_ms` not 0); returns whether it found
/// something. A thread whose window is closed returns at once.
fn spin_before_sleep(timeout_ms: c_int, ready: impl FnMut() -> bool) -> bool {
    if timeout_ms == 0 || !adaptive() {
        return false;
    }
    ADAPT.with(|a| a.try_borrow_mut().is_ok_and(|mut a| a.spin(ready)))
}

/// Teaches the thread's window what a sleep of `slept` found.
fn after_sleep(slept: Duration, woken: bool) {
    if adaptive() {
        ADAPT.with(|a| {
            if let Ok(mut a) = a.try_borrow_mut() {
                a.slept(slept, woken);
            }
        });
    }
}

fn deadline_of(timeout_ms: c_int) -> Option<Instant> {
    (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64))
}

/// How often a spin in epoll_wait asks whether the set has events of its
/// own (a system call; the emulated descriptors are looked at every turn).
const KERNEL_LOOK_EVERY: u32 = 16;

/// What ended an epoll_wait's spin.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spun {
    No,
    Ours,
    Kernel,
}

/// Whether epoll set `epfd` has events ready, without taking any.
fn set_has_events(epfd: c_int) -> bool {
    let mut p = [libc::pollfd {
        fd: epfd,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one pollfd we own, no wait.
    unsafe { real::poll(p.as_mut_ptr(), 1, 0) > 0 }
}

/// poll() where at least one descriptor may be emulated.
///
/// # Safety
/// `fds` points to `n` writable pollfds (or `n` is 0).
pub unsafe fn poll(fds: *mut pollfd, n: nfds_t, timeout_ms: c_int) -> c_int {
    if fds.is_null() || n == 0 {
        // SAFETY: forwarded as given.
        return unsafe { real::poll(fds, n, timeout_ms) };
    }
    // SAFETY: `n` valid entries per the contract.
    let all = unsafe { std::slice::from_raw_parts_mut(fds, n as usize) };
    // Where the emulated entries are, and what they asked for.
    let mut nm: [(usize, i16); MAX_NM_PER_CALL] = [(0, 0); MAX_NM_PER_CALL];
    let mut k = 0;
    for (i, p) in all.iter().enumerate() {
        if table::owns(p.fd) && k < MAX_NM_PER_CALL {
            nm[k] = (i, p.events);
            k += 1;
        }
    }
    let nm = &nm[..k];
    if nm.is_empty() {
        // SAFETY: forwarded as given.
        return unsafe { real::poll(fds, n, timeout_ms) };
    }
    let others = all.len() - nm.len();
    let deadline = deadline_of(timeout_ms);
    let mut ready: [i16; MAX_NM_PER_CALL] = [0; MAX_NM_PER_CALL];
    loop {
        let mut any = false;
        for (pass, look) in LOOKS.into_iter().enumerate() {
            // Before arming: spin while that pays, when nothing but our
            // descriptors is polled (the others would wait meanwhile).
            if pass == 1
                && others == 0
                && spin_before_sleep(timeout_ms, || {
                    let mut found = false;
                    for (j, &(i, ev)) in nm.iter().enumerate() {
                        if let Some(f) = table::get(all[i].fd) {
                            ready[j] = f.poll_events(ev);
                            found |= ready[j] != 0;
                        }
                    }
                    found
                })
            {
                any = true;
                break;
            }
            for (j, &(i, ev)) in nm.iter().enumerate() {
                match table::get(all[i].fd) {
                    Some(f) => ready[j] = look(&f, ev),
                    None if pass == 0 => ready[j] = libc::POLLNVAL,
                    None => {}
                }
                any |= ready[j] != 0;
            }
            if any {
                break;
            }
        }
        if any {
            let mut count = 0;
            if others > 0 {
                // The other descriptors' state, without sleeping; a
                // negative fd makes the kernel skip our entries.
                for &(i, _) in nm {
                    all[i].fd = !all[i].fd;
                }
                // SAFETY: the caller's array, our entries masked.
                let r = unsafe { real::poll(fds, n, 0) };
                for &(i, _) in nm {
                    all[i].fd = !all[i].fd;
                }
                if r < 0 {
                    return r;
                }
                count = r;
            }
            for (j, &(i, _)) in nm.iter().enumerate() {
                all[i].revents = ready[j];
                count += (ready[j] != 0) as c_int;
            }
            return count;
        }
        // Sleep: the epoll set is readable when the port signals.
        for &(i, _) in nm {
            all[i].events = libc::POLLIN;
        }
        let t_sleep = Instant::now();
        // SAFETY: the caller's array, with our entries' events adjusted.
        let r = unsafe { real::poll(fds, n, left_ms(deadline)) };
        after_sleep(t_sleep.elapsed(), r > 0);
        let mut count = 0;
        if r >= 0 {
            count = all.iter().filter(|p| p.revents != 0).count() as c_int;
        }
        for &(i, ev) in nm {
            all[i].events = ev;
            if r < 0 {
                continue;
            }
            let was = all[i].revents != 0;
            let now = match table::get(all[i].fd) {
                Some(f) => {
                    f.after_wait();
                    f.poll_events(ev)
                }
                None => libc::POLLNVAL,
            };
            all[i].revents = now;
            count += (now != 0) as c_int - was as c_int;
        }
        if r < 0 {
            return r;
        }
        if count > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
            return count;
        }
    }
}

/// select() where at least one descriptor may be emulated: done as a poll.
///
/// # Safety
/// The sets are NULL or valid for `nfds` descriptors; `tv` NULL or valid.
pub unsafe fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    let nfds = nfds.clamp(0, libc::FD_SETSIZE as c_int);
    // SAFETY: FD_ISSET on a valid set (or skipped when NULL).
    let isset = |s: *mut libc::fd_set, fd: c_int| !s.is_null() && unsafe { libc::FD_ISSET(fd, s) };
    let mut any_nm = false;
    for fd in 0..nfds {
        if (isset(r, fd) || isset(w, fd)) && table::owns(fd) {
            any_nm = true;
            break;
        }
    }
    if !any_nm {
        // SAFETY: forwarded as given.
        return unsafe { real::select(nfds, r, w, e, tv) };
    }
    let mut pfds: [pollfd; libc::FD_SETSIZE] = [pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; libc::FD_SETSIZE];
    let mut m = 0;
    for fd in 0..nfds {
        let mut ev = 0;
        if isset(r, fd) {
            ev |= libc::POLLIN;
        }
        if isset(w, fd) {
            ev |= libc::POLLOUT;
        }
        if isset(e, fd) {
            ev |= libc::POLLPRI;
        }
        if ev != 0 {
            pfds[m] = pollfd {
                fd,
                events: ev,
                revents: 0,
            };
            m += 1;
        }
    }
    let timeout = if tv.is_null() {
        -1
    } else {
        // SAFETY: non-null timeval per the contract.
        let t = unsafe { *tv };
        (t.tv_sec.max(0).saturating_mul(1000) + (t.tv_usec.max(0) + 999) / 1000)
            .min(c_int::MAX as i64) as c_int
    };
    // SAFETY: `m` initialised entries of our own array.
    let rc = unsafe { poll(pfds.as_mut_ptr(), m as nfds_t, timeout) };
    if rc < 0 {
        return rc;
    }
    for s in [r, w, e] {
        if !s.is_null() {
            // SAFETY: a valid set.
            unsafe { libc::FD_ZERO(s) };
        }
    }
    let mut bits = 0;
    for p in &pfds[..m] {
        let set = |s: *mut libc::fd_set, on: bool, bits: &mut c_int| {
            if on && !s.is_null() {
                // SAFETY: a valid set and an fd below FD_SETSIZE.
                unsafe { libc::FD_SET(p.fd, s) };
                *bits += 1;
            }
        };
        let rv = p.revents;
        set(
            r,
            p.events & libc::POLLIN != 0
                && rv & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0,
            &mut bits,
        );
        set(
            w,
            p.events & libc::POLLOUT != 0 && rv & (libc::POLLOUT | libc::POLLERR) != 0,
            &mut bits,
        );
        set(
            e,
            p.events & libc::POLLPRI != 0 && rv & libc::POLLPRI != 0,
            &mut bits,
        );
    }
    bits
}

/// An emulated descriptor in an application's epoll set.
#[derive(Clone, Copy)]
struct Watch {
    epfd: c_int,
    fd: c_int,
    events: u32,
    data: u64,
}

static WATCHES: Mutex<Vec<Watch>> = Mutex::new(Vec::new());
/// Watches registered: the fast path of epoll_wait when 0.
static NWATCH: AtomicUsize = AtomicUsize::new(0);

fn watches() -> std::sync::MutexGuard<'static, Vec<Watch>> {
    WATCHES.lock().unwrap_or_else(|p| p.into_inner())
}

/// epoll_ctl() adding, changing or removing an emulated descriptor.
///
/// # Safety
/// As for epoll_ctl(2).
pub unsafe fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int {
    let mut real_ev = epoll_event { events: 0, u64: 0 };
    let mut want = 0;
    let mut data = 0;
    if !ev.is_null() {
        // SAFETY: non-null event per the contract.
        let e = unsafe { ev.read_unaligned() };
        want = e.events;
        data = e.u64;
        // The set is readable when the port signals; keep the caller's
        // delivery flags (edge-triggered, one-shot, ...).
        let keep =
            (libc::EPOLLET | libc::EPOLLONESHOT | libc::EPOLLWAKEUP | libc::EPOLLEXCLUSIVE) as u32;
        real_ev = epoll_event {
            events: libc::EPOLLIN as u32 | (want & keep),
            u64: data,
        };
    }
    let evp = if ev.is_null() {
        ev
    } else {
        &mut real_ev as *mut _
    };
    // SAFETY: forwarded with our adjusted event.
    let r = unsafe { real::epoll_ctl(epfd, op, fd, evp) };
    if r != 0 {
        return r;
    }
    let mut w = watches();
    w.retain(|x| !(x.epfd == epfd && x.fd == fd));
    if op != libc::EPOLL_CTL_DEL {
        w.push(Watch {
            epfd,
            fd,
            events: want,
            data,
        });
    }
    NWATCH.store(w.len(), Ordering::Release);
    0
}

/// Whether `epfd` may hold emulated descriptors.
pub fn watched(epfd: c_int) -> bool {
    NWATCH.load(Ordering::Acquire) != 0 && watches().iter().any(|w| w.epfd == epfd)
}

/// Drops every watch on `fd` (it is being closed; the kernel drops it from
/// the epoll sets too), and every watch held by `fd` as an epoll set.
pub fn forget_fd(fd: c_int) {
    if NWATCH.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut w = watches();
    w.retain(|x| x.fd != fd && x.epfd != fd);
    NWATCH.store(w.len(), Ordering::Release);
}

/// epoll_wait()/epoll_pwait() on a set holding emulated descriptors.
///
/// # Safety
/// As for epoll_pwait(2).
pub unsafe fn epoll_wait(
    epfd: c_int,
    evs: *mut epoll_event,
    max: c_int,
    timeout_ms: c_int,
    mask: *const libc::sigset_t,
) -> c_int {
    if evs.is_null() || max <= 0 {
        // SAFETY: forwarded; the kernel reports the error.
        return unsafe { real::epoll_pwait(epfd, evs, max, timeout_ms, mask) };
    }
    let deadline = deadline_of(timeout_ms);
    loop {
        let mut mine: [Watch; MAX_NM_PER_CALL] = [Watch {
            epfd: -1,
            fd: -1,
            events: 0,
            data: 0,
        }; MAX_NM_PER_CALL];
        let mut k = 0;
        for w in watches().iter().filter(|w| w.epfd == epfd) {
            if k < MAX_NM_PER_CALL {
                mine[k] = *w;
                k += 1;
            }
        }
        let mine = &mine[..k];
        let mut ready: [(u64, u32); MAX_NM_PER_CALL] = [(0, 0); MAX_NM_PER_CALL];
        let mut nr = 0;
        // What ended the spin, if one did.
        let mut spun = Spun::No;
        for (pass, look) in LOOKS.into_iter().enumerate() {
            // Before arming: spin while that pays, looking at our
            // descriptors in memory and, every few turns, whether the set
            // has events of its own (a zero-timeout poll of the epoll set,
            // which takes none: an edge-triggered event is not lost).
            if pass == 1 {
                let mut turns = 0u32;
                let found = spin_before_sleep(timeout_ms, || {
                    turns = turns.wrapping_add(1);
                    if turns.is_multiple_of(KERNEL_LOOK_EVERY) && set_has_events(epfd) {
                        spun = Spun::Kernel;
                        return true;
                    }
                    let ours = mine.iter().any(|w| {
                        table::get(w.fd).is_some_and(|f| f.poll_events(w.events as i16) != 0)
                    });
                    if ours {
                        spun = Spun::Ours;
                    }
                    ours
                });
                if found {
                    break;
                }
            }
            for w in mine {
                if let Some(f) = table::get(w.fd) {
                    let r = look(&f, w.events as i16);
                    if r != 0 {
                        ready[nr] = (w.data, r as u32);
                        nr += 1;
                    }
                }
            }
            if nr > 0 {
                break;
            }
        }
        if nr > 0 {
            // Collect the other descriptors' events without sleeping, then
            // add ours.
            let nr = nr.min(max as usize);
            let room = max as usize - nr;
            let mut out = 0;
            if room > 0 {
                // SAFETY: the caller's buffer, `room` <= `max` entries.
                let r = unsafe { real::epoll_pwait(epfd, evs, room as c_int, 0, mask) };
                if r > 0 {
                    // SAFETY: the kernel filled `r` entries.
                    let got = unsafe { std::slice::from_raw_parts_mut(evs, r as usize) };
                    for i in 0..got.len() {
                        let e = got[i];
                        let data = e.u64;
                        match mine.iter().find(|w| w.data == data) {
                            // A stale interrupt of ours: drain it; the
                            // ready list already has what is there.
                            Some(w) => {
                                if let Some(f) = table::get(w.fd) {
                                    f.after_wait();
                                }
                            }
                            None => {
                                got[out] = e;
                                out += 1;
                            }
                        }
                    }
                }
            }
            for &(data, events) in &ready[..nr] {
                // SAFETY: `out` < `max`: at most `room` others plus `nr`.
                unsafe { evs.add(out).write(epoll_event { events, u64: data }) };
                out += 1;
            }
            return out as c_int;
        }
        if spun == Spun::Ours {
            // Ours became ready during the spin: the next first look takes
            // it. (The set's own events are taken below, without a sleep:
            // the kernel has them ready.)
            continue;
        }
        let t_sleep = Instant::now();
        // SAFETY: the caller's buffer of `max` events.
        let r = unsafe { real::epoll_pwait(epfd, evs, max, left_ms(deadline), mask) };
        after_sleep(t_sleep.elapsed(), r > 0);
        if r <= 0 {
            return r;
        }
        // SAFETY: the kernel filled `r` entries.
        let got = unsafe { std::slice::from_raw_parts_mut(evs, r as usize) };
        let mut out = 0;
        for i in 0..got.len() {
            let e = got[i];
            let data = e.u64;
            let w = mine.iter().find(|w| w.data == data);
            let keep = match w.and_then(|w| table::get(w.fd).map(|f| (w, f))) {
                Some((w, f)) => {
                    f.after_wait();
                    let ready = f.poll_events(w.events as i16) as u32;
                    (ready != 0).then_some(epoll_event {
                        events: ready,
                        u64: data,
                    })
                }
                None => Some(e),
            };
            if let Some(k) = keep {
                got[out] = k;
                out += 1;
            }
        }
        if out > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
            return out as c_int;
        }
    }
}
