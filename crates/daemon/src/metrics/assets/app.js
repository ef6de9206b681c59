// The ringswitch web view: polls api/state every second and shows
// switches, their ports with packet, bit and drop rates and a plot of the
// last five minutes, pipes, and the workers' CPU. Rates are counter
// differences over the daemon's own clock (at_ns), so a slow network or a
// throttled tab does not bend them. No framework, nothing from elsewhere.
//
// Stable hooks for scripts and tests: each port row is
// <tr data-port="vale0:a" data-kind data-open data-rx-pps data-tx-pps
// data-rx-bps data-tx-bps data-drop-pps data-drops>, each worker row
// <tr data-worker="0" data-cpu data-busy data-pps>; rates are plain
// numbers per second ("" until two readings exist).
"use strict";

(() => {
  const POLL_MS = 1000;
  const HISTORY_S = 300;
  const DROP_FIELDS = [
    "drop_rx_full", "drop_link_down", "drop_malformed", "drop_short", "drop_long",
    "drop_no_dest", "drop_vlan", "drop_kernel", "kernel_tx_invalid",
  ];

  let prev = null; // the previous state
  const history = new Map(); // port -> [{t, rx, tx, drop}]

  const $ = (id) => document.getElementById(id);

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({
      "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
    })[c]);
  }

  function si(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "\u2013";
    const steps = [[1e9, "G"], [1e6, "M"], [1e3, "K"]];
    for (const [f, p] of steps) {
      if (Math.abs(v) >= f) return (v / f).toFixed(v / f >= 100 ? 0 : 2) + " " + p + unit;
    }
    return (v >= 100 || v === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + unit;
  }

  function pct(v) {
    return v === null || !isFinite(v) ? "\u2013" : (100 * v).toFixed(1) + " %";
  }

  // A share of 0..1 as a bar (SVG attributes: the page's policy allows
  // no inline style).
  function bar(v, cls) {
    const w = v === null || !isFinite(v) ? 0 : Math.max(0, Math.min(1, v)) * 100;
    return '<svg class="bar ' + cls + '" viewBox="0 0 100 10" preserveAspectRatio="none">' +
      '<rect class="track" width="100" height="10"/><rect class="fill" width="' + w.toFixed(1) +
      '" height="10"/></svg>';
  }

  function drops(st) {
    return DROP_FIELDS.reduce((n, f) => n + (st[f] || 0), 0);
  }

  // Per-second rate of a counter between two readings dt seconds apart
  // (null without a previous reading; 0 when a counter went back, as a
  // port made anew does).
  function rate(now, before, dt) {
    if (before === undefined || before === null || !(dt > 0)) return null;
    return now >= before ? (now - before) / dt : 0;
  }

  // The port's last five minutes (what this page has seen of them: the
  // plot spans from its first reading while it has fewer).
  function spark(points, tNow) {
    const W = 160, H = 32;
    if (points.length < 2) return '<svg class="spark" viewBox="0 0 160 32"></svg>';
    let max = 1;
    for (const p of points) max = Math.max(max, p.rx, p.tx, p.drop);
    const span = Math.max(tNow - points[0].t, 1e-3);
    const line = (key) => points.map((p) => {
      const x = W - ((tNow - p.t) / span) * W;
      const y = H - 1 - (p[key] / max) * (H - 3);
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" ");
    return '<svg class="spark" viewBox="0 0 160 32" preserveAspectRatio="none">' +
      '<polyline class="rx" points="' + line("rx") + '"/>' +
      '<polyline class="tx" points="' + line("tx") + '"/>' +
      '<polyline class="drop" points="' + line("drop") + '"/></svg>';
  }

  function portRows(s, dt, tNow, alerts) {
    const stats = new Map(s.stats.map((st) => [st.name, st]));
    const before = prev ? new Map(prev.stats.map((st) => [st.name, st])) : new Map();
    const bySwitch = new Map(s.switches.map((w) => [w.name, []]));
    for (const p of s.ports) {
      if (p.kind === "pipe") continue;
      const sw = p.name.split(":")[0];
      if (!bySwitch.has(sw)) bySwitch.set(sw, []);
      const st = stats.get(p.name);
      const b = before.get(p.name);
      const r = {
        rxPps: st && rate(st.rx_packets, b && b.rx_packets, dt),
        txPps: st && rate(st.tx_packets, b && b.tx_packets, dt),
        rxBps: st && rate(st.rx_bytes * 8, b && b.rx_bytes * 8, dt),
        txBps: st && rate(st.tx_bytes * 8, b && b.tx_bytes * 8, dt),
        dropPps: st && rate(drops(st), b && drops(b), dt),
      };
      let why = [];
      if (st && b && dt > 0) {
        for (const f of DROP_FIELDS) {
          const d = rate(st[f] || 0, b[f] || 0, dt);
          if (d > 0) why.push(f.replace(/^drop_/, "") + " " + si(d, "/s"));
        }
      }
      if (r.rxPps !== null && r.rxPps !== undefined) {
        const h = history.get(p.name) || [];
        h.push({ t: tNow, rx: r.rxPps, tx: r.txPps, drop: r.dropPps });
        while (h.length && tNow - h[0].t > HISTORY_S) h.shift();
        history.set(p.name, h);
      }
      const dropping = r.dropPps > 0;
      if (dropping) alerts.push(esc(p.name) + ": " + si(r.dropPps, "drops/s") + " (" + esc(why.join(", ")) + ")");
      const num = (v) => (v === null || v === undefined ? "" : String(v));
      const total = st ? drops(st) : 0;
      bySwitch.get(sw).push(
        '<tr data-port="' + esc(p.name) + '" data-kind="' + esc(p.kind) + '" data-open="' + p.open +
        '" data-rx-pps="' + num(r.rxPps) + '" data-tx-pps="' + num(r.txPps) +
        '" data-rx-bps="' + num(r.rxBps) + '" data-tx-bps="' + num(r.txBps) +
        '" data-drop-pps="' + num(r.dropPps) + '" data-drops="' + total + '" class="' +
        (p.open ? "up" : "down") + (dropping ? " dropping" : "") + '">' +
        '<td class="name">' + esc(p.name) + "</td>" +
        "<td>" + esc(p.kind) + "</td>" +
        '<td class="state">' + (p.open ? "open" : "down") + "</td>" +
        '<td class="num">' + (p.worker === undefined ? "" : p.worker) + "</td>" +
        '<td class="num">' + si(r.rxPps, "pps") + "</td>" +
        '<td class="num">' + si(r.rxBps, "bit/s") + "</td>" +
        '<td class="num">' + si(r.txPps, "pps") + "</td>" +
        '<td class="num">' + si(r.txBps, "bit/s") + "</td>" +
        '<td class="num drops" title="' + esc(why.join(", ")) + '">' + si(r.dropPps, "/s") +
        (why.length ? '<span class="why">' + esc(why.join(", ")) + "</span>" : "") + "</td>" +
        '<td class="num">' + total.toLocaleString("en") + "</td>" +
        '<td class="plot">' + spark(history.get(p.name) || [], tNow) + "</td></tr>");
    }
    const head = "<tr><th>Port</th><th>Kind</th><th>State</th><th class=num>Worker</th>" +
      "<th class=num>RX</th><th class=num>RX bits</th><th class=num>TX</th><th class=num>TX bits</th>" +
      "<th class=num>Drops</th><th class=num>Drops (total)</th><th>Last 5 minutes</th></tr>";
    const info = new Map(s.switches.map((w) => [w.name, w]));
    let html = "";
    for (const [sw, rows] of bySwitch) {
      const w = info.get(sw);
      const sub = w ? w.ports + " ports, " + w.macs + " MACs learned" + (w.openflow ? ", OpenFlow" : "") : "";
      html += '<section class="switch" data-switch="' + esc(sw) + '"><h2>' + esc(sw) +
        '<span class="sub">' + esc(sub) + "</span></h2>" +
        (rows.length ? "<table>" + head + rows.join("") + "</table>" : '<p class="note">No ports.</p>') +
        "</section>";
    }
    if (!html) html = '<section><p class="note">No switches yet: ports opened as vale0:a make one.</p></section>';
    return html;
  }

  function pipeRows(s) {
    const ends = s.ports.filter((p) => p.kind === "pipe");
    $("pipes-section").hidden = ends.length === 0;
    let html = "<tr><th>Pipe end</th><th>State</th></tr>";
    for (const p of ends) {
      html += '<tr data-pipe="' + esc(p.name) + '" data-open="' + p.open + '"><td class="name">' +
        esc(p.name) + '</td><td class="state">' + (p.open ? "open" : "closed") + "</td></tr>";
    }
    return html;
  }

  function workerRows(s, dt) {
    const before = prev ? new Map(prev.workers.map((w) => [w.worker, w])) : new Map();
    let html = "<tr><th>Worker</th><th class=num>Sources</th><th>CPU</th><th>Busy</th>" +
      "<th class=num>Frames</th><th class=num>Wake-ups</th><th class=num>Frames per batch</th></tr>";
    for (const w of s.workers) {
      const b = before.get(w.worker);
      const up = b ? w.uptime_ns - b.uptime_ns : 0;
      const cpu = b && up > 0 && w.cpu_ns ? (w.cpu_ns - b.cpu_ns) / up : null;
      const busy = b && up > 0 ? (w.busy_ns - b.busy_ns) / up : null;
      const pps = b ? rate(w.packets, b.packets, dt) : null;
      const wakes = b ? rate(w.wakeups, b.wakeups, dt) : null;
      const batches = b ? w.batches - b.batches : 0;
      const perBatch = batches > 0 ? (w.packets - b.packets) / batches : null;
      html += '<tr data-worker="' + w.worker + '" data-cpu="' + (cpu === null ? "" : cpu) +
        '" data-busy="' + (busy === null ? "" : busy) + '" data-pps="' + (pps === null ? "" : pps) + '">' +
        '<td class="name">' + w.worker + "</td>" +
        '<td class="num">' + w.sources + "</td>" +
        "<td>" + bar(cpu, "cpu") + pct(cpu) + "</td>" +
        "<td>" + bar(busy, "busy") + pct(busy) + "</td>" +
        '<td class="num">' + si(pps, "/s") + "</td>" +
        '<td class="num">' + si(wakes, "/s") + "</td>" +
        '<td class="num">' + (perBatch === null ? "\u2013" : perBatch.toFixed(1)) + "</td></tr>";
    }
    return html;
  }

  function render(s) {
    const dt = prev ? (s.at_ns - prev.at_ns) / 1e9 : 0;
    if (prev && !(dt > 0)) return; // the same reading again
    const tNow = s.at_ns / 1e9;
    const alerts = [];
    $("switches").innerHTML = portRows(s, dt, tNow, alerts);
    $("pipes").innerHTML = pipeRows(s);
    $("workers").innerHTML = workerRows(s, dt);
    $("version").textContent = "version " + s.version;
    const p = s.process;
    const cpu = prev && dt > 0 ? (p.cpu_ns - prev.process.cpu_ns) / (dt * 1e9) : null;
    $("process").textContent = "daemon: CPU " + pct(cpu) + ", " + si(p.rss_bytes, "B") + " resident, " +
      p.threads + " threads";
    const a = $("alerts");
    a.hidden = alerts.length === 0;
    a.innerHTML = alerts.length ? "Dropping now: " + alerts.join("; ") : "";
    prev = s;
  }

  function status(state, text) {
    const el = $("status");
    el.dataset.state = state;
    el.textContent = text;
  }

  async function poll() {
    try {
      const r = await fetch("api/state", { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      render(await r.json());
      status("live", "live, " + new Date().toLocaleTimeString());
    } catch (e) {
      status("down", "daemon not answering (" + e.message + "); figures as last seen");
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
