//! `ringswitch top` (issue 21), real processes: a daemon, pkt-gen through a
//! switch, and top in a tmux pane (its screen read with capture-pane, quit
//! with `q`, Ctrl-C or SIGTERM, the terminal checked afterwards), on a pipe
//! (plain lines), and without a daemon.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{text, Daemon, BIN};

/// How long the screen may take to show what it should: generous, so a
/// loaded machine only makes the test slower.
const DEADLINE: Duration = Duration::from_secs(60);

/// A child killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Traffic from vale0:a to vale0:b (broadcast, so it floods to b), at a
/// rate the slowest machine keeps up with, for far longer than a test.
fn traffic(d: &Daemon) -> (Proc, Proc) {
    let rx = Proc(d.pktgen(&["-f", "rx", "-i", "vale0:b"]));
    d.wait_open(&["vale0:b"]);
    let tx = Proc(d.pktgen(&[
        "-f",
        "tx",
        "-i",
        "vale0:a",
        "-R",
        "20000",
        "-n",
        "100000000",
    ]));
    (rx, tx)
}

/// The number top printed (`0`, `999`, `20.0k`, `9.58M`); none for `-`.
fn si_value(s: &str) -> Option<f64> {
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k') => (&s[..i], 1e3),
        (i, 'M') => (&s[..i], 1e6),
        (i, 'G') => (&s[..i], 1e9),
        (i, 'T') => (&s[..i], 1e12),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * mult)
}

/// The cells of `port`'s row after its name: KIND, WORKER, RX_PPS,
/// RX_BIT/S, TX_PPS, TX_BIT/S, DROPS/S, DROPS.
fn port_cells<'a>(screen: &'a str, port: &str) -> Option<Vec<&'a str>> {
    screen.lines().find_map(|l| {
        let cells: Vec<&str> = l.split_whitespace().collect();
        let at = cells.iter().position(|c| *c == port)?;
        Some(cells[at + 1..].to_vec())
    })
}

/// Whether the screen shows a port table with `port` receiving.
fn shows_receiving(screen: &str, port: &str) -> bool {
    screen.contains("RX_PPS")
        && port_cells(screen, port)
            .and_then(|c| c.get(2).and_then(|rx| si_value(rx)))
            .is_some_and(|rx| rx > 0.0)
}

/// A tmux server of our own (its own socket), killed on drop.
struct Tmux {
    name: String,
    dir: PathBuf,
}

impl Tmux {
    fn new(tag: &str) -> Tmux {
        let name = format!("rs-top-{}-{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // No status line: the pane is the whole window.
        std::fs::write(dir.join("tmux.conf"), "set -g status off\n").unwrap();
        Tmux { name, dir }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-L")
            .arg(&self.name)
            .arg("-f")
            .arg(self.dir.join("tmux.conf"))
            .env_remove("TMUX")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().unwrap();
        assert!(out.status.success(), "tmux {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    fn format(&self, f: &str) -> String {
        self.run(&["display-message", "-p", "-t", "top", f])
            .trim()
            .to_string()
    }

    /// The file the pane's script writes when top has ended: top's exit
    /// status, then whether the terminal's settings are as before.
    fn done_file(&self) -> PathBuf {
        self.dir.join("done")
    }

    /// Starts `ringswitch --socket S top ARGS` in a 150x40 pane, between
    /// two `stty -g` of the pane's terminal; the pane's shell stays after
    /// it (asleep), so that the terminal it left can be looked at.
    fn start_top(&self, socket: &Path, args: &str) {
        let script = self.dir.join("top.sh");
        let done = self.done_file();
        std::fs::write(
            &script,
            format!(
                "stty -g > '{d}.before'\n\
                 '{BIN}' --socket '{s}' top {args}\n\
                 echo \"status $?\" > '{d}.tmp'\n\
                 if [ \"$(stty -g)\" = \"$(cat '{d}.before')\" ]; then echo 'stty same' >> '{d}.tmp'; \
                 else echo \"stty changed: $(cat '{d}.before') -> $(stty -g)\" >> '{d}.tmp'; fi\n\
                 mv '{d}.tmp' '{d}'\n\
                 exec sleep 600\n",
                d = done.display(),
                s = socket.display(),
            ),
        )
        .unwrap();
        self.run(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "150",
            "-y",
            "40",
            "sh",
            script.to_str().unwrap(),
        ]);
    }

    /// Polls the pane until `cond` holds of what it shows.
    fn wait_screen(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if cond(&s) {
                return s;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "{what}: not within {DEADLINE:?}; the pane shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until top has ended; returns what the pane's script wrote.
    fn wait_done(&self) -> String {
        let t0 = Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(self.done_file()) {
                return s;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "top did not end within {DEADLINE:?}; the pane shows:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls the pane's `format` until it reads `want`.
    fn wait_format(&self, what: &str, format: &str, want: &str) {
        let t0 = Instant::now();
        loop {
            let got = self.format(format);
            if got == want {
                return;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "{what}: {format} is {got:?}, not {want:?}, after {DEADLINE:?}; the pane shows:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// top's process id: the child of the pane's shell.
    fn top_pid(&self) -> i32 {
        let sh = self.format("#{pane_pid}");
        let children = format!("/proc/{sh}/task/{sh}/children");
        let pid = std::fs::read_to_string(&children).unwrap_or_default();
        pid.split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no child of the pane's shell in {children}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("tmux is not installed: skipping the terminal test of `ringswitch top`");
    }
    ok
}

/// How the test ends top.
enum Quit {
    Key(&'static str),
    Sigterm,
}

/// top in a tmux pane shows both ports and vale0:b's rate; `quit` ends it
/// with status 0, the terminal as it was (settings, normal screen,
/// cursor shown).
fn watch_then_quit(tag: &str, quit: Quit) {
    if !have_tmux() {
        return;
    }
    let d = Daemon::start(tag);
    let _traffic = traffic(&d);
    let tmux = Tmux::new(tag);
    tmux.start_top(&d.socket, "--interval 0.5");
    let screen = tmux.wait_screen("both ports, and vale0:b receiving", |s| {
        s.contains("vale0:a") && shows_receiving(s, "vale0:b")
    });
    eprintln!("the pane showed:\n{screen}");
    assert_eq!(
        tmux.format("#{alternate_on} #{cursor_flag}"),
        "1 0",
        "top runs on the alternate screen, the cursor hidden"
    );
    // The sender's row: sending, not receiving.
    let a = port_cells(&screen, "vale0:a").unwrap();
    assert!(si_value(a[4]).is_some_and(|tx| tx > 0.0), "{a:?}");
    // `s` orders by rx: the receiver first.
    tmux.run(&["send-keys", "-t", "top", "s"]);
    tmux.wait_screen("sorted by rx", |s| {
        s.contains("sort rx")
            && s.find("vale0:b")
                .zip(s.find("vale0:a"))
                .is_some_and(|(b, a)| b < a)
    });

    match quit {
        Quit::Key(k) => {
            tmux.run(&["send-keys", "-t", "top", k]);
        }
        Quit::Sigterm => {
            let pid = tmux.top_pid();
            // SAFETY: kill has no memory preconditions; the pid is top's,
            // a child of the pane's shell that waits for it.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        }
    }
    let done = tmux.wait_done();
    assert!(done.contains("status 0"), "{done}");
    assert!(done.contains("stty same"), "{done}");
    // What top wrote last reaches tmux before the shell's file, or a
    // moment after: waited for, never assumed.
    tmux.wait_format(
        "the normal screen with a cursor after top",
        "#{alternate_on} #{cursor_flag}",
        "0 1",
    );
    let after = tmux.screen();
    assert!(
        !after.contains("RX_PPS"),
        "the normal screen holds top's table:\n{after}"
    );
}

#[test]
fn top_in_a_terminal_shows_ports_and_rates_and_q_quits() {
    watch_then_quit("q", Quit::Key("q"));
}

#[test]
fn top_in_a_terminal_quits_on_ctrl_c() {
    watch_then_quit("ctrlc", Quit::Key("C-c"));
}

#[test]
fn top_in_a_terminal_puts_it_back_on_sigterm() {
    watch_then_quit("term", Quit::Sigterm);
}

#[test]
fn top_in_a_terminal_waits_for_the_daemon_and_reconnects() {
    if !have_tmux() {
        return;
    }
    // The socket Daemon::start("back") listens on (tests/common).
    let socket = std::env::temp_dir().join(format!("rs-c-{}-back.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let tmux = Tmux::new("back");
    tmux.start_top(&socket, "--interval 0.2");
    tmux.wait_screen("no daemon yet", |s| s.contains("daemon not reachable"));
    let d = Daemon::start("back");
    assert_eq!(d.socket, socket);
    ctl(&d, &["port", "add", "vale0:x"]);
    tmux.wait_screen("the daemon's port", |s| {
        !s.contains("daemon not reachable") && port_cells(s, "vale0:x").is_some()
    });
    // Gone, then back: top stays, says so, and connects again.
    drop(d);
    tmux.wait_screen("the daemon gone", |s| s.contains("daemon not reachable"));
    let d = Daemon::start("back");
    ctl(&d, &["port", "add", "vale0:y"]);
    let screen = tmux.wait_screen("connected again", |s| {
        s.contains("reconnected to the daemon") && port_cells(s, "vale0:y").is_some()
    });
    assert!(port_cells(&screen, "vale0:x").is_none(), "{screen}");
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let done = tmux.wait_done();
    assert!(done.contains("status 0"), "{done}");
    assert!(done.contains("stty same"), "{done}");
}

fn top(socket: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--socket")
        .arg(socket)
        .arg("top")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ctl(d: &Daemon, args: &[&str]) {
    common::ctl_ok_at(&d.socket, args);
}

#[test]
fn top_on_a_pipe_prints_plain_lines() {
    let d = Daemon::start("plain");
    for p in ["vale0:a", "vale0:b", "vale1:c"] {
        ctl(&d, &["port", "add", p]);
    }
    let out = top(&d.socket, &["--iterations", "2", "--interval", "0.2"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!out.stdout.contains(&0x1b), "escape bytes: {}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    // A refresh: a block of lines, one blank line after it.
    let blocks: Vec<&str> = stdout.split_terminator("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{stdout}");
    for (i, b) in blocks.iter().enumerate() {
        // Each refresh starts with the time, as a log line does.
        let first = b.lines().next().unwrap();
        assert!(
            first.as_bytes()[..4].iter().all(u8::is_ascii_digit)
                && first.contains("ringswitch top"),
            "{first}"
        );
        assert!(b.lines().all(|l| !l.is_empty()), "{stdout}");
        for p in ["vale0:a", "vale0:b", "vale1:c"] {
            let cells =
                port_cells(b, p).unwrap_or_else(|| panic!("no {p} in refresh {i}:\n{stdout}"));
            // Rates from the second refresh on: the first has one sample.
            let rx = cells[2];
            match i {
                0 => assert_eq!(rx, "-", "{stdout}"),
                _ => assert_eq!(rx, "0", "{stdout}"),
            }
        }
    }

    // One switch only.
    let out = top(
        &d.socket,
        &["--iterations", "1", "--switch", "vale1", "--sort", "name"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("vale1:c"), "{stdout}");
    assert!(!stdout.contains("vale0:"), "{stdout}");

    // A switch that is not there: the daemon's refusal, said plainly.
    let out = top(&d.socket, &["--iterations", "1", "--switch", "vale9"]);
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vale9"), "{stderr}");
}

#[test]
fn top_without_a_daemon_says_so() {
    let socket = std::env::temp_dir().join(format!("rs-top-{}-none.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let out = top(&socket, &["--iterations", "3"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "ringswitch: no ringswitch daemon is listening on {}",
            socket.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
