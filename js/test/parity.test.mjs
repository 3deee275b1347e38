// For every e2e scenario the JavaScript API must return the verdict the wasm policy returned.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const api = require("../pkg-node/cozystack_resolver.js");
const cases = JSON.parse(readFileSync(new URL("../../target/js/parity-cases.json", import.meta.url)));

test("there are parity cases", () => assert.ok(cases.length >= 40, `only ${cases.length} cases`));

for (const c of cases) {
  test(`parity: ${c.name}`, () => {
    const got = JSON.parse(api.evaluate(JSON.stringify(c.request), JSON.stringify(c.facts), JSON.stringify(c.settings)));
    assert.equal(got.allowed, c.expected.allowed);
    assert.equal(got.code ?? null, c.expected.code ?? null);
    assert.equal(got.message ?? null, c.expected.message ?? null);
    assert.deepEqual(got.warnings ?? [], c.expected.warnings);
    // The row of the rule table that refused, and each warning's, as the module names them.
    assert.equal(got.rule ?? null, c.expected.rule ?? null);
    assert.deepEqual(got.warnedBy ?? [], c.expected.warnedBy);
    // The rows whose refusal a platform writer was let through: data, as the module says it.
    assert.deepEqual(got.waivedBy ?? [], c.expected.waivedBy);
  });
}

test("invalid settings are reported like validate_settings", () => {
  assert.equal(api.validateSettings('{"platformWriters":"maybe"}'), "platformWriters: unknown variant `maybe`, expected `warn` or `deny`");
  assert.equal(api.validateSettings("{}"), undefined);
});

test("malformed input throws with the field named", () => {
  assert.throws(() => api.evaluate("{", "{}", undefined), /request: EOF while parsing/);
});

test("the catalog's RBAC half: a SelfSubjectRulesReview or verbs per resource, and which half refused", () => {
  const cluster = JSON.parse(readFileSync(new URL("../../target/js/cluster.json", import.meta.url)));
  const acme = cluster.namespaces.find((ns) => ns.name === "tenant-acme");
  const carol = cluster.users.find((u) => u.username === "carol");
  const catalog = (access) => Object.fromEntries(JSON.parse(api.catalog(
    JSON.stringify(cluster.definitions), JSON.stringify({ username: "carol", groups: carol.groups }),
    JSON.stringify(acme), JSON.stringify(cluster.instances), JSON.stringify(cluster.settings),
    access === undefined ? undefined : JSON.stringify(access),
  )).map((e) => [e.kind, e]));
  const review = catalog(carol.access);
  assert.equal(review.Redis.canCreate, true);
  assert.equal(review.Monitoring.refusedBy, "rbac");
  assert.equal(review.Monitoring.reason, "RBAC: carol may not create monitorings.apps.cozystack.io in tenant-acme (no role grants it); ask an administrator of the tenant for a role that grants it");
  const verbs = catalog({ monitorings: ["create"], Redis: ["get"] });
  assert.equal(verbs.Monitoring.canCreate, true);
  assert.equal(verbs.Redis.refusedBy, "rbac");
  const policyOnly = catalog(undefined);
  assert.equal(policyOnly.Monitoring.canCreate, true);
  // A slotted kind's entry carries the name the create will use, and its verdict is for it.
  assert.equal(policyOnly.Monitoring.slot, "monitoring");
  assert.equal(policyOnly.Redis.slot, undefined);
  assert.equal(policyOnly.Info.refusedBy, "policy");
  assert.throws(() => catalog([1, 2]), /access: /);
});
