// The example page in a real headless browser (Debian's chromium, driven by playwright-core).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = fileURLToPath(new URL("..", import.meta.url));
const types = { ".html": "text/html", ".js": "text/javascript", ".json": "application/json", ".wasm": "application/wasm" };
let server, browser, page;

before(async () => {
  server = createServer(async (req, res) => {
    const path = normalize(join(root, decodeURIComponent(new URL(req.url, "http://x").pathname)));
    if (!path.startsWith(root)) return res.writeHead(403).end();
    let body;
    try {
      body = await readFile(path);
    } catch {
      return res.writeHead(404).end();
    }
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(body);
  }).listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`http://127.0.0.1:${server.address().port}/example/index.html`);
  await page.waitForSelector("body[data-ready]", { timeout: 15000 }).catch((e) => { throw new Error(`${e.message}; page errors: ${errors}`); });
});

after(async () => {
  await browser?.close();
  server?.close();
});

async function choose(user, namespace) {
  await page.selectOption("#user", { label: user });
  await page.selectOption("#namespace", namespace);
  await page.waitForSelector(`body[data-ready$="/${namespace}"]`);
}

async function row(section, kind) {
  const item = page.locator(`#${section} li[data-kind="${kind}"]`);
  if ((await item.count()) === 0) return null;
  return {
    disabled: await item.locator("button").isDisabled(),
    reason: (await item.locator(".reason").count()) ? await item.locator(".reason").textContent() : null,
    refusedBy: await item.getAttribute("data-refused-by"),
  };
}

async function slotOf(section, kind) {
  const item = page.locator(`#${section} li[data-kind="${kind}"]`);
  return { slot: await item.getAttribute("data-slot"), button: await item.locator("button").textContent() };
}

const rbac = (user, plural, namespace) =>
  `RBAC: ${user} may not create ${plural}.apps.cozystack.io in ${namespace} (no role grants it); ask an administrator of the tenant for a role that grants it`;

test("a tenant user reads the catalog but creates nothing: RBAC's refusal first, then the policy's", async () => {
  await choose("dave — user of tenant-acme", "tenant-acme");
  assert.deepEqual(await row("marketplace", "Redis"), { disabled: true, reason: rbac("dave", "redises", "tenant-acme"), refusedBy: "rbac" });
  const monitoring = await row("modules", "Monitoring");
  assert.equal(monitoring.disabled, true);
  assert.equal(monitoring.refusedBy, "both");
  assert.ok(monitoring.reason.startsWith(`${rbac("dave", "monitorings", "tenant-acme")}; the policy would refuse it too: Monitoring is a tenant module: `), monitoring.reason);
  assert.equal(await row("marketplace", "Monitoring"), null);
  assert.equal(await page.locator("#hidden").textContent(), "");
});

test("a tenant admin's role writes SeaweedFS and Info but not Monitoring; the policy counts Info", async () => {
  await choose("carol — admin of tenant-acme", "tenant-acme");
  assert.deepEqual(await row("modules", "SeaweedFS"), { disabled: false, reason: null, refusedBy: null });
  assert.deepEqual(await row("modules", "Monitoring"), { disabled: true, reason: rbac("carol", "monitorings", "tenant-acme"), refusedBy: "rbac" });
  const info = await row("modules", "Info");
  assert.equal(info.disabled, true);
  assert.equal(info.refusedBy, "policy");
  assert.match(info.reason, /^Info: at most 1 per tenant tenant-acme; already present: info/);
  assert.deepEqual(await row("marketplace", "Redis"), { disabled: false, reason: null, refusedBy: null });
});

test("a super-admin may enable a module that is not there yet, under its slot", async () => {
  await choose("sam — super-admin of tenant-acme", "tenant-acme");
  assert.deepEqual(await row("modules", "Monitoring"), { disabled: false, reason: null, refusedBy: null });
  // Monitoring is held by its name: the page offers the create admission will take.
  assert.deepEqual(await slotOf("modules", "Monitoring"), { slot: "monitoring", button: "Create monitoring" });
  assert.deepEqual(await slotOf("marketplace", "Redis"), { slot: null, button: "Create" });
});

test("a singleton already present is refused by both halves, RBAC named first", async () => {
  await choose("alice — admin of tenant-ktj", "tenant-ktj");
  const monitoring = await row("modules", "Monitoring");
  assert.equal(monitoring.disabled, true);
  assert.equal(monitoring.refusedBy, "both");
  assert.equal(monitoring.reason, `${rbac("alice", "monitorings", "tenant-ktj")}; the policy would refuse it too: Monitoring: at most 1 per tenant tenant-ktj; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)`);
  await page.screenshot({ path: fileURLToPath(new URL("../../target/js/catalog.png", import.meta.url)), fullPage: true });
});
