"""The page served at ``/dashboard``: one self-contained HTML file (no CDN, no build step).

The page itself needs no key; what it shows does (the operator scope): it sends the key given in its URL's
fragment, ``/dashboard#key=<key>``, which browsers never send to the server (so no log holds it), keeps it
in the tab's session storage, and takes it off the address bar. It polls ``/v1/dashboard`` every two
seconds (consumer lag as ``voxlog lag --json`` prints it, and the projection's recent activity) and
redraws: a status per consumer group, its lag by partition as a heat strip, throughput, phase latencies,
the cache ratio, the nodes (one silent past its heartbeat timeout shown as gone), each live worker's
queue by tenant and priority (as its last heartbeat counted it) and the dead-letter count. Every figure
carries a ``data-*`` attribute, so that a test reads what a person sees.

An answer without figures (a 429 while the key is over its rate, a 503) is shown as the API gave it, with its
status in ``data-answered``, and the figures drawn last stay; the next poll waits for its Retry-After. Only a
request that got no answer says "cannot reach the API".
"""

from __future__ import annotations

from typing import Final

PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>voxlog dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  :root { font-family: system-ui, sans-serif; color: #1d2330; background: #f5f6f8; }
  body { margin: 0; padding: 20px 28px; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h2 { font-size: 14px; text-transform: uppercase; letter-spacing: .06em; color: #5a6275; margin: 22px 0 8px; }
  .sub { color: #5a6275; font-size: 13px; }
  .grid { display: grid; grid-template-columns: repeat(4, minmax(150px, 1fr)); gap: 12px; }
  .card { background: #fff; border-radius: 8px; padding: 12px 14px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
  .big { font-size: 26px; font-weight: 600; }
  table { border-collapse: collapse; width: 100%; background: #fff; border-radius: 8px; overflow: hidden;
          box-shadow: 0 1px 2px rgba(0,0,0,.08); font-size: 13px; }
  th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid #eceef2; }
  th { background: #fafbfc; color: #5a6275; font-weight: 600; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  .status { padding: 2px 8px; border-radius: 10px; font-weight: 600; font-size: 12px; color: #fff; }
  .OK { background: #2e8b57; } .WARN { background: #d4a017; }
  .STALL { background: #d2691e; } .STOP { background: #c0392b; }
  .strip { display: flex; gap: 2px; margin-top: 4px; }
  .cell { width: 14px; height: 14px; border-radius: 2px; background: #e3e7ee; }
  .error { color: #c0392b; font-weight: 600; }
  tr.gone td { color: #9aa1af; }
</style>
</head>
<body data-ready="false">
<h1>voxlog</h1>
<div class="sub">consumer lag from Kafka's offsets, activity from the projection; refreshed every 2 s
  &middot; sampled <span id="at">-</span> <span id="error" class="error"></span></div>

<h2>Throughput and cache</h2>
<div class="grid">
  <div class="card"><div class="sub">jobs per second (last minute)</div><div class="big" id="jobs-per-s">-</div></div>
  <div class="card"><div class="sub">completed / failed (10 min)</div>
    <div class="big"><span id="completed">-</span> / <span id="failed">-</span></div></div>
  <div class="card"><div class="sub">served without synthesis (cache, coalescing)</div>
    <div class="big" id="cache-ratio">-</div></div>
  <div class="card"><div class="sub">dead-letter topic</div><div class="big" id="dead-letters">-</div></div>
</div>

<h2>Consumer lag</h2>
<table id="lag"><thead><tr><th>group</th><th>status</th><th class="num">members</th>
  <th class="num">lag (records)</th><th class="num">lag (s)</th><th class="num">rate /s</th>
  <th class="num">drain (s)</th><th>by partition</th><th>why</th></tr></thead><tbody></tbody></table>

<h2>Phase latency, last 10 minutes (s)</h2>
<table id="phases"><thead><tr><th>phase</th><th class="num">p50</th><th class="num">p95</th><th class="num">p99</th>
  </tr></thead><tbody></tbody></table>

<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>worker</th><th>engine</th><th>device</th><th>current job</th><th>segments</th>
  <th class="num">claims held</th><th class="num">waiting</th><th class="num">busy</th>
  <th class="num">last heartbeat</th></tr></thead><tbody></tbody></table>

<h2>Worker queues (jobs read, not claimed yet, by tenant and priority)</h2>
<table id="queues"><thead><tr><th>worker</th><th>tenant</th><th>priority</th><th class="num">jobs</th>
  <th class="num">characters</th></tr></thead><tbody></tbody></table>

<script>
"use strict";
const fmt = (v, digits = 1) => v === null || v === undefined ? "-" : Number(v).toFixed(digits);
const text = (id, value) => { document.getElementById(id).textContent = value; };

function cell(content, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  if (content instanceof Node) td.appendChild(content); else td.textContent = content;
  return td;
}

function strip(group) {
  const box = document.createElement("div");
  box.className = "strip";
  const most = Math.max(1, ...group.partitions.map(p => p.records));
  for (const p of group.partitions) {
    const c = document.createElement("div");
    c.className = "cell";
    c.dataset.partition = p.partition;
    c.dataset.records = p.records;
    if (p.records > 0) c.style.background = `rgba(192, 57, 43, ${0.25 + 0.75 * p.records / most})`;
    c.title = `partition ${p.partition}: ${p.records} behind, ${fmt(p.seconds)} s`;
    box.appendChild(c);
  }
  return box;
}

function drawLag(lag) {
  const body = document.querySelector("#lag tbody");
  body.replaceChildren();
  for (const g of lag.groups) {
    const tr = document.createElement("tr");
    tr.dataset.group = g.group;
    tr.dataset.records = g.records;
    tr.dataset.status = g.status;
    const badge = document.createElement("span");
    badge.className = `status ${g.status}`;
    badge.textContent = g.status;
    tr.append(cell(g.group), cell(badge), cell(g.members === null ? "-" : g.members, "num"),
              cell(g.records.toLocaleString(), "num"), cell(fmt(g.seconds), "num"), cell(fmt(g.per_s), "num"),
              cell(fmt(g.drain_s), "num"), cell(strip(g)), cell(g.reason));
    body.appendChild(tr);
  }
  text("dead-letters", lag.dead_letters === null ? "-" : lag.dead_letters.toLocaleString());
  text("error", lag.error || "");
}

function drawActivity(a) {
  if (!a) { text("error", "the projection cannot be read"); return; }
  text("jobs-per-s", fmt(a.jobs_per_s, 2));
  text("completed", a.completed);
  text("failed", a.failed);
  text("cache-ratio", a.cache_ratio === null ? "-" : `${Math.round(100 * a.cache_ratio)} %`);
  const phases = document.querySelector("#phases tbody");
  phases.replaceChildren();
  for (const [name, q] of Object.entries(a.phases_s)) {
    const tr = document.createElement("tr");
    tr.dataset.phase = name;
    tr.append(cell(name), cell(fmt(q && q.p50, 3), "num"), cell(fmt(q && q.p95, 3), "num"),
              cell(fmt(q && q.p99, 3), "num"));
    phases.appendChild(tr);
  }
  const nodes = document.querySelector("#nodes tbody");
  nodes.replaceChildren();
  for (const n of a.nodes) {
    const tr = document.createElement("tr");
    tr.dataset.worker = n.worker_id;
    tr.dataset.state = n.state;
    const gone = n.state === "gone";  // silent past its heartbeat timeout: what it last said is not what it does
    if (gone) tr.className = "gone";
    const busy = gone || n.busy_fraction === null ? "-" : `${Math.round(100 * n.busy_fraction)} %`;
    const waiting = n.queue.reduce((sum, q) => sum + q.jobs, 0);
    tr.dataset.claims = n.claims;
    tr.dataset.waiting = waiting;
    tr.append(cell(n.worker_id), cell(`${n.engine} ${n.model_version}`), cell(n.device),
              cell(gone ? "gone" : n.job_id || "idle"), cell(gone ? "-" : n.segments || "-"),
              cell(gone ? "-" : n.claims, "num"), cell(gone ? "-" : waiting.toLocaleString(), "num"),
              cell(busy, "num"), cell(`${fmt(n.silent_s)} s ago`, "num"));
    nodes.appendChild(tr);
  }
  const queues = document.querySelector("#queues tbody");
  queues.replaceChildren();
  for (const n of a.nodes) {
    if (n.state === "gone") continue;  // what a silent worker last said waits on it is not what waits now
    for (const q of n.queue) {
      const tr = document.createElement("tr");
      Object.assign(tr.dataset, { queueWorker: n.worker_id, tenant: q.tenant, priority: q.priority, jobs: q.jobs });
      tr.append(cell(n.worker_id), cell(q.tenant), cell(q.priority), cell(q.jobs.toLocaleString(), "num"),
                cell(q.text_chars.toLocaleString(), "num"));
      queues.appendChild(tr);
    }
  }
}

// The operator's key comes in the URL's fragment (/dashboard#key=...), which no request carries: kept for
// this tab only, and taken off the address bar so that a screen share does not show it.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.has("key")) {
  sessionStorage.setItem("voxlog-key", fragment.get("key"));
  history.replaceState(null, "", location.pathname + location.search);
}
const key = sessionStorage.getItem("voxlog-key");

// What the API said when its answer holds no figures: its own words (a 429's "over its rate ..."), or the
// status alone when a proxy answered with a page of its own.
async function detailOf(response) {
  try {
    const body = await response.json();
    return body && body.detail ? body.detail : response.statusText;
  } catch (err) {
    return response.statusText;
  }
}

// Seconds until the next poll: the 2 s cadence, or what Retry-After asks for when it asks for more (a key over
// its rate, read every 2 s, would only stay refused), at most a minute so that the page does not look dead.
function nextPollS(response) {
  const asked = Number(response && response.headers.get("Retry-After"));
  return Number.isFinite(asked) && asked > 2 ? Math.min(asked, 60) : 2;
}

async function refresh() {
  let response = null;
  try {
    try {
      const headers = key ? { Authorization: `Bearer ${key}` } : {};
      response = await fetch("/v1/dashboard", { cache: "no-store", headers });
    } catch (err) {
      // fetch rejects only when no answer came (the network, the API down): the one case that is "cannot reach".
      text("error", `cannot reach the API: ${err}`);
      return;
    }
    if (!response.ok) {
      // An answer without figures (under load, a key over its rate: 429): what the page drew last stays, and
      // the page says what the API answered rather than reading the error's body as figures.
      const why = await detailOf(response);
      document.body.dataset.answered = String(response.status);
      if (response.status === 401 || response.status === 403) {
        text("error", `${why}: open /dashboard#key=<a key with the operator scope> (voxlog keys create)`);
        document.body.dataset.refused = String(response.status);
      } else {
        text("error", `the API answered ${response.status}: ${why}`);
      }
      return;
    }
    const body = await response.json();
    delete document.body.dataset.answered;
    text("at", new Date(body.lag.at).toLocaleTimeString());
    drawLag(body.lag);
    drawActivity(body.activity);
    document.body.dataset.ready = "true";
  } catch (err) {
    // The API answered 200 but the page could not draw it: a fault of the page, not of the network.
    text("error", `cannot show the API's answer: ${err}`);
  } finally {
    setTimeout(refresh, 1000 * nextPollS(response));
  }
}
refresh();
</script>
</body>
</html>
"""
