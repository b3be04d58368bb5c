// Opens nodeip-trace HTML reports in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core; no browser download) as a reader would, from file:// with no network, and
// checks the report contract (see tests/browser/sample.html):
//   - no request leaves the file (anything but file:, data:, about: fails), no console error, no
//     page error, no dialog — once as the file is (its Content-Security-Policy in force), and once
//     more with the CSP bypassed, so that an unescaped string from the node would run and fail
//     here instead of being hidden by the policy;
//   - a CSP meta with default-src 'none'; sections #diagnoses, #timeline (an inline
//     svg.swimlane), #audit and #calls; no <script>, no on* attribute anywhere;
//   - each article.diagnosis has an id, data-id, data-severity and at least one a.evidence whose
//     href (#row-K) names an element of the document; every in-page link resolves;
//   - lanes: g.lane[data-lane] with label text, one g.lane.kernel; rows g.row with id row-K;
//   - what the spec expects: the diagnosis ids in order, lanes by process name, texts that must
//     show as text (hostile names escaped), how many process lanes at least.
// A full-page screenshot goes where the spec says.
//
// Usage: node report_check.mjs SPEC.json   (or - for stdin), where SPEC is
//   [{"file": "target/report/000.html", "screenshot": "target/report/000.png",
//     "expect": {"diagnoses": ["gai-reordered"], "lanes": ["getent"], "min_process_lanes": 1,
//                "kernel_lane": true, "texts": ["<script>alert(1)</script>"]}}, …]
// Prints {"ok": bool, "results": [{"file", "ok", "failures": […], …}]} on stdout; exits 0 when
// every file passed, 1 when one failed, 2 when the harness itself could not run.
//
// Environment: NODEIP_BROWSER_TOOLS (default: target/browser-tools of this workspace, where
// `cargo xtask setup --for-tests` installs playwright-core), CHROMIUM (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import { readFileSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tools = process.env.NODEIP_BROWSER_TOOLS || resolve(here, '../../target/browser-tools');
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

function die(message) {
  process.stderr.write(`report_check: ${message}\n`);
  process.exit(2);
}

let chromium;
try {
  ({ chromium } = createRequire(resolve(tools, 'package.json'))('playwright-core'));
} catch (e) {
  die(`cannot load playwright-core from ${tools} (run \`cargo xtask setup --for-tests\`): ${e.message}`);
}

const specArg = process.argv[2];
if (!specArg) die('usage: node report_check.mjs SPEC.json|-');
let specs;
try {
  specs = JSON.parse(readFileSync(specArg === '-' ? 0 : specArg, 'utf8'));
} catch (e) {
  die(`reading the spec ${specArg}: ${e.message}`);
}
if (!Array.isArray(specs)) die('the spec must be a JSON array of {file, screenshot, expect}');

const allowedScheme = (url) => /^(file|data|about):/.test(url);

// Listens to everything a page does that the contract forbids; returns what it saw.
function watch(page) {
  const seen = { requests: [], failedRequests: [], consoleErrors: [], pageErrors: [], dialogs: [] };
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('requestfailed', (r) => seen.failedRequests.push(`${r.url()}: ${r.failure()?.errorText}`));
  page.on('console', (m) => {
    if (m.type() === 'error') seen.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => seen.pageErrors.push(String(e)));
  page.on('dialog', async (d) => {
    seen.dialogs.push(`${d.type()}: ${d.message()}`);
    await d.dismiss().catch(() => {});
  });
  return seen;
}

function forbidden(seen, when) {
  const failures = [];
  for (const url of seen.requests.filter((u) => !allowedScheme(u))) {
    failures.push(`${when}: a request left the file: ${url}`);
  }
  for (const f of seen.failedRequests) failures.push(`${when}: a request failed: ${f}`);
  for (const e of seen.consoleErrors) failures.push(`${when}: console error: ${e}`);
  for (const e of seen.pageErrors) failures.push(`${when}: page error: ${e}`);
  for (const d of seen.dialogs) failures.push(`${when}: a dialog opened (script ran): ${d}`);
  return failures;
}

// Runs in the page: what the document holds, as plain data.
function inspect() {
  const lanes = [...document.querySelectorAll('#timeline svg.swimlane g.lane')].map((g) => ({
    lane: g.getAttribute('data-lane'),
    kernel: g.classList.contains('kernel'),
    label: g.textContent.trim(),
  }));
  const diagnoses = [...document.querySelectorAll('#diagnoses article.diagnosis')].map((a) => ({
    id: a.id,
    dataId: a.getAttribute('data-id'),
    severity: a.getAttribute('data-severity'),
    evidence: [...a.querySelectorAll('a.evidence')].map((e) => e.getAttribute('href')),
  }));
  const links = [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'));
  const dangling = links
    .filter((h) => h.startsWith('#'))
    .filter((h) => !document.getElementById(decodeURIComponent(h.slice(1))));
  const handlers = [];
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      if (/^on/i.test(attr.name)) handlers.push(`<${el.localName} ${attr.name}>`);
    }
  }
  const svg = document.querySelector('#timeline svg.swimlane');
  const box = svg ? svg.getBoundingClientRect() : null;
  const csp = [...document.querySelectorAll('meta[http-equiv]')]
    .filter((m) => m.getAttribute('http-equiv').toLowerCase() === 'content-security-policy')
    .map((m) => m.getAttribute('content'));
  const notice = document.getElementById('lanes-left-out');
  return {
    title: document.title,
    csp,
    sections: ['diagnoses', 'timeline', 'audit', 'calls'].filter(
      (id) => document.querySelector(`section#${id}`) === null,
    ),
    svg: box ? { width: box.width, height: box.height } : null,
    lanes,
    diagnoses,
    evidenceCount: diagnoses.reduce((n, d) => n + d.evidence.length, 0),
    dangling,
    rows: [...document.querySelectorAll('#timeline g.row')].map((g) => ({
      id: g.id,
      decision: g.classList.contains('decision'),
    })),
    scripts: document.querySelectorAll('script').length,
    handlers,
    notice: notice ? notice.textContent.trim() : null,
    text: document.documentElement.textContent,
  };
}

function contract(doc, expect) {
  const failures = [];
  const fail = (m) => failures.push(m);
  if (!doc.title.trim()) fail('the document has no <title>');
  if (!doc.csp.some((c) => /default-src\s+'none'/.test(c))) {
    fail(`no Content-Security-Policy meta with default-src 'none' (found ${JSON.stringify(doc.csp)})`);
  }
  for (const id of doc.sections) fail(`section#${id} is missing`);
  if (!doc.svg) fail('#timeline has no svg.swimlane');
  else if (doc.svg.width <= 0 || doc.svg.height <= 0) fail(`svg.swimlane is not visible: ${JSON.stringify(doc.svg)}`);
  if (doc.scripts) fail(`${doc.scripts} <script> element(s) in the document`);
  for (const h of doc.handlers) fail(`an event-handler attribute: ${h}`);
  for (const d of doc.diagnoses) {
    const name = d.id || d.dataId || '(no id)';
    if (!/^diag-/.test(d.id)) fail(`diagnosis ${name}: id is not diag-N`);
    if (!d.dataId) fail(`diagnosis ${name}: no data-id`);
    if (!d.severity) fail(`diagnosis ${name}: no data-severity`);
    if (!d.evidence.length) fail(`diagnosis ${name}: no a.evidence link`);
    for (const href of d.evidence.filter((h) => !h.startsWith('#'))) {
      fail(`diagnosis ${name}: evidence link ${href} does not point into the document`);
    }
  }
  for (const href of doc.dangling) fail(`link ${href} names no element of the document`);
  for (const lane of doc.lanes) {
    if (!lane.lane) fail('a g.lane without data-lane');
    if (!lane.label) fail(`lane ${lane.lane} has no label text`);
  }
  const kernelLanes = doc.lanes.filter((l) => l.kernel);
  const processLanes = doc.lanes.filter((l) => !l.kernel);
  if (kernelLanes.length > 1) fail(`${kernelLanes.length} kernel lanes (one expected)`);
  for (const row of doc.rows.filter((r) => !/^row-/.test(r.id))) {
    fail(`a g.row whose id ${JSON.stringify(row.id)} is not row-K`);
  }
  if (doc.notice !== null && !doc.notice) fail('#lanes-left-out is empty');

  if (expect.diagnoses) {
    const ids = doc.diagnoses.map((d) => d.dataId);
    if (JSON.stringify(ids) !== JSON.stringify(expect.diagnoses)) {
      fail(`diagnoses ${JSON.stringify(ids)}, expected ${JSON.stringify(expect.diagnoses)}`);
    }
  }
  if (expect.kernel_lane && kernelLanes.length !== 1) fail('no kernel lane (g.lane.kernel)');
  if (processLanes.length < (expect.min_process_lanes ?? 0)) {
    fail(`${processLanes.length} process lane(s), at least ${expect.min_process_lanes} expected`);
  }
  for (const comm of expect.lanes ?? []) {
    if (!processLanes.some((l) => l.lane.startsWith(comm) && l.label.includes(comm))) {
      fail(`no process lane for ${JSON.stringify(comm)} (lanes: ${JSON.stringify(processLanes.map((l) => l.lane))})`);
    }
  }
  for (const text of expect.texts ?? []) {
    if (!doc.text.includes(text)) fail(`the text ${JSON.stringify(text)} does not show in the document`);
  }
  return failures;
}

async function check(browser, spec) {
  const url = pathToFileURL(resolve(spec.file)).href;
  const expect = spec.expect ?? {};
  const result = { file: spec.file, ok: false, failures: [] };

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, javaScriptEnabled: true });
  const page = await context.newPage();
  const seen = watch(page);
  try {
    await page.goto(url, { waitUntil: 'load', timeout: 30000 });
    const doc = await page.evaluate(inspect);
    result.failures.push(...contract(doc, expect));
    result.lanes = doc.lanes.map((l) => l.lane);
    result.diagnoses = doc.diagnoses.map((d) => d.dataId);
    result.evidence_links = doc.evidenceCount;
    result.rows = doc.rows.length;
    result.decision_rows = doc.rows.filter((r) => r.decision).length;
    result.lanes_left_out = doc.notice;
    if (spec.screenshot) {
      mkdirSync(dirname(resolve(spec.screenshot)), { recursive: true });
      await page.screenshot({ path: spec.screenshot, fullPage: true });
      result.screenshot = spec.screenshot;
    }
  } catch (e) {
    result.failures.push(`opening ${url}: ${e.message}`);
  }
  await context.close();
  result.failures.push(...forbidden(seen, 'as served'));
  result.requests = seen.requests;

  // Again with the CSP bypassed: an unescaped hostile string would run here.
  const bare = await browser.newContext({ bypassCSP: true });
  const barePage = await bare.newPage();
  const bareSeen = watch(barePage);
  try {
    await barePage.goto(url, { waitUntil: 'load', timeout: 30000 });
    await barePage.waitForTimeout(200);
  } catch (e) {
    result.failures.push(`opening ${url} with the CSP bypassed: ${e.message}`);
  }
  await bare.close();
  result.failures.push(...forbidden(bareSeen, 'with the CSP bypassed'));

  result.ok = result.failures.length === 0;
  return result;
}

let browser;
try {
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
} catch (e) {
  die(`launching ${chromiumPath}: ${e.message}`);
}
const results = [];
for (const spec of specs) results.push(await check(browser, spec));
await browser.close();
const ok = results.every((r) => r.ok);
process.stdout.write(JSON.stringify({ ok, results }, null, 2) + '\n');
process.exit(ok ? 0 : 1);
