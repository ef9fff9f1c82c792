// agentr1 view: the browser side of `agentr1 view RUN...`.
//
// Plain JavaScript, no framework, no build step, nothing fetched from outside the server.
// Talks to the JSON API of src/agentr1/view/view_server.cpp:
//   /api/runs, /api/metrics?run&from, /api/steps?run, /api/trajectories?run&step&kind,
//   /api/val_compare?run&index, /api/config?run, /api/summary?run
// Four tabs: Curves (SVG charts, several runs overlaid, EMA smoothing, live polling),
// Trajectories (token-level view of one dump), Validation (one prompt across val steps),
// Config (config.yaml and summary.json).
//
// Model text is only ever put in the page with textContent / createTextNode, never as HTML.
// Stable hooks for tests: path.curve[data-run][data-metric][data-points][data-steps]
// [data-values], circle.val-pt[data-step][data-value], div.traj[data-uid],
// span.tok[data-id][data-value] (response tokens), span.ptok[data-id] (prompt tokens),
// .prompt-new (context the environment or the context policy added), .badge.rewritten.
"use strict";

(function () {
  const POLL_MS = 2000;
  const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                   "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  const DEFAULT_METRICS = ["critic/score/mean", "env/success/mean", "val/success/greedy",
                           "val/reward/greedy", "actor/entropy", "env/response_length/mean"];

  // ---------------------------------------------------------------- small helpers

  // el("div", {class: "x", "data-a": 1}, child, "text", ...): children are nodes or strings
  // (strings become text nodes, so never parsed as HTML).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k === "style" && typeof v === "object") Object.assign(e.style, v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined && c !== false)
      e.appendChild(typeof c === "string" || typeof c === "number"
        ? document.createTextNode(String(c)) : c);
    return e;
  }
  const SVGNS = "http://www.w3.org/2000/svg";
  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const $ = (id) => document.getElementById(id);
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function fmt(v) {
    if (v === undefined || v === null) return "–";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
    return String(Number(v.toPrecision(5)));
  }

  // Errors: shown in the banner at the top, never a blank page.
  const errors = new Map();  // key -> message
  function showError(key, msg) {
    if (msg) errors.set(key, msg); else errors.delete(key);
    const box = $("error");
    clear(box);
    for (const m of errors.values()) box.appendChild(el("div", null, m));
    box.hidden = errors.size === 0;
  }

  // GET a JSON API path; rejects with "GET path: 404 <error>" on failure.
  async function api(path) {
    let res;
    try {
      res = await fetch(path, { cache: "no-store" });
    } catch (e) {
      throw new Error(`GET ${path}: server unreachable (${e.message})`);
    }
    let body = null;
    try { body = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) {
      const why = body && body.error ? body.error : res.statusText;
      throw new Error(`GET ${path}: ${res.status} ${why}`);
    }
    if (body === null) throw new Error(`GET ${path}: the answer is not JSON`);
    return body;
  }
  const q = (params) => Object.entries(params)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");

  // ---------------------------------------------------------------- state

  const state = {
    runs: [],            // [{id, name, path, tokenizer}]
    shown: new Set(),    // run ids overlaid in the charts
    metrics: new Map(),  // run id -> {next, series: Map(metric -> {steps: [], values: []})}
    selected: new Set(), // chosen metric names
    smoothing: 0,
    steps: new Map(),    // run id -> {train: [...], val: [...]}
    userPicked: false,   // the user changed the metric selection (defaults stop applying)
  };
  const runColor = (id) => PALETTE[state.runs.findIndex((r) => r.id === id) % PALETTE.length];
  const runName = (id) => (state.runs.find((r) => r.id === id) || { name: String(id) }).name;

  // ---------------------------------------------------------------- tabs

  function showTab(name) {
    if (!document.querySelector(`.pane[data-pane="${name}"]`)) name = "curves";
    for (const p of document.querySelectorAll(".pane")) p.hidden = p.dataset.pane !== name;
    for (const t of document.querySelectorAll(".tab"))
      t.classList.toggle("active", t.dataset.tab === name);
    if (name === "curves") renderCharts();
    if (name === "traj" && !trajState.loaded) loadTrajectories();
    if (name === "val" && !valState.loaded) loadValIndex();
    if (name === "config") loadConfig();
  }
  window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));

  // ---------------------------------------------------------------- metrics + polling

  async function pollMetrics(run) {
    const m = state.metrics.get(run.id);
    const key = `metrics-${run.id}`;
    try {
      const ans = await api(`/api/metrics?${q({ run: run.id, from: m.next, file: m.file || "" })}`);
      showError(key, null);
      let added = 0, newKeys = false;
      if (typeof ans.file === "string") m.file = ans.file;
      if (ans.reset) {  // metrics.jsonl was replaced (--overwrite, --resume): read it anew
        m.series = new Map();
        added = 1;
      }
      for (const rec of ans.records || []) {
        const step = rec.step;
        if (typeof step !== "number") continue;
        for (const k in rec) {
          if (k === "step") continue;
          const v = rec[k];
          if (typeof v !== "number" || !isFinite(v)) continue;
          let s = m.series.get(k);
          if (!s) { s = { steps: [], values: [] }; m.series.set(k, s); newKeys = true; }
          s.steps.push(step);
          s.values.push(v);
          added++;
        }
      }
      if (typeof ans.next === "number") m.next = ans.next;
      return { added, newKeys };
    } catch (e) {
      showError(key, e.message);
      return { added: 0, newKeys: false };
    }
  }

  async function pollSteps(run) {
    const key = `steps-${run.id}`;
    try {
      const ans = await api(`/api/steps?${q({ run: run.id })}`);
      showError(key, null);
      const old = state.steps.get(run.id);
      const now = { train: ans.train || [], val: ans.val || [] };
      state.steps.set(run.id, now);
      if (valState.loaded && Number($("val-run").value) === run.id && (!old || old.val.join() !== now.val.join()))
        valState.stale = true;  // a new validation dump: the validation tab gains a column
      return !old || old.train.join() !== now.train.join() || old.val.join() !== now.val.join();
    } catch (e) {
      showError(key, e.message);
      return false;
    }
  }

  let polling = false;
  async function pollAll() {
    if (polling) return;
    polling = true;
    try {
      let added = 0, newKeys = false, stepsChanged = false;
      await Promise.all(state.runs.map(async (run) => {
        const r = await pollMetrics(run);
        added += r.added;
        newKeys = newKeys || r.newKeys;
        if (await pollSteps(run)) stepsChanged = true;
      }));
      if (newKeys) {
        // Until the user picks metrics, the default ones are shown as they appear (a page
        // opened before a run's first step fills in when the first metrics arrive).
        if (!state.userPicked) pickDefaultMetrics();
        renderMetricList();
      }
      if ((added || newKeys) && !$("pane-curves").hidden) renderCharts();
      if (stepsChanged) refreshStepSelect();
      if (valState.stale) {
        valState.stale = false;
        if ($("val-index").options.length === 0) await loadValIndex(); else await loadValCompare();
      }
      $("live-status").textContent = `updated ${new Date().toLocaleTimeString()}`;
    } finally {
      polling = false;
    }
  }

  function pickDefaultMetrics() {
    const names = allMetricNames();
    for (const m of DEFAULT_METRICS) if (names.includes(m)) state.selected.add(m);
    if (state.selected.size === 0) for (const m of names.slice(0, 4)) state.selected.add(m);
  }

  function allMetricNames() {
    const names = new Set();
    for (const m of state.metrics.values()) for (const k of m.series.keys()) names.add(k);
    return [...names].sort();
  }

  // ---------------------------------------------------------------- curves: side panel

  function renderRunList() {
    const box = $("run-list");
    clear(box);
    if (state.runs.length === 0) box.appendChild(el("div", { class: "muted" }, "no runs"));
    for (const run of state.runs) {
      const cb = el("input", { type: "checkbox", class: "run-check", "data-run": run.id,
        checked: state.shown.has(run.id), onchange: (ev) => {
          if (ev.target.checked) state.shown.add(run.id); else state.shown.delete(run.id);
          renderCharts();
        } });
      box.appendChild(el("label", { title: run.path },
        cb, el("span", { class: "swatch", style: { background: runColor(run.id) } }), run.name));
    }
  }

  function renderMetricList() {
    const box = $("metric-list");
    const filter = $("metric-filter").value.trim().toLowerCase();
    clear(box);
    const names = allMetricNames();
    let shown = 0;
    for (const name of names) {
      if (filter && !name.toLowerCase().includes(filter) && !state.selected.has(name)) continue;
      shown++;
      const cb = el("input", { type: "checkbox", class: "metric-check", "data-metric": name,
        checked: state.selected.has(name), onchange: (ev) => {
          if (ev.target.checked) state.selected.add(name); else state.selected.delete(name);
          state.userPicked = true;
          renderCharts();
        } });
      box.appendChild(el("label", { class: name.startsWith("val/") ? "val" : null, title: name }, cb, name));
    }
    $("metric-count").textContent = `${shown}/${names.length}`;
  }

  // ---------------------------------------------------------------- curves: charts

  // EMA with bias correction (TensorBoard's smoothing): weight w in [0, 1).
  function ema(values, w) {
    if (!(w > 0)) return values.slice();
    const out = [];
    let acc = 0, n = 0;
    for (const v of values) {
      acc = acc * w + (1 - w) * v;
      n++;
      out.push(acc / (1 - Math.pow(w, n)));
    }
    return out;
  }

  function niceTicks(lo, hi, count) {
    const span = hi - lo;
    if (!(span > 0)) return [lo];
    const raw = span / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => span / s <= count) || raw;
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
      ticks.push(Number(t.toPrecision(12)));
    return ticks;
  }

  // Sorted by step: the trainer writes steps in order, but a resumed run may repeat one.
  function sortedSeries(s) {
    const idx = s.steps.map((_, i) => i);
    idx.sort((a, b) => s.steps[a] - s.steps[b] || a - b);
    return { steps: idx.map((i) => s.steps[i]), values: idx.map((i) => s.values[i]) };
  }

  function renderCharts() {
    const box = $("charts");
    if ($("pane-curves").hidden) return;
    clear(box);
    renderLegend();
    const metrics = [...state.selected].sort();
    if (metrics.length === 0) {
      box.appendChild(el("div", { class: "empty" },
        allMetricNames().length ? "Pick metrics on the left." : "No metrics yet (metrics.jsonl is empty or missing)."));
      return;
    }
    // Two charts a row where there is room (the 12 px gap of #charts between them).
    const avail = box.clientWidth || 900;
    const cols = avail >= 860 ? 2 : 1;
    const width = Math.max(320, Math.floor((avail - 12 * (cols - 1)) / cols) - 2);
    for (const metric of metrics) box.appendChild(chart(metric, width, 230));
  }

  function renderLegend() {
    const box = $("legend");
    clear(box);
    for (const run of state.runs) if (state.shown.has(run.id))
      box.appendChild(el("span", { class: "legend-item" },
        el("span", { class: "swatch", style: { background: runColor(run.id) } }), run.name));
  }

  function chart(metric, W, H) {
    const isVal = metric.startsWith("val/");
    const M = { l: 56, r: 12, t: 24, b: 28 };
    const lines = [];
    let xlo = Infinity, xhi = -Infinity, ylo = Infinity, yhi = -Infinity;
    for (const run of state.runs) {
      if (!state.shown.has(run.id)) continue;
      const s = state.metrics.get(run.id).series.get(metric);
      if (!s || s.steps.length === 0) continue;
      const { steps, values } = sortedSeries(s);
      const drawn = ema(values, state.smoothing);
      for (let i = 0; i < steps.length; i++) {
        xlo = Math.min(xlo, steps[i]); xhi = Math.max(xhi, steps[i]);
        ylo = Math.min(ylo, values[i], drawn[i]); yhi = Math.max(yhi, values[i], drawn[i]);
      }
      lines.push({ run, steps, values, drawn });
    }
    const svg = sv("svg", { class: "chart", width: W, height: H, "data-metric": metric,
                            viewBox: `0 0 ${W} ${H}` });
    svg.appendChild(sv("text", { x: M.l, y: 15, class: "chart-title" }, metric));
    const wrap = el("div", { class: "chart-wrap" }, svg);
    if (lines.length === 0) {
      svg.appendChild(sv("text", { x: W / 2, y: H / 2, class: "chart-empty", "text-anchor": "middle" },
        "no data in the chosen runs"));
      return wrap;
    }
    if (xlo === xhi) { xlo -= 1; xhi += 1; }
    if (ylo === yhi) { const d = Math.abs(ylo) * 0.1 || 1; ylo -= d; yhi += d; }
    const pad = (yhi - ylo) * 0.05;
    ylo -= pad; yhi += pad;
    const X = (x) => M.l + (x - xlo) / (xhi - xlo) * (W - M.l - M.r);
    const Y = (y) => H - M.b - (y - ylo) / (yhi - ylo) * (H - M.t - M.b);
    // Axes and grid.
    const axes = sv("g", { class: "axes" });
    for (const t of niceTicks(ylo, yhi, 5)) {
      axes.appendChild(sv("line", { x1: M.l, x2: W - M.r, y1: Y(t), y2: Y(t), class: "grid" }));
      axes.appendChild(sv("text", { x: M.l - 6, y: Y(t) + 4, "text-anchor": "end" }, fmt(t)));
    }
    for (const t of niceTicks(xlo, xhi, Math.max(2, Math.floor(W / 90)))) {
      if (!Number.isInteger(t)) continue;
      axes.appendChild(sv("line", { x1: X(t), x2: X(t), y1: H - M.b, y2: H - M.b + 4, class: "tick" }));
      axes.appendChild(sv("text", { x: X(t), y: H - M.b + 16, "text-anchor": "middle" }, String(t)));
    }
    axes.appendChild(sv("line", { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, class: "axis" }));
    axes.appendChild(sv("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b, class: "axis" }));
    svg.appendChild(axes);
    // Curves: the raw values faint under the smoothed one when smoothing is on.
    for (const ln of lines) {
      const color = runColor(ln.run.id);
      const d = (vals) => ln.steps.map((x, i) => `${i ? "L" : "M"}${X(x).toFixed(2)},${Y(vals[i]).toFixed(2)}`).join("");
      if (state.smoothing > 0)
        svg.appendChild(sv("path", { d: d(ln.values), class: "curve-raw", stroke: color }));
      svg.appendChild(sv("path", {
        d: d(ln.drawn), class: isVal ? "curve val" : "curve", stroke: color,
        "data-run": ln.run.id, "data-metric": metric, "data-points": ln.steps.length,
        "data-steps": ln.steps.join(","), "data-values": ln.values.join(","),
      }));
      if (isVal || ln.steps.length === 1) {
        const g = sv("g", { class: "val-points", "data-run": ln.run.id, "data-metric": metric });
        ln.steps.forEach((x, i) => g.appendChild(sv("circle", {
          cx: X(x), cy: Y(ln.values[i]), r: 4, class: "val-pt", fill: color,
          "data-step": x, "data-value": ln.values[i] })));
        svg.appendChild(g);
      }
    }
    // Hover: a cursor at the nearest step and every run's value there.
    const cursor = sv("line", { class: "cursor", y1: M.t, y2: H - M.b, x1: -10, x2: -10 });
    svg.appendChild(cursor);
    svg.addEventListener("mousemove", (ev) => {
      const rect = svg.getBoundingClientRect();
      const px = (ev.clientX - rect.left) * (W / rect.width);
      const xs = xlo + (px - M.l) / (W - M.l - M.r) * (xhi - xlo);
      let best = null;
      for (const ln of lines) for (const x of ln.steps)
        if (best === null || Math.abs(x - xs) < Math.abs(best - xs)) best = x;
      cursor.setAttribute("x1", X(best)); cursor.setAttribute("x2", X(best));
      const tip = $("chart-tip");
      clear(tip);
      tip.appendChild(el("div", { class: "tip-head" }, `${metric} · step ${best}`));
      for (const ln of lines) {
        const i = ln.steps.lastIndexOf(best);
        if (i < 0) continue;
        const sm = state.smoothing > 0 ? ` (smoothed ${fmt(ln.drawn[i])})` : "";
        tip.appendChild(el("div", null, el("span", { class: "swatch", style: { background: runColor(ln.run.id) } }),
          `${ln.run.name}: ${fmt(ln.values[i])}${sm}`));
      }
      tip.hidden = false;
      tip.style.left = `${ev.pageX + 14}px`;
      tip.style.top = `${ev.pageY + 10}px`;
    });
    svg.addEventListener("mouseleave", () => {
      $("chart-tip").hidden = true;
      cursor.setAttribute("x1", -10); cursor.setAttribute("x2", -10);
    });
    return wrap;
  }

  // ---------------------------------------------------------------- token rendering

  const SPECIAL = /^<\|[^|]*\|>$|^<\/?(think|tool_call|tool_response)>$/;

  // Per-token value of the chosen quantity for one step, or null where absent.
  function tokenValues(step, by) {
    const n = (step.response_ids || []).length;
    const pick = (arr) => (Array.isArray(arr) && arr.length === n ? arr : null);
    if (by === "advantage") return pick(step.advantage) || pick(step.advantages);
    if (by === "logprob") return pick(step.response_logprobs);
    if (by === "kl") return pick(step.token_kl);
    if (by === "gap") {
      const a = pick(step.learner_logprobs), b = pick(step.response_logprobs);
      return a && b ? a.map((v, i) => v - b[i]) : null;
    }
    return null;
  }

  // Colour of value v under quantity `by`, given the scale (max magnitude) of the page.
  function tokenColor(v, by, scale) {
    if (v === null || v === undefined || !isFinite(v)) return "";
    if (by === "advantage" || by === "gap") {
      const a = Math.min(1, Math.abs(v) / (scale || 1));
      if (a < 1e-9) return "";
      const rgb = by === "advantage" ? (v > 0 ? "22,163,74" : "220,38,38")   // green / red
                                     : (v > 0 ? "37,99,235" : "234,88,12");  // blue / orange
      return `rgba(${rgb},${(0.12 + 0.6 * a).toFixed(3)})`;
    }
    if (by === "logprob") {  // 1 - p: certain tokens clear, unlikely ones deep orange
      const a = 1 - Math.exp(Math.min(0, v));
      return a < 0.01 ? "" : `rgba(234,88,12,${(0.1 + 0.75 * a).toFixed(3)})`;
    }
    if (by === "kl") {
      const a = Math.min(1, Math.abs(v) / (scale || 1));
      return a < 0.01 ? "" : `rgba(147,51,234,${(0.1 + 0.7 * a).toFixed(3)})`;
    }
    return "";
  }

  const QUANTITY = { advantage: "advantage", logprob: "log-prob", gap: "learner−engine",
                     kl: "KL", none: "" };

  // The prompt tokens [from, to) of a step as span.ptok (or the decoded text without pieces).
  function promptTokens(step, from, to) {
    const frag = document.createDocumentFragment();
    const ids = step.prompt_ids || [];
    const pieces = step.prompt_pieces;
    if (!Array.isArray(pieces)) {
      for (let i = from; i < to; i++)
        frag.appendChild(el("span", { class: "ptok id-only", "data-id": ids[i], title: `id ${ids[i]}` }, `${ids[i]} `));
      return frag;
    }
    for (let i = from; i < to; i++) {
      const p = pieces[i];
      const span = document.createElement("span");
      span.className = SPECIAL.test(p) ? "ptok special" : "ptok";
      span.setAttribute("data-id", ids[i]);
      span.title = `#${i} id ${ids[i]} ${JSON.stringify(p)}`;
      span.textContent = p;
      frag.appendChild(span);
    }
    return frag;
  }

  function responseTokens(step, by, scale) {
    const box = el("div", { class: "response tokens" });
    const ids = step.response_ids || [];
    const pieces = step.response_pieces;
    const vals = by === "none" ? null : tokenValues(step, by);
    const lp = step.response_logprobs || [];
    for (let i = 0; i < ids.length; i++) {
      const v = vals ? vals[i] : null;
      const text = Array.isArray(pieces) ? pieces[i] : `${ids[i]} `;
      let title = `#${i} id ${ids[i]}`;
      if (Array.isArray(pieces)) title += ` ${JSON.stringify(text)}`;
      if (v !== null && v !== undefined) title += `\n${QUANTITY[by]} ${fmt(v)}`;
      if (by !== "logprob" && typeof lp[i] === "number") title += `\nlog-prob ${fmt(lp[i])}`;
      // Plain DOM calls here, not el(): this runs once per token (tens of thousands).
      const span = document.createElement("span");
      span.className = Array.isArray(pieces) ? (SPECIAL.test(text) ? "tok special" : "tok") : "tok id-only";
      span.setAttribute("data-id", ids[i]);
      if (v !== null && v !== undefined) span.setAttribute("data-value", v);
      span.title = title;
      span.textContent = text;
      const c = tokenColor(v, by, scale);
      if (c) span.style.backgroundColor = c;
      box.appendChild(span);
    }
    if (!Array.isArray(pieces) && typeof step.response_text === "string")
      box.appendChild(el("pre", { class: "response-text" }, step.response_text));
    return box;
  }

  // The largest |value| of quantity `by` over the given trajectories (the colour scale).
  // A dump record as the page can draw it: steps a list of objects whose id and value
  // columns are lists (a malformed record keeps what is usable and says what was not).
  function sanitize(t) {
    if (!t || typeof t !== "object" || Array.isArray(t)) t = { malformed: `not an object: ${JSON.stringify(t)}` };
    const problems = [];
    if (!Array.isArray(t.steps)) {
      if (t.steps !== undefined) problems.push("steps is not a list");
      t.steps = [];
    }
    t.steps = t.steps.filter((s, i) => {
      const ok = s && typeof s === "object" && !Array.isArray(s);
      if (!ok) problems.push(`step ${i} is not an object`);
      return ok;
    });
    for (const s of t.steps)
      for (const k of ["prompt_ids", "response_ids", "response_logprobs", "prompt_pieces", "response_pieces"])
        if (s[k] !== undefined && !Array.isArray(s[k])) { problems.push(`${k} is not a list`); delete s[k]; }
    if (t.metrics !== undefined && (typeof t.metrics !== "object" || t.metrics === null)) delete t.metrics;
    if (problems.length) t.malformed = (t.malformed ? t.malformed + "; " : "") + problems.join("; ");
    return t;
  }

  function scaleOf(trajs, by) {
    let m = 0;
    for (const t of trajs) for (const s of t.steps || []) {
      const v = tokenValues(s, by);
      if (v) for (const x of v) if (isFinite(x)) m = Math.max(m, Math.abs(x));
    }
    return m || 1;
  }

  function toolCalls(text) {
    const out = [];
    const re = /<tool_call>([\s\S]*?)(<\/tool_call>|$)/g;
    let m;
    while ((m = re.exec(text || "")) !== null) out.push(m[1].trim());
    return out;
  }

  function stepReward(s) { return typeof s.reward === "number" ? s.reward : null; }

  // One step (turn) of a trajectory: the prompt as the policy saw it, the response.
  function renderStep(step, index, by, scale, opts) {
    const carried = Math.max(0, Math.min(step.prompt_carried || 0, (step.prompt_ids || []).length));
    const nprompt = (step.prompt_ids || []).length;
    const info = step.info || {};
    const meta = el("div", { class: "step-meta", title: `info: ${JSON.stringify(info, null, 1)}` },
      el("b", null, `turn ${index}`),
      ` · policy v${step.policy_version ?? "?"}`,
      ` · reward ${fmt(stepReward(step))}`,
      ` · ${(step.response_ids || []).length} response tokens`,
      info.finish_reason ? ` · ${info.finish_reason}` : "",
      step.done ? " · done" : "",
      step.truncated ? el("span", { class: "badge warn" }, "truncated") : "",
      step.prompt_rewritten ? el("span", { class: "badge rewritten",
        title: "the context policy dropped or changed earlier context: this prompt is not the previous prompt + response" },
        "context rewritten") : "",
      step.decode_error ? el("span", { class: "badge warn", title: String(step.decode_error) },
        "not decodable with this tokenizer (pass --tokenizer)") : "");
    const box = el("div", { class: "tstep", "data-turn": index });
    box.appendChild(meta);
    const prompt = el("div", { class: "prompt tokens" + (step.prompt_rewritten ? " rewritten" : "") });
    if (carried > 0) {
      const det = el("details", { class: "carried" },
        el("summary", null, `${carried} prompt tokens carried unchanged from turn ${index - 1}`));
      det.addEventListener("toggle", () => {
        if (det.open && det.childNodes.length === 1) det.appendChild(promptTokens(step, 0, carried));
      }, { once: false });
      prompt.appendChild(det);
    }
    if (carried === 0 && index === 0) {
      // The first prompt (system + task): open, foldable; folded in the validation columns.
      const det = el("details", { class: "prompt0", open: !opts.collapsePrompt },
        el("summary", null, `prompt (${nprompt} tokens)`));
      det.appendChild(el("div", { class: "prompt-first" }, promptTokens(step, 0, nprompt)));
      prompt.appendChild(det);
    } else if (nprompt > carried) {
      const label = step.prompt_rewritten ? "rewritten context + environment's answer" : "environment's answer";
      prompt.appendChild(el("div", { class: "prompt-new", "data-from": carried,
        "data-count": nprompt - carried }, el("span", { class: "part-label" }, label),
        promptTokens(step, carried, nprompt)));
    }
    if (!Array.isArray(step.prompt_pieces) && typeof step.prompt_text === "string")
      prompt.appendChild(el("pre", { class: "response-text" }, step.prompt_text));
    box.appendChild(prompt);
    const resp = el("div", { class: "response-box" },
      el("span", { class: "part-label" }, "response"), responseTokens(step, by, scale));
    for (const call of toolCalls(step.response_text))
      resp.appendChild(el("div", { class: "toolcall" }, el("span", { class: "part-label" }, "tool call"), call));
    box.appendChild(resp);
    return box;
  }

  function trajReward(t) {
    if (typeof t.score === "number") return t.score;
    if (typeof t.outcome_reward === "number") return t.outcome_reward;
    if (typeof t.reward === "number") return t.reward;
    return null;
  }
  const trajMetrics = (t) => t.metrics || {};
  function trajLength(t) {
    const m = trajMetrics(t);
    if (typeof m.response_length === "number") return m.response_length;
    return (t.steps || []).reduce((a, s) => a + (s.response_ids || []).length, 0);
  }
  function trajTruncated(t) {
    const m = trajMetrics(t);
    if (typeof m.truncated === "number") return m.truncated > 0;
    return (t.steps || []).some((s) => s.truncated);
  }

  function renderTrajectory(t, by, scale, opts) {
    const m = trajMetrics(t);
    const head = el("div", { class: "traj-head" },
      el("b", null, t.uid || "(no uid)"),
      ` · reward ${fmt(trajReward(t))}`,
      typeof t.advantage === "number" ? ` · advantage ${fmt(t.advantage)}` : "",
      ` · ${m.num_turns ?? (t.steps || []).length} turns`,
      ` · ${trajLength(t)} response tokens`,
      typeof m.tool_calls === "number" ? ` · ${m.tool_calls} tool calls` : "",
      typeof m.success === "number" ? el("span", { class: m.success ? "badge ok" : "badge bad" },
        m.success ? "success" : "fail") : "",
      trajTruncated(t) ? el("span", { class: "badge warn" }, "truncated") : "",
      t.excluded ? el("span", { class: "badge warn", title: "left out of training" }, `excluded: ${t.excluded}`) : "",
      t.malformed ? el("span", { class: "badge bad malformed", title: String(t.malformed) }, `malformed record: ${t.malformed}`) : "",
      t.infra_failure ? el("span", { class: "badge bad" }, `infra failure: ${typeof t.infra_failure === "string" ? t.infra_failure : "yes"}`) : "");
    const box = el("div", { class: "traj", "data-uid": t.uid || "", "data-group": t.group || "" }, head);
    (t.steps || []).forEach((s, i) => box.appendChild(renderStep(s, i, by, scale, opts || {})));
    return box;
  }

  // ---------------------------------------------------------------- trajectories tab

  const trajState = { loaded: false, trajs: [], key: "" };

  function fillRunSelect(sel) {
    const cur = sel.value;
    clear(sel);
    for (const run of state.runs) sel.appendChild(el("option", { value: run.id }, run.name));
    if (cur !== "" && state.runs.some((r) => String(r.id) === cur)) sel.value = cur;
  }

  function refreshStepSelect() {
    const sel = $("traj-step");
    const run = Number($("traj-run").value);
    const kind = $("traj-kind").value;
    const steps = (state.steps.get(run) || { train: [], val: [] })[kind] || [];
    const cur = sel.value;
    const want = steps.map(String).join();
    if ([...sel.options].map((o) => o.value).join() === want) return;
    clear(sel);
    for (const s of steps) sel.appendChild(el("option", { value: s }, String(s)));
    if (steps.length === 0) sel.appendChild(el("option", { value: "" }, "(no dumps)"));
    sel.value = steps.map(String).includes(cur) ? cur : (steps.length ? String(steps[0]) : "");
    if (sel.value !== cur && !$("pane-traj").hidden) loadTrajectories();
  }

  async function loadTrajectories() {
    trajState.loaded = true;
    const run = $("traj-run").value;
    const kind = $("traj-kind").value;
    const step = $("traj-step").value;
    const list = $("traj-list");
    if (run === "" || step === "") {
      clear(list);
      list.appendChild(el("div", { class: "empty" }, "No trajectory dumps in this run (trainer.dump_trajectories)."));
      return;
    }
    const key = `${run}/${kind}/${step}`;
    trajState.key = key;
    clear(list);
    list.appendChild(el("div", { class: "empty" }, "loading…"));
    try {
      const ans = await api(`/api/trajectories?${q({ run, step, kind })}`);
      if (trajState.key !== key) return;
      showError("traj", null);
      trajState.trajs = (ans.trajectories || []).map(sanitize);
      fillGroups();
      renderTrajList();
    } catch (e) {
      if (trajState.key !== key) return;
      showError("traj", e.message);
      clear(list);
      list.appendChild(el("div", { class: "empty" }, e.message));
    }
  }

  function fillGroups() {
    const sel = $("traj-group");
    const cur = sel.value;
    clear(sel);
    const groups = new Map();
    for (const t of trajState.trajs) {
      const g = String(t.group ?? t.uid ?? "");
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(t);
    }
    for (const [g, ts] of groups) {
      const rs = ts.map(trajReward).filter((r) => r !== null);
      const mean = rs.length ? rs.reduce((a, b) => a + b, 0) / rs.length : null;
      sel.appendChild(el("option", { value: g }, `${g} (${ts.length}, reward ${fmt(mean)})`));
    }
    sel.appendChild(el("option", { value: "*" }, `all groups (${trajState.trajs.length})`));
    sel.value = groups.has(cur) || cur === "*" ? cur : (groups.size ? groups.keys().next().value : "*");
  }

  function numOrNull(id) {
    const v = $(id).value.trim();
    return v === "" || !isFinite(Number(v)) ? null : Number(v);
  }

  function renderTrajList() {
    const list = $("traj-list");
    clear(list);
    const group = $("traj-group").value;
    const by = $("color-by").value;
    const rmin = numOrNull("f-reward-min"), rmax = numOrNull("f-reward-max");
    const lmin = numOrNull("f-len-min"), lmax = numOrNull("f-len-max");
    const succ = $("f-success").value, trunc = $("f-trunc").value;
    const inGroup = trajState.trajs.filter((t) => group === "*" || String(t.group ?? t.uid ?? "") === group);
    const shown = inGroup.filter((t) => {
      let r, len, m;
      try {
        r = trajReward(t); len = trajLength(t); m = trajMetrics(t);
      } catch (e) {
        return true;  // a malformed record: shown as such below, not hidden
      }
      if (rmin !== null && !(r !== null && r >= rmin)) return false;
      if (rmax !== null && !(r !== null && r <= rmax)) return false;
      if (lmin !== null && len < lmin) return false;
      if (lmax !== null && len > lmax) return false;
      if (succ !== "" && String(m.success ? 1 : 0) !== succ) return false;
      if (trunc !== "" && (trajTruncated(t) ? "1" : "0") !== trunc) return false;
      return true;
    });
    $("traj-count").textContent = `showing ${shown.length} of ${inGroup.length}`;
    const scale = scaleOf(trajState.trajs, by);
    renderColorLegend(by, scale);
    if (shown.length === 0)
      list.appendChild(el("div", { class: "empty" },
        trajState.trajs.length ? "No trajectory matches the filters." : "This dump is empty."));
    // Rendered a page at a time: 64 trajectories of 2k tokens are 100k+ spans.
    const PAGE = 24;
    let done = 0;
    const more = () => {
      const frag = document.createDocumentFragment();
      for (const t of shown.slice(done, done + PAGE)) {
        try {
          frag.appendChild(renderTrajectory(t, by, scale));
        } catch (e) {  // one malformed record does not blank the list
          frag.appendChild(el("div", { class: "traj empty" },
            `A record of this dump could not be shown (${e.message}): ${JSON.stringify(t).slice(0, 200)}`));
        }
      }
      done = Math.min(shown.length, done + PAGE);
      list.appendChild(frag);
      if (done < shown.length)
        list.appendChild(el("button", { id: "traj-more", onclick: (ev) => { ev.target.remove(); more(); } },
          `show ${Math.min(PAGE, shown.length - done)} more (${shown.length - done} left)`));
    };
    more();
  }

  function renderColorLegend(by, scale) {
    const box = $("color-legend");
    clear(box);
    if (by === "none") return;
    const stops = by === "advantage" || by === "gap" ? [-scale, -scale / 2, 0, scale / 2, scale]
      : by === "logprob" ? [0, -0.1, -0.7, -2, -5] : [0, scale / 4, scale / 2, scale];
    for (const v of stops) box.appendChild(el("span", { class: "legend-cell",
      style: { backgroundColor: tokenColor(v, by, scale) || "transparent" } }, fmt(v)));
  }

  // ---------------------------------------------------------------- validation tab

  const valState = { loaded: false, key: "", stale: false };

  async function loadValIndex() {
    valState.loaded = true;
    const run = Number($("val-run").value);
    const sel = $("val-index");
    const steps = (state.steps.get(run) || { val: [] }).val;
    clear(sel);
    if (!steps.length) {
      clear($("val-cols")); clear($("val-sample"));
      $("val-cols").appendChild(el("div", { class: "empty" }, "No validation dumps in this run."));
      return;
    }
    try {
      const ans = await api(`/api/trajectories?${q({ run, step: steps[0], kind: "val" })}`);
      showError("val", null);
      (ans.trajectories || []).forEach((t, i) => {
        const msgs = (t.sample && t.sample.prompt) || [];
        const user = [...msgs].reverse().find((m) => m.role === "user") || msgs[msgs.length - 1];
        const text = user && typeof user.content === "string" ? user.content : (t.uid || "");
        sel.appendChild(el("option", { value: i }, `${i}: ${String(text).slice(0, 90)}`));
      });
      await loadValCompare();
    } catch (e) {
      showError("val", e.message);
    }
  }

  async function loadValCompare() {
    const run = $("val-run").value, index = $("val-index").value;
    const cols = $("val-cols"), sample = $("val-sample");
    if (index === "") return;
    const key = `${run}/${index}`;
    valState.key = key;
    try {
      const ans = await api(`/api/val_compare?${q({ run, index })}`);
      if (valState.key !== key) return;
      showError("val", null);
      clear(cols); clear(sample);
      const s = ans.sample || {};
      const msgs = Array.isArray(s.prompt) ? s.prompt : [];
      for (const m of msgs)
        sample.appendChild(el("div", { class: `msg role-${m.role}` }, el("b", null, `${m.role}: `),
          typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
      if (s.reward_model) sample.appendChild(el("div", { class: "msg muted" },
        `reward model: ${JSON.stringify(s.reward_model)}`));
      for (const x of ans.steps || []) x.trajectory = sanitize(x.trajectory);
      const trajs = (ans.steps || []).map((x) => x.trajectory);
      const by = "logprob";
      const scale = scaleOf(trajs, by);
      for (const x of ans.steps || []) {
        const col = el("div", { class: "val-col", "data-step": x.step },
          el("h3", null, `step ${x.step}`),
          renderTrajectory(x.trajectory, by, scale, { collapsePrompt: true }));
        cols.appendChild(col);
      }
      if (!(ans.steps || []).length) cols.appendChild(el("div", { class: "empty" }, "No validation step has this prompt."));
    } catch (e) {
      showError("val", e.message);
    }
  }

  // ---------------------------------------------------------------- config tab

  async function loadConfig() {
    const run = $("config-run").value;
    if (run === "") return;
    try {
      const [cfg, sum] = await Promise.all([api(`/api/config?${q({ run })}`), api(`/api/summary?${q({ run })}`)]);
      showError("config", null);
      $("config-text").textContent = cfg.text || "(no config.yaml)";
      $("summary-text").textContent = Object.keys(sum).length ? JSON.stringify(sum, null, 2) : "(no summary.json yet)";
    } catch (e) {
      showError("config", e.message);
    }
  }

  // ---------------------------------------------------------------- start

  async function start() {
    $("smooth").addEventListener("input", (ev) => {
      state.smoothing = Number(ev.target.value);
      $("smooth-value").textContent = ev.target.value;
      renderCharts();
    });
    $("metric-filter").addEventListener("input", renderMetricList);
    $("traj-run").addEventListener("change", () => { refreshStepSelect(); loadTrajectories(); });
    $("traj-kind").addEventListener("change", () => { refreshStepSelect(); loadTrajectories(); });
    $("traj-step").addEventListener("change", loadTrajectories);
    for (const id of ["traj-group", "color-by", "f-success", "f-trunc"])
      $(id).addEventListener("change", renderTrajList);
    for (const id of ["f-reward-min", "f-reward-max", "f-len-min", "f-len-max"])
      $(id).addEventListener("input", renderTrajList);
    $("val-run").addEventListener("change", loadValIndex);
    $("val-index").addEventListener("change", loadValCompare);
    $("config-run").addEventListener("change", loadConfig);
    let resizeTimer = 0;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(renderCharts, 150);
    });

    try {
      const ans = await api("/api/runs");
      state.runs = ans.runs || [];
      showError("runs", null);
    } catch (e) {
      showError("runs", e.message);
    }
    if (state.runs.length === 0)
      $("charts").appendChild(el("div", { class: "empty" }, "The server lists no runs."));
    for (const run of state.runs) {
      state.metrics.set(run.id, { next: 0, file: "", series: new Map() });
      if (state.shown.size < PALETTE.length) state.shown.add(run.id);
    }
    for (const id of ["traj-run", "val-run", "config-run"]) fillRunSelect($(id));
    renderRunList();
    await pollAll();
    pickDefaultMetrics();
    renderMetricList();
    refreshStepSelect();
    showTab(location.hash.slice(1) || "curves");
    document.body.dataset.ready = "1";
    setInterval(pollAll, POLL_MS);
  }

  start();
})();
